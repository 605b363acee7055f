// Anchor mixing (mix::): the fused mixing node against composed ops, each mode's formula,
// gradchecks of every mode inside a 2-layer model, and identities (λ₁ = 0, λ₂ = 1 is the
// unmixed model).
#include <doctest/doctest.h>

#include <map>

#include "model_testing.hpp"
#include "sinklab/nn/transformer.hpp"

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
  c.qk_norm = true;
  return c;
}

template <class Model>
void check_model(nn::ModelConfig cfg, uint64_t seed, typename Model::mix_options opts = {}) {
  Rng rng(seed);
  typename Model::template Module<double> model("", cfg, rng, {}, opts);
  model_test::randomise(model, seed + 1);
  auto ids = Tensor<int32_t>::from({2, 4}, {0, 3, 6, 1, 2, 2, 5, 4});
  auto tg = Tensor<int32_t>::from({2, 4}, {3, 6, 1, -100, 2, 5, 4, 0});
  auto params = nn::parameter_list<double>(model);
  auto r = gradcheck([&](Tape<double>& t) { return model.loss(t, ids, tg); }, params);
  INFO(r);
  CHECK(r.ok);
}

template <class Mix, class Attn = attn::Attention<score::Softmax, FromInput<per_channel, on_output>>>
struct WithMix {
  using Model = nn::Transformer<nn::PreNorm<norm::RMS>, Attn, ffn::SwiGLU, pos::RoPE, tokens::None, Mix>;
  using mix_options = typename Mix::Options;
  template <class T>
  using Module = typename Model::template Module<T>;
};

// Reference RMSNorm over the last axis from composed ops.
Var<double> rms_ref(Var<double> x, Var<double> gain, double eps) {
  Var<double> ms = mean(square(x), -1, true);
  return x / sqrt(ms + eps) * gain;
}

}  // namespace

TEST_CASE("mix_pair matches composed ops and its gradients check") {
  Rng rng(1);
  const int64_t B = 2, H = 3, L = 4, C = 5, K = 8;
  for (auto gran : {mix::Granularity::Scalar, mix::Granularity::Head, mix::Granularity::Element}) {
    const Shape cs = gran == mix::Granularity::Scalar ? Shape{1}
                     : gran == mix::Granularity::Head ? Shape{H}
                                                      : Shape{H, C};
    const Shape view = gran == mix::Granularity::Scalar ? Shape{1}
                       : gran == mix::Granularity::Head ? Shape{H, 1, 1}
                                                        : Shape{H, 1, C};
    for (int variant = 0; variant < 3; ++variant) {  // 0: static; 1: with γ; 2: anchor only, with γ
      CAPTURE(static_cast<int>(gran));
      CAPTURE(variant);
      auto in = make_inputs({rng.normal<double>({B, H, L, C}), rng.normal<double>({B, H, L, C}), rng.normal<double>(cs),
                             rng.normal<double>(cs), rng.uniform<double>({B, L, K}, 0.1, 0.9)});
      const bool gamma = variant > 0, current = variant < 2;
      auto fused = [&](Tape<double>& t) {
        Var<double> g = gamma ? t.param(in[4]) : Var<double>{};
        return mix::mix_pair(t.param(in[0]), current ? t.param(in[1]) : Var<double>{}, t.param(in[2]), t.param(in[3]),
                             gran, g, 3, 6);
      };
      auto composed = [&](Tape<double>& t) {
        Var<double> l1 = reshape(t.param(in[2]), view), l2 = reshape(t.param(in[3]), view);
        if (gamma) {
          Var<double> g = t.param(in[4]);
          // γ[b, t, col] as [B, 1, T, 1]
          l1 = l1 * reshape(slice(g, 2, 3, 4), {B, 1, L, 1});
          l2 = l2 * reshape(slice(g, 2, 6, 7), {B, 1, L, 1});
        }
        Var<double> y = l1 * t.param(in[0]);
        return current ? y + l2 * t.param(in[1]) : y;
      };
      Tape<double> t1, t2;
      auto a = fused(t1).value(), b = composed(t2).value();
      REQUIRE(a.shape() == b.shape());
      for (int64_t i = 0; i < a.numel(); ++i) CHECK(a.data()[i] == doctest::Approx(b.data()[i]).epsilon(1e-12));
      std::vector<Parameter<double>*> ps{&in[0], &in[2]};
      if (current) ps.insert(ps.end(), {&in[1], &in[3]});
      if (gamma) ps.push_back(&in[4]);
      auto r = gradcheck(fused, ps);
      INFO(r);
      CHECK(r.ok);
    }
  }
}

TEST_CASE("mix_pair refuses mismatched shapes with a clear message") {
  Tape<double> t;
  auto a = t.leaf(Tensor<double>::zeros({1, 2, 3, 4}));
  auto s = t.leaf(Tensor<double>::zeros({1, 2, 3, 5}));
  auto l = t.leaf(Tensor<double>::ones({2}));
  CHECK_THROWS_WITH_AS(mix::mix_pair(a, s, l, l, mix::Granularity::Head),
                       doctest::Contains("does not match its anchor"), Error);
  auto s_ok = t.leaf(Tensor<double>::zeros({1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(mix::mix_pair(a, s_ok, l, l, mix::Granularity::Element), doctest::Contains("expected [2, 4]"),
                       Error);
}

TEST_CASE("ExoFormer's mixing computes λ₁γ₁ ⊙ RMSNorm(S_anc) + λ₂γ₂ ⊙ S per component") {
  const mix::Dims d{
      .d_model = 6, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .gate_heads = 2, .gate_channels = 4};
  Rng rng(5);
  mix::ExoFormer<mix::per_head, mix::Dynamic>::Module<double> exo("mix", d, rng);
  // Make every parameter non-trivial (fc2 starts at zero, gains at one, λ at one).
  Rng r2(6);
  exo.parameters([&](Parameter<double>& p) {
    Tensor<double> v = r2.normal<double>(p.shape(), 0.0, 0.5);
    for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += p.name.find("norm") != std::string::npos ? 1.0 : 0.0;
    p.value.copy_from(v);
  });
  const int64_t B = 2, L = 3;
  Tensor<double> emb = rng.normal<double>({B, L, 6}), x = rng.normal<double>({B, L, 6});
  Tensor<double> q = rng.normal<double>({B, 2, L, 4}), k = rng.normal<double>({B, 1, L, 4}),
                 v = rng.normal<double>({B, 1, L, 4}), g = rng.normal<double>({B, 2, L, 4});

  Tape<double> t;
  exo.begin(t, t.constant(emb));
  attn::Projections<double> p{t.constant(q), t.constant(k), t.constant(v), t.constant(g)};
  exo.mix(t, 1, t.constant(x), p);

  // Reference from composed ops.
  Tape<double> r;
  Var<double> a = matmul(r.constant(emb), r.param(exo.anchor_proj.weight));  // [B, L, 8 + 4 + 4 + 8]
  Var<double> gamma = sigmoid(matmul(gelu(matmul(r.constant(x), r.param(exo.coeffs[1].fc1.weight))),
                                     r.param(exo.coeffs[1].fc2.weight)) +
                              r.param(exo.coeffs[1].fc2.bias));  // [B, L, 8]
  const Tensor<double>* cur[4] = {&q, &k, &v, &g};
  const int64_t heads[4] = {2, 1, 1, 2};
  int64_t col = 0;
  Var<double> mixed[4] = {p.q, p.k, p.v, p.gate};
  for (int c = 0; c < 4; ++c) {
    const int64_t h = heads[c];
    Var<double> anc = transpose(reshape(slice(a, 2, col, col + h * 4), {B, L, h, 4}), 1, 2);  // [B, h, L, 4]
    col += h * 4;
    anc = rms_ref(anc, r.param(exo.anchor_norm[c].weight), 1e-6);
    Var<double> l1 = reshape(r.param(exo.coeffs[1].lambda[c][0]), {h, 1, 1});
    Var<double> l2 = reshape(r.param(exo.coeffs[1].lambda[c][1]), {h, 1, 1});
    Var<double> g1 = reshape(slice(gamma, 2, 2 * c, 2 * c + 1), {B, 1, L, 1});
    Var<double> g2 = reshape(slice(gamma, 2, 2 * c + 1, 2 * c + 2), {B, 1, L, 1});
    Var<double> want = l1 * g1 * anc + l2 * g2 * r.constant(*cur[c]);
    const Tensor<double> got = mixed[c].value(), ref = want.value();
    REQUIRE(got.shape() == ref.shape());
    for (int64_t i = 0; i < got.numel(); ++i) CHECK(got.data()[i] == doctest::Approx(ref.data()[i]).epsilon(1e-12));
  }
}

TEST_CASE("mixing coefficients, anchors and dynamic MLP start as the paper says") {
  const mix::Dims d{
      .d_model = 8, .layers = 3, .heads = 2, .kv_heads = 2, .head_dim = 4, .gate_heads = 2, .gate_channels = 4};
  Rng rng(1);
  SUBCASE("static ExoFormer: every layer, λ = 0.5, anchor projection d → q+k+v+g, gains 1") {
    mix::ExoFormer<mix::per_element>::Module<float> m("mix", d, rng);
    std::map<std::string, Shape> shapes;
    m.parameters([&](Parameter<float>& p) { shapes[p.name] = p.shape(); });
    CHECK(shapes.at("mix.anchor_proj.weight") == Shape{8, 32});
    CHECK(shapes.at("mix.anchor_q_norm.weight") == Shape{4});
    CHECK(shapes.at("mix.layers.0.lambda_q1") == Shape{2, 4});
    CHECK(shapes.at("mix.layers.2.lambda_g2") == Shape{2, 4});
    CHECK(m.coeffs[0].lambda[2][1].value.to_vector() == std::vector<float>(8, 0.5f));
    CHECK(m.anchor_norm[3].weight.value.to_vector() == std::vector<float>(4, 1.0f));
    CHECK(shapes.size() == 1 + 4 + 3 * 8);
  }
  SUBCASE("dynamic: λ = 1, fc1 d → 16 without bias, fc2 16 → 8 zero (weight and bias)") {
    mix::ExoFormer<mix::scalar, mix::Dynamic>::Module<float> m("mix", d, rng);
    CHECK(m.coeffs[1].lambda[0][0].value.to_vector() == std::vector<float>{1.0f});
    CHECK(m.coeffs[1].fc1.weight.shape() == Shape{8, 16});
    CHECK_FALSE(m.coeffs[1].fc1.has_bias());
    CHECK(m.coeffs[1].fc2.weight.shape() == Shape{16, 8});
    CHECK(m.coeffs[1].fc2.weight.value.to_vector() == std::vector<float>(128, 0.0f));
    CHECK(m.coeffs[1].fc2.bias.value.to_vector() == std::vector<float>(8, 0.0f));
    mix::Dims no_gate = d;
    no_gate.gate_heads = no_gate.gate_channels = 0;
    mix::ExoFormer<mix::scalar, mix::Dynamic>::Module<float> m6("mix", no_gate, rng);
    CHECK(m6.coeffs[0].fc2.weight.shape() == Shape{16, 6});
    CHECK(m6.anchor_proj.weight.shape() == Shape{8, 24});
  }
  SUBCASE("NuResFormer: coefficients only for layers after the first; per-head granularity") {
    mix::NuResFormer<mix::per_head>::Module<float> m("mix", d, rng);
    CHECK(m.coeffs.size() == 2);
    CHECK(m.coeffs[0].lambda[0][0].name == "mix.layers.1.lambda_q1");
    CHECK(m.coeffs[0].lambda[0][0].shape() == Shape{2});
  }
  SUBCASE("per-head gate logits are mixed but not normalised; options switch components off") {
    mix::Dims ph = d;
    ph.gate_channels = 1;
    mix::ExoFormer<mix::per_element>::Module<float> m("mix", ph, rng, {.q = false, .k = false});
    CHECK_FALSE(m.normed[3]);
    CHECK(m.normed[2]);
    CHECK_FALSE(m.coeffs[0].lambda[0][0].value.defined());
    CHECK(m.anchor_proj.weight.shape() == Shape{8, 8 + 2});
    CHECK_THROWS_WITH_AS(
        mix::ExoFormer<>::Module<float>("mix", d, rng, {.q = false, .k = false, .v = false, .g = false}),
        doctest::Contains("no component to mix"), Error);
  }
  SUBCASE("ResFormer: fixed 0.5 / 0.5 has no parameters; learnable has two scalars per later layer") {
    mix::ResFormer::Module<float> fixed("mix", d, rng);
    CHECK(nn::parameter_count<float>(fixed) == 0);
    mix::ResFormer::Module<float> learn("mix", d, rng, {.learnable = true});
    CHECK(nn::parameter_count<float>(learn) == 4);
  }
}

TEST_CASE("every mixing mode's gradients check inside a 2-layer model") {
  SUBCASE("ResFormer, fixed and learnable") {
    check_model<WithMix<mix::ResFormer>>(tiny(), 1);
    check_model<WithMix<mix::ResFormer>>(tiny(), 2, {.learnable = true});
  }
  SUBCASE("NuResFormer: scalar / head / element, static and dynamic, with and without anchor norms") {
    check_model<WithMix<mix::NuResFormer<mix::scalar>>>(tiny(), 3);
    check_model<WithMix<mix::NuResFormer<mix::per_head>>>(tiny(), 4);
    check_model<WithMix<mix::NuResFormer<mix::per_element>>>(tiny(), 5);
    check_model<WithMix<mix::NuResFormer<mix::per_element, mix::Dynamic>>>(tiny(), 6);
    check_model<WithMix<mix::NuResFormer<mix::per_element>>>(tiny(), 7, {.normalize_anchor = false});
  }
  SUBCASE("ExoFormer: scalar / head / element static, element dynamic") {
    check_model<WithMix<mix::ExoFormer<mix::scalar>>>(tiny(), 8);
    check_model<WithMix<mix::ExoFormer<mix::per_head>>>(tiny(), 9);
    check_model<WithMix<mix::ExoFormer<mix::per_element>>>(tiny(), 10);
    check_model<WithMix<mix::ExoFormer<mix::per_element, mix::Dynamic>>>(tiny(), 11);
  }
  SUBCASE("ExoFormer with GQA, gates given only by the anchor, and a per-head gate on the values") {
    auto c = tiny();
    c.heads = 4;
    c.kv_heads = 2;
    c.d_model = 8;
    c.head_dim = 2;
    check_model<WithMix<mix::ExoFormer<mix::per_head, mix::Dynamic>>>(c, 12);
    check_model<
        WithMix<mix::ExoFormer<mix::per_element>, attn::Attention<score::Softmax, FromAnchor<per_channel, on_output>>>>(
        tiny(), 13);
    check_model<
        WithMix<mix::ExoFormer<mix::per_element>, attn::Attention<score::Softmax, FromValue<per_head, on_values>>>>(
        tiny(), 14);
  }
  SUBCASE("no gate: q, k, v only") {
    check_model<WithMix<mix::ExoFormer<mix::per_element, mix::Dynamic>, attn::Attention<>>>(tiny(), 15);
    check_model<WithMix<mix::NuResFormer<mix::scalar>, attn::Attention<>>>(tiny(), 16);
  }
}

TEST_CASE("with λ₁ = 0 and λ₂ = 1 a mixed model computes exactly the unmixed one") {
  using GA = attn::Attention<score::Softmax, FromInput<per_channel, on_output>>;
  using Base = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU>;
  using Nu = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::None, mix::NuResFormer<>>;
  using Exo =
      nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::None, mix::ExoFormer<mix::per_head>>;
  using Res = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::None, mix::ResFormer>;
  auto cfg = tiny();
  cfg.layers = 3;
  auto ids = Tensor<int32_t>::from({2, 5}, {0, 3, 6, 1, 2, 2, 5, 4, 4, 1});
  Rng r0(3);
  Base::Module<double> base("", cfg, r0);
  std::map<std::string, Tensor<double>> shared;
  base.parameters([&](Parameter<double>& p) { shared[p.name] = p.value; });
  Tape<double> tb;
  const Tensor<double> want = base.logits(tb, ids).value();

  auto run = [&](auto& model, bool neutral) {
    model.parameters([&](Parameter<double>& p) {
      if (auto it = shared.find(p.name); it != shared.end()) p.value.copy_from(it->second);
      const bool is_lambda = p.name.find("lambda_") != std::string::npos;
      if (is_lambda) p.value.fill(p.name.back() == '1' ? (neutral ? 0.0 : 0.3) : 1.0);
    });
    Tape<double> t;
    const Tensor<double> got = model.logits(t, ids).value();
    double diff = 0;
    for (int64_t i = 0; i < got.numel(); ++i) diff = std::max(diff, std::abs(got.data()[i] - want.data()[i]));
    return diff;
  };
  Rng r1(4), r2(4), r3(4);
  Nu::Module<double> nu("", cfg, r1);
  Exo::Module<double> exo("", cfg, r2);
  Res::Module<double> res("", cfg, r3, {}, {.learnable = true});
  CHECK(run(nu, true) < 1e-12);
  CHECK(run(exo, true) < 1e-12);
  CHECK(run(res, true) < 1e-12);
  CHECK(run(nu, false) > 1e-4);
  CHECK(run(res, false) > 1e-4);
  CHECK(run(exo, false) > 1e-4);
}

TEST_CASE("NuResFormer refuses gates that exist only as anchors") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<score::Softmax, FromAnchor<>>, ffn::SwiGLU,
                            pos::RoPE, tokens::None, mix::NuResFormer<>>;
  Rng rng(1);
  M::Module<float> m("", tiny(), rng);
  Tape<float> t;
  auto ids = Tensor<int32_t>::from({1, 3}, {1, 2, 3});
  CHECK_THROWS_WITH_AS(m.logits(t, ids), doctest::Contains("layer 0 has no g projection"), Error);
}
