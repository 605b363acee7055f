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
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/attention_backward.hpp"
#include "sinklab/kernels/cuda/attention_forward.hpp"

using namespace sinklab;

namespace {

template <class Score, class T>
__global__ void attention_forward_kernel(Score score, typename Score::template Args<T> args, const T* q, const T* k,
                                         const T* v, T* out, T* lse, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_forward<simt::Cuda, Score, mask::Causal, T>(ctx, score, args, q, k, v, out, lse, sh);
}

template <class Score, class T>
__global__ void backward_rows_kernel(Score score, typename Score::template Args<T> args, const T* q, const T* k,
                                     const T* v, const T* out, const T* lse, const T* dout, T* D, T* row_grad,
                                     kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_rows<simt::Cuda, Score, mask::Causal, T>(ctx, score, args, q, k, v, out, lse, dout,
                                                                             D, row_grad, sh);
}
template <class Score, class T>
__global__ void backward_kv_kernel(Score score, const T* q, const T* k, const T* v, const T* lse, const T* D,
                                   const T* dout, T* dk, T* dv, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_kv<simt::Cuda, Score, mask::Causal, T>(ctx, score, q, k, v, lse, D, dout, dk, dv, sh);
}
template <class Score, class T>
__global__ void backward_q_kernel(Score score, const T* q, const T* k, const T* v, const T* lse, const T* D,
                                  const T* dout, T* dq, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_q<simt::Cuda, Score, mask::Causal, T>(ctx, score, q, k, v, lse, D, dout, dq, sh);
}


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

template <class Score, class T>
void check(Kind kind, Score score, double tol) {
  // Within the 48 KiB of dynamic shared memory a launch gets without opting in to more.
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 301, d = 64, threads = sizeof(T) == 8 ? 32 : 64;
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
  kernels::cuda::AttentionShape sh{B, H, Hkv, Tq, Tq, d, 0.0, sizeof(T) == 8 ? 16 : 32, dlen.data()};
  typename Score::template Args<T> args{};
  if constexpr (Score::has_sink) args.sink_logit = dsink.data();
  const std::size_t shared = kernels::cuda::attention_forward_shared_bytes<T>(threads, sh.block_k, d);
  REQUIRE(shared <= 48 * 1024);
  attention_forward_kernel<Score, T>
      <<<kernels::cuda::attention_forward_blocks(sh, threads), threads, shared>>>(score, args, dq.data(), dk.data(), dv.data(), dout.data(), dlse.data(), sh);
  cuda_backend::check(cudaDeviceSynchronize(), "attention_forward_kernel");
  const double rel = sinklab_test::max_rel_diff(dout.to_vector(), want);
  INFO(Score::name, ": max relative difference ", rel);
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
void check_backward(double tol) {
  using Score = score::Softmax;
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 157, d = 32, threads = 32;
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
  kernels::cuda::AttentionShape sh{B, H, Hkv, Tq, Tq, d, 0.0, 16, dlen.data()};
  const std::size_t fwd = kernels::cuda::attention_forward_shared_bytes<T>(threads, sh.block_k, d);
  const std::size_t bwd = kernels::cuda::attention_backward_shared_bytes<T>(threads, sh.block_k, d);
  REQUIRE(std::max(fwd, bwd) <= 48 * 1024);
  const int64_t blocks = kernels::cuda::attention_forward_blocks(sh, threads);
  attention_forward_kernel<Score, T><<<blocks, threads, fwd>>>({}, {}, dq_.data(), dk_.data(), dv_.data(), dout_fwd.data(), dlse.data(), sh);
  backward_rows_kernel<Score, T><<<blocks, threads, bwd>>>({}, {}, dq_.data(), dk_.data(), dv_.data(), dout_fwd.data(), dlse.data(), ddout.data(), dD.data(),
                                                          nullptr, sh);
  backward_kv_kernel<Score, T><<<B * Hkv * ((Tq + threads - 1) / threads), threads, bwd>>>({}, dq_.data(), dk_.data(), dv_.data(), dlse.data(),
                                                                                         dD.data(), ddout.data(), gk.data(), gv.data(), sh);
  backward_q_kernel<Score, T><<<blocks, threads, bwd>>>({}, dq_.data(), dk_.data(), dv_.data(), dlse.data(), dD.data(), ddout.data(), gq.data(), sh);
  cuda_backend::check(cudaDeviceSynchronize(), "attention backward kernels");
  CHECK(sinklab_test::max_rel_diff(gq.to_vector(), want.dq) <= tol);
  CHECK(sinklab_test::max_rel_diff(gk.to_vector(), want.dk) <= tol);
  CHECK(sinklab_test::max_rel_diff(gv.to_vector(), want.dv) <= tol);
}

}  // namespace

TEST_CASE("cuda: fused attention backward on the device equals the loop reference (softmax, double and float)") {
  check_backward<double>(1e-11);
  check_backward<float>(2e-5);
}

TEST_CASE("cuda: fused attention forward on the device equals the loop reference (double)") {
  check<score::Softmax, double>(Kind::Softmax, {}, 1e-12);
  check<score::SoftmaxSink, double>(Kind::Sink, {}, 1e-12);
  check<score::ClippedSoftmax, double>(Kind::Clipped, score::ClippedSoftmax{1.0, -0.1}, 1e-12);
  check<score::ReLU, double>(Kind::ReLU, {}, 1e-12);
}

TEST_CASE("cuda: fused attention forward on the device equals the loop reference (float)") {
  check<score::Softmax, float>(Kind::Softmax, {}, 1e-5);
  check<score::SoftmaxSink, float>(Kind::Sink, {}, 1e-5);
}
