// The attention layer as a whole: gradcheck of input and every parameter for representative
// policy combinations (GQA, QK-norm, RoPE, gates, V-scale, sinks), probe vs fused paths, errors.
#include <doctest/doctest.h>

#include "sinklab/nn/attention.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

// Moves every parameter away from its init so no gradient is trivially zero.
template <class M>
void randomise(M& m, uint64_t seed) {
  Rng rng(seed);
  m.parameters([&](Parameter<double>& p) {
    Tensor<double> r = rng.normal<double>(p.shape(), 0.0, 0.3);
    if (p.name.find("norm") != std::string::npos)
      for (int64_t i = 0; i < r.numel(); ++i) r.data()[i] += 1.0;
    p.value.copy_from(r);
  });
}

template <class A>
void check_layer(attn::Config cfg, uint64_t seed, typename A::Policies pol = {}) {
  Rng rng(seed);
  typename A::template Module<double> layer("blocks.0.attn", cfg, rng, pol);
  randomise(layer, seed + 1);
  auto x = make_inputs({Rng(seed + 2).normal<double>({2, 5, cfg.d_model})});
  auto params = nn::parameter_list<double>(layer);
  params.push_back(&x[0]);
  auto r = gradcheck([&](Tape<double>& t) { return layer(t, t.param(x[0])); }, params);
  INFO(r);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("attention layer: gradcheck of input and all parameters") {
  using namespace sinklab::gate;
  attn::Config base{.d_model = 8, .heads = 2};
  attn::Config gqa{.d_model = 8, .heads = 4, .kv_heads = 2, .head_dim = 2, .qk_norm = true, .rope = true};
  SUBCASE("vanilla softmax") { check_layer<attn::Attention<>>(base, 1); }
  SUBCASE("GQA + RoPE read straight out of the projection, softmax with learnable sink") {
    check_layer<attn::Attention<score::SoftmaxSink>>(
        attn::Config{.d_model = 16, .heads = 2, .kv_heads = 1, .head_dim = 8, .rope = true}, 9);
  }
  SUBCASE("GQA + QK-norm + RoPE, softmax with learnable sink") {
    check_layer<attn::Attention<score::SoftmaxSink>>(gqa, 2);
  }
  SUBCASE("IGA / G1: input gate per channel on the output") {
    check_layer<attn::Attention<score::Softmax, FromInput<per_channel, on_output>>>(gqa, 3);
  }
  SUBCASE("VGA: value gate per head on the values, with V-scale") {
    check_layer<attn::Attention<score::Softmax, FromValue<per_head, on_values>, value::VScale>>(gqa, 4);
  }
  SUBCASE("VGA on the output per channel, bidirectional, gate with bias") {
    using A = attn::Attention<score::Softmax, FromValue<per_channel, on_output>, value::Identity, mask::Bidirectional>;
    A::Policies pol;
    pol.gate.init = Init::bondarenko();
    check_layer<A>(base, 5, pol);
  }
  SUBCASE("clipped softmax, sigmoid and ReLU/n scores") {
    check_layer<attn::Attention<score::ClippedSoftmax>>(base, 6);
    check_layer<attn::Attention<score::Sigmoid, FromInput<per_head, on_values>>>(gqa, 7);
    check_layer<attn::Attention<score::ReLU>>(base, 8);
  }
}

TEST_CASE("attention layer: the probe path gives the fused path's outputs and gradients, and records") {
  using A = attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>, value::VScale>;
  attn::Config cfg{.d_model = 16, .heads = 2, .rope = true};
  Rng rng(3);
  A::Module<float> layer("attn", cfg, rng);
  auto x0 = Rng(4).normal<float>({2, 9, 16});
  auto run = [&](autodiff::AttentionRecorder<float>* pr) {
    nn::zero_grad<float>(layer);
    Tape<float> t;
    auto x = t.leaf(x0);
    auto y = layer(t, x, pr);
    t.backward(sum(square(y)));
    return std::make_pair(y.value().clone(), layer.w_qkv.grad.clone());
  };
  auto [y_fused, g_fused] = run(nullptr);
  autodiff::AttentionRecorder<float> rec;
  auto [y_probe, g_probe] = run(&rec);
  for (int64_t i = 0; i < y_fused.numel(); ++i) CHECK(y_probe.data()[i] == doctest::Approx(y_fused.data()[i]).epsilon(1e-5));
  for (int64_t i = 0; i < g_fused.numel(); ++i) CHECK(g_probe.data()[i] == doctest::Approx(g_fused.data()[i]).epsilon(1e-4).scale(1e-3));
  CHECK(rec.weights.shape() == Shape{2, 2, 9, 9});
  CHECK(rec.value_norms.shape() == Shape{2, 2, 9});
  CHECK(rec.gate_values.shape() == Shape{2, 2, 9, 1});
  CHECK(rec.gate_values(0, 0, 0, 0) == doctest::Approx(0.5f));  // VGA init: W_g = 0
  CHECK(rec.grad_q.shape() == Shape{2, 2, 9, 8});
  CHECK(rec.output.shape() == Shape{2, 9, 16});
  // Causal rows sum to one.
  double row = 0;
  for (int j = 0; j < 9; ++j) row += rec.weights(1, 1, 4, j);
  CHECK(row == doctest::Approx(1.0));
}

TEST_CASE("attention layer: bad configurations and inputs name the layer and the shapes") {
  Rng rng(1);
  using A = attn::Attention<>;
  CHECK_THROWS_WITH_AS((A::Module<float>("blocks.3.attn", {.d_model = 10, .heads = 3}, rng)),
                       doctest::Contains("Attention 'blocks.3.attn': d_model 10 is not divisible by heads 3"), Error);
  CHECK_THROWS_WITH_AS((A::Module<float>("a", {.d_model = 8, .heads = 4, .kv_heads = 3}, rng)),
                       doctest::Contains("heads 4 must be a multiple of kv_heads 3"), Error);
  A::Module<float> layer("a", {.d_model = 8, .heads = 2}, rng);
  Tape<float> t;
  CHECK_THROWS_WITH_AS(layer(t, t.leaf(Tensor<float>::zeros({2, 3, 6}))),
                       doctest::Contains("Attention 'a': input of shape [2, 3, 6], expected [B, T, 8]"), Error);
  using X = attn::Attention<score::Softmax, gate::FromAnchor<>>;
  X::Module<float> exo("exo", {.d_model = 8, .heads = 2}, rng);
  CHECK_THROWS_WITH_AS(exo(t, t.leaf(Tensor<float>::zeros({1, 3, 8}))), doctest::Contains("needs gate logits"), Error);
}
