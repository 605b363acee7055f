// The CUDA backend's fused attention forward and backward (kernels/cuda/attention_forward.hpp,
// attention_backward.hpp) run on the SIMT emulator against the CPU backend's materialised
// reference (output, lse; dq, dk, dv and the sink's gradient): every score family (softmax, the
// learnable sink, clipped softmax, ReLU, sigmoid, polynomial, and a user score with a logits
// transform), causal and bidirectional masks, grouped-query heads, padded keys, query counts that
// are not a multiple of the block and several key tiles per row.
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"
#include "softcap_score.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cuda/attention_backward.hpp"
#include "sinklab/kernels/cuda/attention_forward.hpp"
#include "sinklab/kernels/simt.hpp"

using namespace sinklab;

namespace {

template <class Score, class Mask, class T>
void check(const Score& score, bool padded, double tol) {
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 37, d = 8, threads = 32;
  Rng rng(11);
  const Tensor<T> q = rng.normal<double>({B, H, Tq, d}).to<T>(), k = rng.normal<double>({B, Hkv, Tq, d}).to<T>(),
                  v = rng.normal<double>({B, Hkv, Tq, d}).to<T>();
  auto params = score.template make_params<T>(H);
  if constexpr (Score::has_sink) params.sink_logit = rng.normal<double>({H}, 0.5, 1.0).to<T>();
  kernels::AttentionOptions opt;
  std::vector<int64_t> lengths{Tq, 23};
  if (padded) opt.kv_lengths = Tensor<int64_t>::from({B}, {lengths[0], lengths[1]});
  const auto want = kernels::cpu::attention_reference_forward(score, Mask{}, q, k, v, params, opt);

  kernels::cuda::AttentionShape sh{B, H, Hkv, Tq, Tq, d, 0.0, 16, padded ? lengths.data() : nullptr};
  Tensor<T> out = Tensor<T>::zeros({B, H, Tq, d}), lse = Tensor<T>::zeros({B, H, Tq});
  const auto args = score.args(params);
  // Fewer blocks than (batch, head, query block) triples: the grid-stride loop is exercised too.
  simt::emulate(5, threads, kernels::cuda::attention_forward_shared_bytes<T>(threads, sh.block_k, d),
                [&](simt::Emulated& ctx) {
                  kernels::cuda::attention_forward<simt::Emulated, Score, Mask, T>(ctx, score, args, q.data(), k.data(),
                                                                                   v.data(), out.data(), lse.data(), sh);
                });
  INFO(Score::name, " ", Mask::name, padded ? " padded" : "");
  CHECK(sinklab_test::max_rel_diff(out, want.out) <= tol);
  if constexpr (Score::family == score::Family::Normalised) CHECK(sinklab_test::max_rel_diff(lse, want.lse) <= tol);

  // Backward from a random dO, through the four kernels, against the reference's gradients.
  const Tensor<T> dout = rng.normal<double>({B, H, Tq, d}).to<T>();
  const auto grads = kernels::cpu::attention_reference_backward(score, Mask{}, q, k, v, params, dout, opt);
  Tensor<T> D = Tensor<T>::zeros({B, H, Tq}), row_grad = Tensor<T>::zeros({B, H, Tq});
  Tensor<T> dq = Tensor<T>::zeros(q.shape()), dk = Tensor<T>::zeros(k.shape()), dv = Tensor<T>::zeros(v.shape());
  const std::size_t bw_shared = kernels::cuda::attention_backward_shared_bytes<T>(threads, sh.block_k, d);
  if constexpr (Score::family == score::Family::Normalised)
    simt::emulate(3, threads, bw_shared, [&](simt::Emulated& ctx) {
      kernels::cuda::attention_backward_rows<simt::Emulated, Score, Mask, T>(
          ctx, score, args, q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), D.data(),
          row_grad.data(), sh);
    });
  simt::emulate(3, threads, bw_shared, [&](simt::Emulated& ctx) {
    kernels::cuda::attention_backward_kv<simt::Emulated, Score, Mask, T>(ctx, score, q.data(), k.data(), v.data(),
                                                                         lse.data(), D.data(), dout.data(), dk.data(),
                                                                         dv.data(), sh);
  });
  simt::emulate(3, threads, bw_shared, [&](simt::Emulated& ctx) {
    kernels::cuda::attention_backward_q<simt::Emulated, Score, Mask, T>(ctx, score, q.data(), k.data(), v.data(),
                                                                        lse.data(), D.data(), dout.data(), dq.data(), sh);
  });
  CHECK(sinklab_test::max_rel_diff(dq, grads.dq) <= tol);
  CHECK(sinklab_test::max_rel_diff(dk, grads.dk) <= tol);
  CHECK(sinklab_test::max_rel_diff(dv, grads.dv) <= tol);
  if constexpr (Score::has_sink) {
    Tensor<T> dsink = Tensor<T>::zeros({H});
    simt::emulate(2, 64, 64 * sizeof(T), [&](simt::Emulated& ctx) {  // two blocks: grid-stride over heads
      kernels::cuda::attention_backward_params(ctx, row_grad.data(), dsink.data(), sh);
    });
    CHECK(sinklab_test::max_rel_diff(dsink, grads.dscore.sink_logit) <= tol);
  }
}

template <class Mask, class T>
void check_all(double tol) {
  for (bool padded : {false, true}) {
    check<score::Softmax, Mask, T>({}, padded, tol);
    check<score::SoftmaxSink, Mask, T>({}, padded, tol);
    check<score::ClippedSoftmax, Mask, T>(score::ClippedSoftmax{1.05, -0.05}, padded, tol);
    check<score::ReLU, Mask, T>({}, padded, tol);
    check<score::Sigmoid, Mask, T>({}, padded, tol);
    check<score::Polynomial, Mask, T>({}, padded, tol);
    check<user::Softcap, Mask, T>({}, padded, tol);
  }
}

}  // namespace

TEST_CASE("CUDA attention forward on the emulator equals the CPU reference: every score, causal") {
  check_all<mask::Causal, double>(1e-12);
  check_all<mask::Causal, float>(2e-5);
}

TEST_CASE("CUDA attention forward on the emulator equals the CPU reference: every score, bidirectional") {
  check_all<mask::Bidirectional, double>(1e-12);
}
