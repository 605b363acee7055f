// Whole models composed from policies: gradcheck of a 2-layer model per paper architecture,
// a probe that sees every layer, and training on a repetitive sequence.
#include <doctest/doctest.h>

#include <cmath>

#include "model_testing.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using namespace sinklab::gate;

namespace {

nn::ModelConfig tiny() {
  nn::ModelConfig c;
  c.vocab = 7;
  c.d_model = 8;
  c.layers = 2;
  c.heads = 2;
  c.ffn_hidden = 12;
  c.max_len = 16;
  return c;
}

template <class Model>
void check_model(nn::ModelConfig cfg, uint64_t seed, typename Model::template Module<double>* out = nullptr) {
  Rng rng(seed);
  typename Model::template Module<double> model("", cfg, rng);
  model_test::randomise(model, seed + 1);
  auto ids = Tensor<int32_t>::from({2, 4}, {0, 3, 6, 1, 2, 2, 5, 4});
  auto tg = Tensor<int32_t>::from({2, 4}, {3, 6, 1, -100, 2, 5, 4, 0});
  auto params = nn::parameter_list<double>(model);
  auto r = gradcheck([&](Tape<double>& t) { return model.loss(t, ids, tg); }, params);
  INFO(r);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("models of the five papers are a few using-lines each, and their gradients check") {
  SUBCASE("VGA paper: pre-LN LayerNorm, ReLU MLP, learned positions; vanilla / IGA / VGA") {
    using Vanilla = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<>, ffn::ReluMLP, pos::Learned>;
    using IGA = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<score::Softmax, FromInput<per_head, on_values>>,
                                ffn::ReluMLP, pos::Learned>;
    using VGA = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<score::Softmax, FromValue<per_head, on_values>>,
                                ffn::ReluMLP, pos::Learned>;
    check_model<Vanilla>(tiny(), 1);
    check_model<IGA>(tiny(), 2);
    check_model<VGA>(tiny(), 3);
  }
  SUBCASE("VGA paper baselines: learnable sink, register tokens, clipped softmax") {
    using Sink = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<score::SoftmaxSink>, ffn::ReluMLP, pos::Learned>;
    using Reg = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<>, ffn::ReluMLP, pos::Learned, tokens::Registers>;
    using SinkTok = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU, pos::RoPE, tokens::Sink>;
    using Clip = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<score::ClippedSoftmax>, ffn::GeluMLP>;
    check_model<Sink>(tiny(), 4);
    auto c = tiny();
    c.tokens.count = 2;
    c.tokens.placement = tokens::Placement::Prepend;
    check_model<Reg>(c, 5);
    check_model<SinkTok>(tiny(), 6);
    check_model<Clip>(tiny(), 7);
  }
  SUBCASE("Qwen: gated attention G1 with GatedNorm / PreAffine / DyT, SwiGLU and GLU, z-loss, residual clip") {
    using G1 = attn::Attention<score::Softmax, FromInput<per_channel, on_output>>;
    using GAGatedNorm = nn::Transformer<nn::PreNorm<norm::GatedNorm<norm::RMS, 4>>, G1, ffn::SwiGLU>;
    using GAPreAffine = nn::Transformer<nn::PreNorm<norm::PreAffineRMS>, G1, ffn::GLU>;
    using DyT = nn::Transformer<nn::PreNorm<norm::DyT>, attn::Attention<>, ffn::SwiGLU>;
    auto c = tiny();
    c.qk_norm = true;
    c.z_loss = 1e-2;
    check_model<GAGatedNorm>(c, 8);
    c.residual_clip = 0.8;
    c.tie_embeddings = true;
    check_model<GAPreAffine>(c, 9);
    check_model<DyT>(tiny(), 10);
    // The DyT authors' LLaMA recipe: a learnable scalar on the embeddings.
    auto e = tiny();
    e.embed_scale = 3.0;
    check_model<DyT>(e, 13);
    Rng rng(13);
    DyT::Module<double> m("", e, rng);
    CHECK(m.embed_scale.name == "embed_scale");
    CHECK(m.embed_scale.value.item() == 3.0);
    int64_t with = nn::parameter_count<double>(m);
    Rng rng2(13);
    DyT::Module<double> plain("", tiny(), rng2);
    CHECK(with == nn::parameter_count<double>(plain) + 1);
    // Scaling the table by s and starting the scalar at 1 is the same function at the start.
    Tensor<double> scaled = plain.embed.weight.value.clone();
    for (int64_t i = 0; i < scaled.numel(); ++i) scaled.data()[i] *= 3.0;
    plain.embed.weight.value = scaled;
    m.embed.weight.value = plain.embed.weight.value.clone();
    for (int64_t i = 0; i < m.embed.weight.value.numel(); ++i) m.embed.weight.value.data()[i] /= 3.0;
    no_grad ng;
    Tape<double> t1, t2;
    auto ids = Tensor<int32_t>::from({1, 3}, {1, 4, 2});
    const Tensor<double> a = m.logits(t1, ids).value(), b = plain.logits(t2, ids).value();
    for (int64_t i = 0; i < a.numel(); ++i) CHECK(a.data()[i] == doctest::Approx(b.data()[i]).epsilon(1e-12));
    e.embed_scale = -1;
    Rng rng3(1);
    CHECK_THROWS_WITH_AS(DyT::Module<double>("", e, rng3), doctest::Contains("embed_scale must be >= 0"), Error);
  }
  SUBCASE("gradient sinks: Llama-like with V-scale, GQA") {
    using VScale = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<score::Softmax, None, value::VScale>, ffn::SwiGLU>;
    auto c = tiny();
    c.heads = 4;
    c.kv_heads = 2;
    check_model<VScale>(c, 11);
  }
  SUBCASE("bidirectional encoder") {
    using Enc = nn::Transformer<nn::PreNorm<norm::LayerNorm>,
                                attn::Attention<score::Softmax, None, value::Identity, mask::Bidirectional>,
                                ffn::GeluMLP, pos::Learned>;
    check_model<Enc>(tiny(), 12);
  }
  SUBCASE("post-norm (BERT's layout) encoder") {
    using PostLN = nn::Transformer<nn::PostNorm<norm::LayerNorm>,
                                   attn::Attention<score::Softmax, None, value::Identity, mask::Bidirectional>,
                                   ffn::GeluMLP, pos::Learned>;
    check_model<PostLN>(tiny(), 13);
  }
}

TEST_CASE("a post-norm block normalises the residual sums; its branches read the stream unnormalised") {
  using Attn = attn::Attention<score::Softmax, None, value::Identity, mask::Bidirectional>;
  using Post = nn::Transformer<nn::PostNorm<norm::LayerNorm>, Attn, ffn::GeluMLP, pos::Learned>;
  using Pre = nn::Transformer<nn::PreNorm<norm::LayerNorm>, Attn, ffn::GeluMLP, pos::Learned>;
  auto cfg = tiny();
  Rng r1(4), r2(4);
  Post::Module<double> post("", cfg, r1);
  Pre::Module<double> pre("", cfg, r2);
  model_test::randomise(post, 5);
  model_test::randomise(pre, 5);  // the same names, shapes and values: only the layout differs
  auto ids = Tensor<int32_t>::from({1, 5}, {1, 2, 3, 4, 5});
  nn::ModelProbe<double> pp, qp;
  Tape<double> t;
  post.logits(t, ids, &pp);
  pre.logits(t, ids, &qp);
  REQUIRE(pp.layers.size() == 2);
  for (auto& l : pp.layers) {
    CHECK(l.attn_in.to_vector() == l.input.to_vector());  // no norm before the branch
    CHECK(l.ffn_in.to_vector() == l.mid.to_vector());
  }
  // mid = LayerNorm(input + attn_out) with layer 0's attn_norm: each token's row has the norm's
  // mean (its shift) and unit variance before the scale, checked by recomputing it.
  const auto& l0 = pp.layers[0];
  const auto& g = post.layers[0].attn_norm.weight.value;
  const auto& b = post.layers[0].attn_norm.bias.value;
  const int64_t D = cfg.d_model;
  for (int64_t tk = 0; tk < 5; ++tk) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < D; ++c) mean += l0.input(0, tk, c) + l0.attn_out(0, tk, c);
    mean /= double(D);
    for (int64_t c = 0; c < D; ++c) var += std::pow(l0.input(0, tk, c) + l0.attn_out(0, tk, c) - mean, 2);
    var /= double(D);
    for (int64_t c = 0; c < D; ++c) {
      const double x = (l0.input(0, tk, c) + l0.attn_out(0, tk, c) - mean) / std::sqrt(var + post.layers[0].attn_norm.eps);
      CHECK(l0.mid(0, tk, c) == doctest::Approx(x * g(c) + b(c)).epsilon(1e-9));
    }
  }
  // The pre-norm model with the same weights computes something else.
  CHECK(pp.final_hidden.to_vector() != qp.final_hidden.to_vector());
}

TEST_CASE("a model probe sees every layer's attention, residual stream and gradients") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<score::Softmax, FromValue<>>, ffn::SwiGLU>;
  Rng rng(2);
  auto cfg = tiny();
  cfg.layers = 3;
  M::Module<float> model("", cfg, rng);
  nn::ModelProbe<float> pr;
  pr.gradients = true;
  Tape<float> t;
  auto ids = Tensor<int32_t>::from({1, 5}, {1, 2, 3, 4, 5});
  auto tg = Tensor<int32_t>::from({1, 5}, {2, 3, 4, 5, 6});
  auto loss = model.loss(t, ids, tg, &pr);
  t.backward(loss);
  REQUIRE(pr.layers.size() == 3);
  for (auto& l : pr.layers) {
    CHECK(l.attn.weights.shape() == Shape{1, 2, 5, 5});
    CHECK(l.input.shape() == Shape{1, 5, 8});
    CHECK(l.grad_attn_in.shape() == Shape{1, 5, 8});
    CHECK(l.grad_mid.shape() == Shape{1, 5, 8});
    CHECK(l.attn.grad_q.shape() == Shape{1, 2, 5, 4});
  }
  // Layer 1's input is layer 0's output.
  CHECK(pr.layers[1].input.to_vector() == pr.layers[0].output.to_vector());
}

TEST_CASE("training a tiny model on a repetitive sequence drives the loss near zero") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
  Rng rng(3);
  nn::ModelConfig cfg;
  cfg.vocab = 16;
  cfg.d_model = 32;
  cfg.layers = 2;
  cfg.heads = 2;
  M::Module<float> model("", cfg, rng);
  optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = 3e-3, .weight_decay = 0.0});
  // A period-5 pattern from a random phase: predictable after the first period.
  const int64_t B = 8, T = 20;
  const int pattern[5] = {3, 9, 1, 14, 6};
  Tape<float> tape;
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto ids = Tensor<int32_t>::empty({B, T});
    auto tg = Tensor<int32_t>::empty({B, T});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        ids(b, i) = pattern[(b + i) % 5];
        tg(b, i) = i < 5 ? -100 : pattern[(b + i + 1) % 5];
      }
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, ids, tg);
    tape.backward(loss);
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  MESSAGE("repetitive-sequence loss " << first << " -> " << last);
  CHECK(first > 1.5f);
  CHECK(last < 0.02f);
}
