// The CUDA backend's fused attention (kernels/cuda/attention_forward.hpp, attention_backward.hpp)
// on the device against a loop reference in double: the forward for softmax, the learnable sink,
// clipped softmax and ReLU attention, the backward for softmax; causal, grouped-query heads,
// padded keys. test_cuda_attention_emulated runs the same bodies on the CPU emulator against the
// CPU backend for every score and mask.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "../max_rel_diff.hpp"
#include "on_device.cuh"
#include "sinklab/cuda/attention.cuh"

using namespace sinklab;

namespace {

enum class Kind { Softmax, Sink, Clipped, ReLU };

// out [B, H, T, d] of causal attention in double loops.
std::vector<double> reference(Kind kind, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, const std::vector<double>& sink, const int64_t* kvlen,
                              int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t d) {
  std::vector<double> out(B * H * T * d, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t hk = h / (H / Hkv), e = std::min(i + 1, kvlen[b]);
        std::vector<double> s(e), a(e);
        double mx = kind == Kind::Sink ? sink[h] : -std::numeric_limits<double>::infinity(), z = 0;
        for (int64_t j = 0; j < e; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += q[((b * H + h) * T + i) * d + c] * k[((b * Hkv + hk) * T + j) * d + c];
          s[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, s[j]);
        }
        if (kind == Kind::Sink) z += std::exp(sink[h] - mx);
        for (int64_t j = 0; j < e; ++j) z += std::exp(s[j] - mx);
        for (int64_t j = 0; j < e; ++j) {
          const double p = std::exp(s[j] - mx) / z;
          a[j] = kind == Kind::ReLU      ? std::max(s[j], 0.0) / double(e)
                 : kind == Kind::Clipped ? std::clamp(1.1 * p - 0.1, 0.0, 1.0)
                                         : p;
        }
        for (int64_t j = 0; j < e; ++j)
          for (int64_t c = 0; c < d; ++c) out[((b * H + h) * T + i) * d + c] += a[j] * v[((b * Hkv + hk) * T + j) * d + c];
      }
  return out;
}

// The default launch fits the 48 KiB of dynamic shared memory a kernel gets without opting in;
// `wide` (128 rows, 64-key tiles) needs the opt-in that the host launchers ask for.
constexpr kernels::cuda::host::AttentionLaunch wide{128, 64};

template <class Score, class T>
void check(Kind kind, Score score, double tol, const kernels::cuda::host::AttentionLaunch& cfg = {}) {
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 301, d = 64;
  Rng rng(5);
  auto draw = [&](int64_t n) {
    std::vector<double> x = rng.normal<double>({n}).to_vector();
    std::vector<T> t(x.begin(), x.end());
    return std::pair{std::vector<double>(t.begin(), t.end()), t};  // the values T holds, in double
  };
  const auto [q, qt] = draw(B * H * Tq * d);
  const auto [k, kt] = draw(B * Hkv * Tq * d);
  const auto [v, vt] = draw(B * Hkv * Tq * d);
  const auto [sink, sinkt] = draw(H);
  const std::vector<int64_t> lengths{Tq, 190};
  const std::vector<double> want = reference(kind, q, k, v, sink, lengths.data(), B, H, Hkv, Tq, d);

  using sinklab_test::on_device;
  auto dq = on_device(qt), dk = on_device(kt), dv = on_device(vt), dsink = on_device(sinkt),
       dout = on_device(std::vector<T>(B * H * Tq * d)), dlse = on_device(std::vector<T>(B * H * Tq));
  const auto dlen = on_device(lengths);
  const kernels::cuda::AttentionShape sh{B, H, Hkv, Tq, Tq, d, 0.0, cfg.block_k, dlen.data()};
  typename Score::template Args<T> args{};
  if constexpr (Score::has_sink) args.sink_logit = dsink.data();
  kernels::cuda::host::attention_forward<Score, mask::Causal, T>(score, args, dq.data(), dk.data(), dv.data(), dout.data(),
                                                          dlse.data(), sh, cfg);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "attention_forward");
  const double rel = sinklab_test::max_rel_diff(dout.to_vector(), want);
  INFO(Score::name, " with ", cfg.threads, " threads, block_k ", cfg.block_k, ": max relative difference ", rel);
  CHECK(rel <= tol);
}

// Softmax attention's gradients in double loops: dq, dk, dv for dO (causal, GQA, padded keys).
struct Grads {
  std::vector<double> dq, dk, dv;
};
Grads reference_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const std::vector<double>& dout, const int64_t* kvlen, int64_t B, int64_t H, int64_t Hkv,
                         int64_t T, int64_t d) {
  Grads g{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0), std::vector<double>(v.size(), 0.0)};
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t hk = h / (H / Hkv), e = std::min(i + 1, kvlen[b]);
        const double* qi = &q[((b * H + h) * T + i) * d];
        const double* oi = &dout[((b * H + h) * T + i) * d];
        std::vector<double> p(e), dA(e);
        double mx = -std::numeric_limits<double>::infinity(), z = 0, D = 0;
        for (int64_t j = 0; j < e; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * k[((b * Hkv + hk) * T + j) * d + c];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < e; ++j) z += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < e; ++j) {
          p[j] /= z;
          dA[j] = 0;
          for (int64_t c = 0; c < d; ++c) dA[j] += oi[c] * v[((b * Hkv + hk) * T + j) * d + c];
          D += p[j] * dA[j];
        }
        for (int64_t j = 0; j < e; ++j) {
          const double ds = p[j] * (dA[j] - D);
          for (int64_t c = 0; c < d; ++c) {
            g.dq[((b * H + h) * T + i) * d + c] += scale * ds * k[((b * Hkv + hk) * T + j) * d + c];
            g.dk[((b * Hkv + hk) * T + j) * d + c] += scale * ds * qi[c];
            g.dv[((b * Hkv + hk) * T + j) * d + c] += p[j] * oi[c];
          }
        }
      }
  return g;
}

template <class T>
void check_backward(double tol, kernels::cuda::host::AttentionLaunch cfg = {32, 16}) {
  using Score = score::Softmax;
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 157, d = 32;
  Rng rng(6);
  auto draw = [&](int64_t n) {
    std::vector<double> x = rng.normal<double>({n}).to_vector();
    std::vector<T> t(x.begin(), x.end());
    return std::pair{std::vector<double>(t.begin(), t.end()), t};
  };
  const auto [q, qt] = draw(B * H * Tq * d);
  const auto [k, kt] = draw(B * Hkv * Tq * d);
  const auto [v, vt] = draw(B * Hkv * Tq * d);
  const auto [dout, doutt] = draw(B * H * Tq * d);
  const std::vector<int64_t> lengths{Tq, 101};
  const Grads want = reference_backward(q, k, v, dout, lengths.data(), B, H, Hkv, Tq, d);

  using sinklab_test::on_device;
  auto dq_ = on_device(qt), dk_ = on_device(kt), dv_ = on_device(vt), ddout = on_device(doutt),
       dout_fwd = on_device(std::vector<T>(qt.size())), dlse = on_device(std::vector<T>(B * H * Tq)),
       dD = on_device(std::vector<T>(B * H * Tq)), gq = on_device(std::vector<T>(qt.size())),
       gk = on_device(std::vector<T>(kt.size())), gv = on_device(std::vector<T>(vt.size()));
  const auto dlen = on_device(lengths);
  const kernels::cuda::AttentionShape sh{B, H, Hkv, Tq, Tq, d, 0.0, cfg.block_k, dlen.data()};
  kernels::cuda::host::attention_forward<Score, mask::Causal, T>({}, {}, dq_.data(), dk_.data(), dv_.data(), dout_fwd.data(),
                                                          dlse.data(), sh, cfg);
  kernels::cuda::host::attention_backward<Score, mask::Causal, T>({}, {}, dq_.data(), dk_.data(), dv_.data(), dout_fwd.data(),
                                                           dlse.data(), ddout.data(), gq.data(), gk.data(), gv.data(),
                                                           nullptr, dD.data(), nullptr, sh, cfg);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "attention backward kernels");
  CHECK(sinklab_test::max_rel_diff(gq.to_vector(), want.dq) <= tol);
  CHECK(sinklab_test::max_rel_diff(gk.to_vector(), want.dk) <= tol);
  CHECK(sinklab_test::max_rel_diff(gv.to_vector(), want.dv) <= tol);
}

}  // namespace

TEST_CASE("cuda: fused attention backward on the device equals the loop reference (softmax, double and float)") {
  check_backward<double>(1e-11);
  check_backward<float>(2e-5);
  check_backward<float>(2e-5, wide);
}

TEST_CASE("cuda: fused attention forward on the device equals the loop reference (double)") {
  const kernels::cuda::host::AttentionLaunch half{32, 16};  // doubles: half the rows and keys of the float default
  check<score::Softmax, double>(Kind::Softmax, {}, 1e-12, half);
  check<score::SoftmaxSink, double>(Kind::Sink, {}, 1e-12, half);
  check<score::ClippedSoftmax, double>(Kind::Clipped, score::ClippedSoftmax{1.0, -0.1}, 1e-12, half);
  check<score::ReLU, double>(Kind::ReLU, {}, 1e-12, half);
}

TEST_CASE("cuda: fused attention forward on the device equals the loop reference (float)") {
  check<score::Softmax, float>(Kind::Softmax, {}, 1e-5);
  check<score::SoftmaxSink, float>(Kind::Sink, {}, 1e-5);
  check<score::Softmax, float>(Kind::Softmax, {}, 1e-5, wide);
  check<score::ClippedSoftmax, float>(Kind::Clipped, score::ClippedSoftmax{1.0, -0.1}, 1e-5, wide);
}
