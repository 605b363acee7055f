// The tensor-core attention kernels (kernels/cuda/attention_mma_forward.hpp,
// attention_mma_backward.hpp) run on the SIMT emulator, whose ldmatrix, mma.m16n8k16 and
// cp.async follow the PTX ISA (kernels/simt_mma.hpp, tested alone in test_simt_mma), against the
// CPU backend's materialised reference in double on the same bf16- (or fp16-) rounded q, k, v
// and dO: every score family (softmax, the learnable sink, clipped softmax, ReLU, sigmoid,
// polynomial, a user score with a logits transform), causal and bidirectional masks, grouped
// query heads, padded keys, head sizes 32, 64 and 128, query and key counts that are not a multiple
// of the 64-row tiles, and more than two key tiles per row (the double buffer turns over).
//
// The kernels round the weights and dS to the operand type before their products (as
// FlashAttention-2 does), so they differ from the reference by that rounding: a few 1e-3 of the
// largest element for bf16; a mistake in a fragment's layout, a tile's swizzle or the double
// buffer's waits moves whole rows (errors of order 1).
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"
#include "softcap_score.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cuda/attention_mma_backward.hpp"
#include "sinklab/kernels/cuda/attention_mma_forward.hpp"
#include "sinklab/kernels/simt.hpp"

using namespace sinklab;

namespace {

struct Case {
  int64_t B = 1, H = 2, Hkv = 1, T = 100, S = 100;
  bool padded = false;
};

// A tensor of standard normal values rounded to E, and its codes.
template <class E>
struct Operand {
  Tensor<double> values;
  std::vector<uint16_t> codes;
};
template <class E>
Operand<E> operand(Rng& rng, const Shape& shape) {
  Operand<E> o{rng.normal<double>(shape), {}};
  double* x = o.values.data();
  for (int64_t i = 0; i < o.values.numel(); ++i) {
    o.codes.push_back(E::from_float(static_cast<float>(x[i])));
    x[i] = E::to_float(o.codes.back());
  }
  return o;
}

template <class E, int D, class Score, class Mask>
void check(const Score& score, const Case& c, double tol) {
  Rng rng(5);
  const Operand<E> q = operand<E>(rng, {c.B, c.H, c.T, D}), k = operand<E>(rng, {c.B, c.Hkv, c.S, D}),
                   v = operand<E>(rng, {c.B, c.Hkv, c.S, D}), dout = operand<E>(rng, {c.B, c.H, c.T, D});
  auto params = score.template make_params<double>(c.H);
  if constexpr (Score::has_sink) params.sink_logit = rng.normal<double>({c.H}, 0.5, 1.0);
  kernels::AttentionOptions opt;
  std::vector<int64_t> lengths(static_cast<std::size_t>(c.B), c.S);
  if (c.padded) {
    lengths.back() = c.S - 37;
    opt.kv_lengths = Tensor<int64_t>::from({c.B}, lengths);
  }
  const auto want = kernels::cpu::attention_reference_forward(score, Mask{}, q.values, k.values, v.values, params, opt);
  const auto grads =
      kernels::cpu::attention_reference_backward(score, Mask{}, q.values, k.values, v.values, params, dout.values, opt);

  // The score's parameters as the kernels read them (float).
  auto fparams = score.template make_params<float>(c.H);
  if constexpr (Score::has_sink) fparams.sink_logit = params.sink_logit.template to<float>();
  const auto args = score.args(fparams);
  kernels::cuda::AttentionShape sh{c.B, c.H, c.Hkv, c.T, c.S, D, 0.0, 64, c.padded ? lengths.data() : nullptr};
  constexpr bool normalised = Score::family == score::Family::Normalised;

  Tensor<float> out = Tensor<float>::full({c.B, c.H, c.T, D}, 7.f), lse = Tensor<float>::full({c.B, c.H, c.T}, 7.f);
  // Fewer blocks than tasks: the grid-stride loops are exercised too.
  simt::emulate(3, kernels::cuda::mma::kThreads, kernels::cuda::attention_mma_forward_shared_bytes<D>(),
                [&](simt::Emulated& ctx) {
                  kernels::cuda::attention_mma_forward<E, D, simt::Emulated, Score, Mask>(
                      ctx, score, args, q.codes.data(), k.codes.data(), v.codes.data(), out.data(), lse.data(), sh);
                });
  INFO(std::string(Score::name), " ", std::string(Mask::name), " ", std::string(E::name), " d ", D, " T ", c.T, " S ", c.S, " H ", c.H, "/", c.Hkv,
       c.padded ? " padded" : "");
  CHECK(sinklab_test::max_rel_diff(out.template to<double>(), want.out) <= tol);
  if constexpr (normalised) CHECK(sinklab_test::max_rel_diff(lse.template to<double>(), want.lse) <= 1e-5);

  Tensor<float> D_ = Tensor<float>::zeros({c.B, c.H, c.T}), row_grad = Tensor<float>::zeros({c.B, c.H, c.T});
  Tensor<float> dq = Tensor<float>::full({c.B, c.H, c.T, D}, 7.f), dk = Tensor<float>::full({c.B, c.Hkv, c.S, D}, 7.f),
                dv = Tensor<float>::full({c.B, c.Hkv, c.S, D}, 7.f);
  if constexpr (normalised && !Score::clipped) {
    simt::emulate(2, 64, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::attention_mma_backward_rows<E>(ctx, score, args, out.data(), lse.data(), dout.codes.data(),
                                                    D_.data(), row_grad.data(), sh);
    });
  } else if constexpr (normalised) {
    simt::emulate(2, kernels::cuda::mma::kThreads, kernels::cuda::attention_mma_backward_q_shared_bytes<D>(),
                  [&](simt::Emulated& ctx) {
                    kernels::cuda::attention_mma_backward_q<E, D, true, simt::Emulated, Score, Mask>(
                        ctx, score, args, q.codes.data(), k.codes.data(), v.codes.data(), lse.data(), D_.data(),
                        dout.codes.data(), nullptr, row_grad.data(), sh);
                  });
  }
  simt::emulate(3, kernels::cuda::mma::kThreads, kernels::cuda::attention_mma_backward_kv_shared_bytes<D>(),
                [&](simt::Emulated& ctx) {
                  kernels::cuda::attention_mma_backward_kv<E, D, simt::Emulated, Score, Mask>(
                      ctx, score, q.codes.data(), k.codes.data(), v.codes.data(), lse.data(), D_.data(),
                      dout.codes.data(), dk.data(), dv.data(), sh);
                });
  simt::emulate(3, kernels::cuda::mma::kThreads, kernels::cuda::attention_mma_backward_q_shared_bytes<D>(),
                [&](simt::Emulated& ctx) {
                  kernels::cuda::attention_mma_backward_q<E, D, false, simt::Emulated, Score, Mask>(
                      ctx, score, args, q.codes.data(), k.codes.data(), v.codes.data(), lse.data(), D_.data(),
                      dout.codes.data(), dq.data(), nullptr, sh);
                });
  CHECK(sinklab_test::max_rel_diff(dq.template to<double>(), grads.dq) <= tol);
  CHECK(sinklab_test::max_rel_diff(dk.template to<double>(), grads.dk) <= tol);
  CHECK(sinklab_test::max_rel_diff(dv.template to<double>(), grads.dv) <= tol);
  if constexpr (Score::has_sink) {
    Tensor<float> dsink = Tensor<float>::zeros({c.H});
    simt::emulate(2, 64, 64 * sizeof(float), [&](simt::Emulated& ctx) {  // two blocks: grid-stride over heads
      kernels::cuda::attention_backward_params(ctx, row_grad.data(), dsink.data(), sh);
    });
    CHECK(sinklab_test::max_rel_diff(dsink.template to<double>(), grads.dscore.sink_logit) <= tol);
  }
}

constexpr double kBf16 = 1e-2;

// Every score on one small grouped-query shape (two heads on one kv head, two query tiles, the
// second partial), causal with padded keys, and bidirectional.
template <class Mask, bool Padded>
void every_score() {
  const Case c{1, 2, 1, 80, 80, Padded};
  check<simt::Bf16, 64, score::Softmax, Mask>({}, c, kBf16);
  check<simt::Bf16, 64, score::SoftmaxSink, Mask>({}, c, kBf16);
  check<simt::Bf16, 64, score::ClippedSoftmax, Mask>(score::ClippedSoftmax{1.05, -0.05}, c, kBf16);
  check<simt::Bf16, 64, score::ReLU, Mask>({}, c, kBf16);
  check<simt::Bf16, 64, score::Sigmoid, Mask>({}, c, kBf16);
  check<simt::Bf16, 64, score::Polynomial, Mask>({}, c, kBf16);
  check<simt::Bf16, 64, user::Softcap, Mask>({}, c, kBf16);
}

}  // namespace

TEST_CASE("tensor-core attention on the emulator: every score, d 64, causal, padded keys") {
  every_score<mask::Causal, true>();
}

TEST_CASE("tensor-core attention on the emulator: every score, d 64, bidirectional") {
  every_score<mask::Bidirectional, false>();
}

TEST_CASE("tensor-core attention on the emulator: four key tiles, fewer queries than keys, GQA 4:2") {
  // 200 keys: the double buffer turns over twice; T < S aligns the causal mask at the end.
  check<simt::Bf16, 64, score::Softmax, mask::Causal>({}, {1, 2, 1, 200, 200, true}, kBf16);
  check<simt::Bf16, 64, score::SoftmaxSink, mask::Causal>({}, {1, 4, 2, 50, 130, false}, kBf16);
}

TEST_CASE("tensor-core attention on the emulator: head size 128") {
  const Case c{1, 2, 1, 70, 70, true};
  check<simt::Bf16, 128, score::Softmax, mask::Causal>({}, c, kBf16);
  check<simt::Bf16, 128, score::ClippedSoftmax, mask::Causal>(score::ClippedSoftmax{1.05, -0.05}, c, kBf16);
  check<simt::Bf16, 128, score::Sigmoid, mask::Bidirectional>({}, c, kBf16);
}

TEST_CASE("tensor-core attention on the emulator: head size 32") {
  // Rows of 64 bytes: two to a 128-byte bank line, swizzled by row pairs.
  const Case c{1, 2, 1, 90, 90, true};
  check<simt::Bf16, 32, score::SoftmaxSink, mask::Causal>({}, c, kBf16);
  check<simt::Bf16, 32, score::ReLU, mask::Bidirectional>({}, c, kBf16);
}

TEST_CASE("tensor-core attention on the emulator: fp16 operands") {
  // fp16 keeps 3 more mantissa bits than bf16: the rounding of the weights costs ~8x less.
  check<simt::F16, 64, score::Softmax, mask::Causal>({}, {1, 2, 1, 80, 80, true}, 2e-3);
  check<simt::F16, 128, score::ReLU, mask::Causal>({}, {1, 2, 1, 80, 80, false}, 2e-3);
}
