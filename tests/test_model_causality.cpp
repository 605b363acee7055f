// Causality of whole decoder models: the logits at position t do not change when the tokens
// after t change, and they equal the logits of the prefix ids[:, :t+1] run alone. Checked in
// double for the decoder with RoPE and with learned positions, register tokens (appended and
// prepended), a sink token, a learnable softmax sink, each gate source, and every anchor-mixing
// mode (ResFormer fixed / learnable, NuResFormer static / dynamic, ExoFormer scalar / per-head /
// per-element, static / dynamic), on the fused path and, once, on the probe's materialised path.
// GCC 12 reports its own AVX-512 intrinsics inside xsimd's double exp as -Wuninitialized (a
// false positive, as optim/adamw.hpp notes for sqrt); double models and kernels reach it here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model_testing.hpp"
#include "sinklab/nn/transformer.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using namespace sinklab::gate;

namespace {

constexpr int64_t kVocab = 11, kB = 2;

nn::ModelConfig cfg() {
  nn::ModelConfig c;
  c.vocab = kVocab;
  c.d_model = 8;
  c.layers = 3;
  c.heads = 2;
  c.ffn_hidden = 12;
  c.max_len = 320;
  return c;
}

template <class M>
Tensor<double> logits(M& model, const Tensor<int32_t>& ids, bool probed = false) {
  Tape<double> t;
  nn::ModelProbe<double> pr;
  return model.logits(t, ids, probed ? &pr : nullptr).value();
}

// Largest |a − b| over positions [from, to) of logits [B, T, V] (same B and V; a, b may differ in T).
double diff(const Tensor<double>& a, const Tensor<double>& b, int64_t from, int64_t to) {
  double d = 0;
  for (int64_t bb = 0; bb < kB; ++bb)
    for (int64_t t = from; t < to; ++t)
      for (int64_t v = 0; v < kVocab; ++v) d = std::max(d, std::abs(a(bb, t, v) - b(bb, t, v)));
  return d;
}

template <class Model>
void check_causal(const char* what, nn::ModelConfig c = cfg(), typename Model::mix_options mo = {},
                  bool probed = false, int64_t kT = 9, bool prefix = true) {
  INFO(std::string(what), " T = ", kT);
  Rng rng(1);
  typename Model::template Module<double> model("", c, rng, {}, mo);
  model_test::randomise(model, 2);
  Rng ir(3);
  Tensor<int32_t> ids = Tensor<int32_t>::empty({kB, kT});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data()[i] = static_cast<int32_t>(ir.randint(0, kVocab));
  const Tensor<double> base = logits(model, ids, probed);
  REQUIRE(base.shape() == Shape{kB, kT, kVocab});
  for (int64_t t : {int64_t{0}, int64_t{3}, kT / 2, kT - 2}) {
    INFO("position t = ", t);
    // Change every token after t.
    Tensor<int32_t> changed = ids.clone();
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t j = t + 1; j < kT; ++j) changed(b, j) = static_cast<int32_t>((ids(b, j) + 1 + ir.randint(0, kVocab - 1)) % kVocab);
    const Tensor<double> other = logits(model, changed, probed);
    CHECK(diff(base, other, 0, t + 1) <= 1e-12);
    CHECK(diff(base, other, t + 1, kT) > 1e-6);  // the change does reach the later positions
    // The prefix alone gives the same logits.
    if (!prefix) continue;
    Tensor<int32_t> prefix = Tensor<int32_t>::empty({kB, t + 1});
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t j = 0; j <= t; ++j) prefix(b, j) = ids(b, j);
    const Tensor<double> pl = logits(model, prefix, probed);
    REQUIRE(pl.shape() == Shape{kB, t + 1, kVocab});
    CHECK(diff(base, pl, 0, t + 1) <= 1e-12);
  }
}

template <class Attn = attn::Attention<>, class Pos = pos::RoPE, class Tokens = tokens::None, class Mix = mix::None,
          class Block = nn::PreNorm<norm::RMS>, class FFN = ffn::SwiGLU>
struct Dec {
  using Model = nn::Transformer<Block, Attn, FFN, Pos, Tokens, Mix>;
  static_assert(Model::causal);
  using mix_options = typename Mix::Options;
  template <class T>
  using Module = typename Model::template Module<T>;
};

using G1 = attn::Attention<score::Softmax, FromInput<per_channel, on_output>>;
using VGA = attn::Attention<score::Softmax, FromValue<per_head, on_values>>;
using Anchored = attn::Attention<score::Softmax, FromAnchor<per_channel, on_output>>;

}  // namespace

TEST_CASE("decoder causality: positions, register and sink tokens, learnable sink, gates") {
  check_causal<Dec<>>("RoPE, no gate (fast path: q, k, v read in place)");
  check_causal<Dec<>>("RoPE, materialised path (probe)", cfg(), {}, true);
  // Long enough for several query and key blocks of the fused kernel (32 × 128 by default).
  check_causal<Dec<>>("RoPE, fast path, many blocks", cfg(), {}, false, 300);
  check_causal<Dec<G1, pos::Learned, tokens::Sink>>("G1, learned positions, sink token, many blocks", cfg(), {},
                                                    false, 300);
  {
    auto c = cfg();
    c.qk_norm = true;
    check_causal<Dec<>>("RoPE + QK-norm", c);
  }
  check_causal<Dec<attn::Attention<>, pos::Learned>>("learned positions");
  check_causal<Dec<attn::Attention<>, pos::Learned, tokens::Registers>>("registers appended (default)");
  {
    auto c = cfg();
    c.tokens.count = 2;
    c.tokens.placement = tokens::Placement::Prepend;
    check_causal<Dec<attn::Attention<>, pos::Learned, tokens::Registers>>("registers prepended, learned positions", c);
    check_causal<Dec<attn::Attention<>, pos::RoPE, tokens::Registers>>("registers prepended, RoPE", c);
  }
  check_causal<Dec<attn::Attention<>, pos::RoPE, tokens::Sink>>("sink token, RoPE");
  check_causal<Dec<attn::Attention<>, pos::Learned, tokens::Sink>>("sink token, learned positions");
  check_causal<Dec<attn::Attention<score::SoftmaxSink>>>("learnable softmax sink logit");
  check_causal<Dec<G1>>("gate from the input, on the output (G1)");
  check_causal<Dec<VGA>>("gate from the values, on the values (VGA)");
  check_causal<Dec<attn::Attention<score::Softmax, FromValue<per_channel, on_output>>, pos::RoPE, tokens::Sink>>(
      "VGA per channel on the output, sink token");
  check_causal<Dec<G1, pos::RoPE, tokens::None, mix::None, nn::PreNorm<norm::GatedNorm<norm::RMS, 4>>>>(
      "GatedNorm blocks");
  check_causal<Dec<attn::Attention<>, pos::RoPE, tokens::None, mix::None, nn::PreNorm<norm::GatedDyT>, ffn::GeluMLP>>(
      "GatedDyT blocks, GELU MLP");
  {
    auto c = cfg();
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 2;
    check_causal<Dec<VGA, pos::RoPE, tokens::Sink>>("GQA, VGA, sink token", c);
  }
}

TEST_CASE("decoder causality: point-wise scores and clipped softmax") {
  check_causal<Dec<attn::Attention<score::ReLU>>>("ReLU / n");
  check_causal<Dec<attn::Attention<score::Pointwise<score::fn::GELU>>>>("n^-1 GELU");
  check_causal<Dec<attn::Attention<score::Polynomial>>>("polynomial");
  check_causal<Dec<attn::Attention<score::ClippedSoftmax>>>("clipped softmax");
  // Sigmoid attention's bias −log n uses n = the number of keys of the whole sequence (the paper's
  // init), so a shorter prefix has another bias: only the changed-suffix half of the check applies.
  check_causal<Dec<attn::Attention<score::Sigmoid>>>("sigmoid, bias -log n (suffix changes only)", cfg(), {}, false, 9,
                                                      false);
  check_causal<Dec<attn::Attention<score::Sigmoid>>>("sigmoid, bias -log n, probe (suffix changes only)", cfg(), {},
                                                      true, 9, false);
}

TEST_CASE("decoder causality: every anchor-mixing mode") {
  check_causal<Dec<attn::Attention<>, pos::RoPE, tokens::None, mix::ResFormer>>("ResFormer, fixed");
  check_causal<Dec<G1, pos::Learned, tokens::Sink, mix::ResFormer>>("ResFormer, learnable, sink token",
                                                                     cfg(), {.learnable = true});
  check_causal<Dec<G1, pos::RoPE, tokens::None, mix::NuResFormer<mix::per_element>>>("NuResFormer, per element");
  check_causal<Dec<G1, pos::RoPE, tokens::None, mix::NuResFormer<mix::per_head, mix::Dynamic>>>(
      "NuResFormer, per head, dynamic");
  {
    auto c = cfg();
    c.tokens.count = 2;
    c.tokens.placement = tokens::Placement::Prepend;
    check_causal<Dec<VGA, pos::RoPE, tokens::Registers, mix::NuResFormer<mix::scalar, mix::Dynamic>>>(
        "NuResFormer, scalar, dynamic, VGA, prepended registers", c);
  }
  check_causal<Dec<G1, pos::RoPE, tokens::None, mix::ExoFormer<mix::scalar>>>("ExoFormer, scalar");
  check_causal<Dec<G1, pos::RoPE, tokens::None, mix::ExoFormer<mix::per_head>>>("ExoFormer, per head");
  check_causal<Dec<Anchored, pos::RoPE, tokens::None, mix::ExoFormer<mix::per_element>>>(
      "ExoFormer, per element, gate from the anchor");
  check_causal<Dec<Anchored, pos::RoPE, tokens::Sink, mix::ExoFormer<mix::per_element, mix::Dynamic>>>(
      "ExoFormer, per element, dynamic, gate from the anchor, sink token");
  check_causal<Dec<Anchored, pos::Learned, tokens::Sink, mix::ExoFormer<mix::per_element, mix::Dynamic>>>(
      "ExoFormer dynamic, learned positions, sink token, materialised path", cfg(), {}, true);
  {
    auto c = cfg();
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 2;
    c.qk_norm = true;
    check_causal<Dec<attn::Attention<>, pos::RoPE, tokens::Registers, mix::ExoFormer<mix::per_head, mix::Dynamic>>>(
        "ExoFormer dynamic, GQA, QK-norm, appended registers", c);
  }
}
