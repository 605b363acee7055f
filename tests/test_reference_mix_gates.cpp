// Forward VALUES of anchor mixing and gate sources, pinned against plain double loops:
//   - ResFormer: V_n = λ₁·V_1 + λ₂·V_n with V_1 = layer 0's raw V (not a later layer's, not a mixed V);
//   - NuResFormer: Ŝ_n = λ₁ ⊙ RMSNorm(S_anc)·gain + λ₂ ⊙ S_n for n ≥ 1, anchor = layer 0's projections,
//     layer 0 itself unmixed (static per-element and dynamic per-head, γ = σ(fc2(GELU(fc1 x))));
//   - the same at model level through the probe (which layer is the anchor, in a real forward);
//   - ExoFormer with a gate::FromAnchor gate: the gate logits are λ₁γ₁ ⊙ RMSNorm(anchor_g) alone;
//   - gate sources in a whole attention layer where x, v and the anchor logits all differ:
//     FromInput reads x, FromValue reads v, FromAnchor reads the given logits; each placement
//     and granularity; a reference with any other source differs from the layer's output.
// GCC 12 reports its own AVX-512 intrinsics inside xsimd's double exp as -Wuninitialized (a
// false positive, as optim/adamw.hpp notes for sqrt); double models and kernels reach it here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "model_testing.hpp"
#include "sinklab/nn/transformer.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

using Vec = std::vector<double>;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// RMSNorm of each row of the last axis of a [B, H, T, C] tensor with gain g, in double.
Tensor<double> ref_rms_rows(const Tensor<double>& x, const Tensor<double>& g, double eps) {
  Tensor<double> y = x.clone();
  const int64_t C = x.shape()[-1], rows = x.numel() / C;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += x.data()[r * C + c] * x.data()[r * C + c];
    const double inv = 1.0 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c) y.data()[r * C + c] = x.data()[r * C + c] * inv * g.data()[c];
  }
  return y;
}

double max_abs_diff(const Tensor<double>& a, const Tensor<double>& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::abs(a.data()[i] - b.data()[i]));
  return d;
}

void check_equal(const Tensor<double>& got, const Tensor<double>& want, double tol = 1e-12) {
  REQUIRE(got.shape() == want.shape());
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.data()[i]));
  CHECK(max_abs_diff(got, want) <= tol * std::max(1.0, scale));
}

// Non-trivial values for every parameter of a mixing module (gains around 1).
template <class M>
void randomise_mixer(M& m, uint64_t seed) {
  Rng r(seed);
  m.parameters([&](Parameter<double>& p) {
    Tensor<double> v = r.normal<double>(p.shape(), 0.0, 0.5);
    if (p.name.find("norm") != std::string::npos)
      for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += 1.0;
    p.value.copy_from(v);
  });
}

}  // namespace

TEST_CASE("ResFormer mixing: V_n = λ₁·V₁ + λ₂·V_n with V₁ = layer 0's raw V, for every later layer") {
  const mix::Dims d{.d_model = 6, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 3};
  const int64_t B = 2, L = 4;
  Rng rng(1);
  std::vector<Tensor<double>> V;
  for (int n = 0; n < 3; ++n) V.push_back(rng.normal<double>({B, 1, L, 3}));
  const Tensor<double> q = rng.normal<double>({B, 2, L, 3}), k = rng.normal<double>({B, 1, L, 3});
  auto run = [&](auto& mixer, std::vector<Tensor<double>>& out_v, std::vector<Tensor<double>>& out_q) {
    Tape<double> t;
    mixer.begin(t, t.constant(Tensor<double>::zeros({B, L, 6})));
    for (int64_t n = 0; n < 3; ++n) {
      attn::Projections<double> p{t.constant(q), t.constant(k), t.constant(V[n]), Var<double>{}};
      REQUIRE(mixer.mixes(n));
      mixer.mix(t, n, t.constant(Tensor<double>::zeros({B, L, 6})), p);
      out_v.push_back(p.v.value());
      out_q.push_back(p.q.value());
    }
  };
  SUBCASE("official fixed 0.5 / 0.5") {
    mix::ResFormer::Module<double> res("mix", d, rng);
    std::vector<Tensor<double>> v, qs;
    run(res, v, qs);
    check_equal(v[0], V[0]);  // layer 0 is not mixed
    for (int n = 1; n < 3; ++n) {
      Tensor<double> want = V[n].clone();
      for (int64_t i = 0; i < want.numel(); ++i) want.data()[i] = 0.5 * V[0].data()[i] + 0.5 * V[n].data()[i];
      check_equal(v[n], want);
      check_equal(qs[n], q);  // only V is mixed
    }
  }
  SUBCASE("learnable: layer n uses its own (λ₁, λ₂), λ₁ on the anchor") {
    mix::ResFormer::Module<double> res("mix", d, rng, {.learnable = true});
    REQUIRE(res.lambda.size() == 2);
    res.lambda[0][0].value.fill(0.2);  // layer 1: λ₁
    res.lambda[0][1].value.fill(0.9);  // layer 1: λ₂
    res.lambda[1][0].value.fill(-0.7);
    res.lambda[1][1].value.fill(1.3);
    CHECK(res.lambda[0][0].name == "mix.layers.1.lambda_v1");
    std::vector<Tensor<double>> v, qs;
    run(res, v, qs);
    check_equal(v[0], V[0]);
    const double l1[3] = {0, 0.2, -0.7}, l2[3] = {0, 0.9, 1.3};
    for (int n = 1; n < 3; ++n) {
      Tensor<double> want = V[n].clone();
      for (int64_t i = 0; i < want.numel(); ++i) want.data()[i] = l1[n] * V[0].data()[i] + l2[n] * V[n].data()[i];
      check_equal(v[n], want);
      // Anchoring on the previous layer's raw V, or on its mixed V, would give something else.
      Tensor<double> prev = V[n].clone();
      for (int64_t i = 0; i < prev.numel(); ++i) prev.data()[i] = l1[n] * V[n - 1].data()[i] + l2[n] * V[n].data()[i];
      if (n == 2) CHECK(max_abs_diff(v[n], prev) > 1e-2);
    }
  }
}

TEST_CASE("NuResFormer mixing: anchors are layer 0's q, k, v, g RMS-normed per head; mixed into layers ≥ 1 only") {
  // GQA and a per-channel gate, so every component has its own shape.
  const mix::Dims d{
      .d_model = 6, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 4, .gate_heads = 2, .gate_channels = 4};
  const int64_t B = 2, L = 3;
  const Shape shapes[4] = {{B, 2, L, 4}, {B, 1, L, 4}, {B, 1, L, 4}, {B, 2, L, 4}};
  Rng rng(2);
  std::vector<std::array<Tensor<double>, 4>> S(3);
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 4; ++c) S[n][c] = rng.normal<double>(shapes[c], 0.3, 1.2);
  std::vector<Tensor<double>> X;  // each layer's (normed) input, for dynamic coefficients
  for (int n = 0; n < 3; ++n) X.push_back(rng.normal<double>({B, L, 6}));

  auto run = [&](auto& mixer) {
    std::vector<std::array<Tensor<double>, 4>> out(3);
    Tape<double> t;
    mixer.begin(t, t.constant(Tensor<double>::zeros({B, L, 6})));
    for (int64_t n = 0; n < 3; ++n) {
      attn::Projections<double> p{t.constant(S[n][0]), t.constant(S[n][1]), t.constant(S[n][2]),
                                  t.constant(S[n][3])};
      mixer.mix(t, n, t.constant(X[n]), p);
      out[n] = {p.q.value(), p.k.value(), p.v.value(), p.gate.value()};
    }
    return out;
  };

  SUBCASE("static, per-element λ") {
    mix::NuResFormer<mix::per_element>::Module<double> nu("mix", d, rng);
    randomise_mixer(nu, 3);
    const auto out = run(nu);
    for (int c = 0; c < 4; ++c) {
      INFO("component ", c);
      check_equal(out[0][c], S[0][c]);  // layer 0 is the anchor, unmixed
      const Tensor<double> anc = ref_rms_rows(S[0][c], nu.anchor_norm[c].weight.value, 1e-6);
      for (int n = 1; n < 3; ++n) {
        INFO("layer ", n);
        const Tensor<double>& l1 = nu.coeffs[n - 1].lambda[c][0].value;  // [heads, C]
        const Tensor<double>& l2 = nu.coeffs[n - 1].lambda[c][1].value;
        Tensor<double> want = S[n][c].clone();
        const int64_t Hc = shapes[c][1];
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < Hc; ++h)
            for (int64_t tt = 0; tt < L; ++tt)
              for (int64_t ch = 0; ch < 4; ++ch)
                want(b, h, tt, ch) = l1(h, ch) * anc(b, h, tt, ch) + l2(h, ch) * S[n][c](b, h, tt, ch);
        check_equal(out[n][c], want);
        // The same formula anchored on layer 1 instead of layer 0 gives a different value.
        if (n == 2) {
          const Tensor<double> wrong_anc = ref_rms_rows(S[1][c], nu.anchor_norm[c].weight.value, 1e-6);
          Tensor<double> wrong = want.clone();
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < Hc; ++h)
              for (int64_t tt = 0; tt < L; ++tt)
                for (int64_t ch = 0; ch < 4; ++ch)
                  wrong(b, h, tt, ch) = l1(h, ch) * wrong_anc(b, h, tt, ch) + l2(h, ch) * S[n][c](b, h, tt, ch);
          CHECK(max_abs_diff(out[n][c], wrong) > 1e-2);
        }
      }
    }
  }
  SUBCASE("dynamic, per-head λ: γ = σ(fc2(GELU(fc1 x))) scales λ per token, columns (q1, q2, k1, k2, v1, v2, g1, g2)") {
    mix::NuResFormer<mix::per_head, mix::Dynamic>::Module<double> nu("mix", d, rng);
    randomise_mixer(nu, 4);
    const auto out = run(nu);
    for (int c = 0; c < 4; ++c) check_equal(out[0][c], S[0][c]);
    for (int n = 1; n < 3; ++n) {
      const auto& lc = nu.coeffs[n - 1];
      // γ [B, L, 8] by hand: exact GELU, fc1 without bias, fc2 with bias.
      const Tensor<double>& w1 = lc.fc1.weight.value;  // [6, 16]
      const Tensor<double>& w2 = lc.fc2.weight.value;  // [16, 8]
      const Tensor<double>& b2 = lc.fc2.bias.value;    // [8]
      REQUIRE(w1.shape() == Shape{6, 16});
      REQUIRE(w2.shape() == Shape{16, 8});
      Tensor<double> gamma = Tensor<double>::zeros({B, L, 8});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t tt = 0; tt < L; ++tt) {
          double h[16];
          for (int64_t j = 0; j < 16; ++j) {
            double a = 0;
            for (int64_t i = 0; i < 6; ++i) a += X[n](b, tt, i) * w1(i, j);
            h[j] = 0.5 * a * std::erfc(-a / std::sqrt(2.0));
          }
          for (int64_t k = 0; k < 8; ++k) {
            double a = b2(k);
            for (int64_t j = 0; j < 16; ++j) a += h[j] * w2(j, k);
            gamma(b, tt, k) = sigmoid(a);
          }
        }
      for (int c = 0; c < 4; ++c) {
        INFO("layer ", n, " component ", c);
        const Tensor<double> anc = ref_rms_rows(S[0][c], nu.anchor_norm[c].weight.value, 1e-6);
        const Tensor<double>& l1 = lc.lambda[c][0].value;  // [heads]
        const Tensor<double>& l2 = lc.lambda[c][1].value;
        Tensor<double> want = S[n][c].clone();
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < shapes[c][1]; ++h)
            for (int64_t tt = 0; tt < L; ++tt)
              for (int64_t ch = 0; ch < 4; ++ch)
                want(b, h, tt, ch) = l1(h) * gamma(b, tt, 2 * c) * anc(b, h, tt, ch) +
                                     l2(h) * gamma(b, tt, 2 * c + 1) * S[n][c](b, h, tt, ch);
        check_equal(out[n][c], want);
      }
    }
  }
}

namespace {

// The raw V of layer n, [B, H_kv, T, d_h], from its attention input and W_qkv (plain loops).
template <class Layer>
Tensor<double> raw_values(const Layer& layer, const Tensor<double>& attn_in) {
  const auto& a = layer.attn;
  const Tensor<double>& W = a.w_qkv.value;
  const int64_t B = attn_in.size(0), L = attn_in.size(1), D = attn_in.size(2), col0 = (a.H + a.Hkv) * a.dh;
  Tensor<double> v = Tensor<double>::zeros({B, a.Hkv, L, a.dh});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t h = 0; h < a.Hkv; ++h)
        for (int64_t c = 0; c < a.dh; ++c) {
          double s = 0;
          for (int64_t i = 0; i < D; ++i) s += attn_in(b, t, i) * W(i, col0 + h * a.dh + c);
          v(b, h, t, c) = s;
        }
  return v;
}

nn::ModelConfig mix_cfg() {
  nn::ModelConfig c;
  c.vocab = 9;
  c.d_model = 8;
  c.layers = 3;
  c.heads = 2;
  c.kv_heads = 1;
  c.ffn_hidden = 8;
  c.max_len = 16;
  return c;
}

}  // namespace

TEST_CASE("in a real forward, ResFormer and NuResFormer anchor on layer 0 (the paper's layer 1)") {
  const auto ids = Tensor<int32_t>::from({2, 5}, {1, 2, 3, 4, 5, 8, 0, 7, 7, 1});
  SUBCASE("ResFormer") {
    using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU, pos::Learned, tokens::None,
                              mix::ResFormer>;
    Rng rng(5);
    M::Module<double> model("", mix_cfg(), rng);
    model_test::randomise(model, 6);
    nn::ModelProbe<double> pr;
    Tape<double> t;
    model.logits(t, ids, &pr);
    std::vector<Tensor<double>> raw;
    for (int n = 0; n < 3; ++n) raw.push_back(raw_values(model.layers[n], pr.layers[n].attn_in));
    check_equal(pr.layers[0].attn.values, raw[0]);
    for (int n = 1; n < 3; ++n) {
      INFO("layer ", n);
      Tensor<double> want = raw[n].clone();
      for (int64_t i = 0; i < want.numel(); ++i) want.data()[i] = 0.5 * raw[0].data()[i] + 0.5 * raw[n].data()[i];
      check_equal(pr.layers[n].attn.values, want);
    }
  }
  SUBCASE("NuResFormer, per element, static") {
    using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU, pos::Learned, tokens::None,
                              mix::NuResFormer<>>;
    Rng rng(7);
    M::Module<double> model("", mix_cfg(), rng);
    model_test::randomise(model, 8);
    nn::ModelProbe<double> pr;
    Tape<double> t;
    model.logits(t, ids, &pr);
    std::vector<Tensor<double>> raw;
    for (int n = 0; n < 3; ++n) raw.push_back(raw_values(model.layers[n], pr.layers[n].attn_in));
    check_equal(pr.layers[0].attn.values, raw[0]);
    const Tensor<double> anc = ref_rms_rows(raw[0], model.mixer.anchor_norm[2].weight.value, 1e-6);
    for (int n = 1; n < 3; ++n) {
      INFO("layer ", n);
      const Tensor<double>& l1 = model.mixer.coeffs[n - 1].lambda[2][0].value;  // [1, d_h]
      const Tensor<double>& l2 = model.mixer.coeffs[n - 1].lambda[2][1].value;
      Tensor<double> want = raw[n].clone();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t tt = 0; tt < 5; ++tt)
          for (int64_t c = 0; c < 4; ++c)
            want(b, 0, tt, c) = l1(0, c) * anc(b, 0, tt, c) + l2(0, c) * raw[n](b, 0, tt, c);
      check_equal(pr.layers[n].attn.values, want);
    }
  }
}

TEST_CASE("ExoFormer with gate::FromAnchor: the gate logits are λ₁γ₁ ⊙ RMSNorm(anchor_g)·gain, nothing else") {
  const mix::Dims d{
      .d_model = 6, .layers = 2, .heads = 2, .kv_heads = 2, .head_dim = 3, .gate_heads = 2, .gate_channels = 3};
  Rng rng(9);
  mix::ExoFormer<mix::per_element>::Module<double> exo("mix", d, rng);
  randomise_mixer(exo, 10);
  const int64_t B = 2, L = 3;
  const Tensor<double> emb = rng.normal<double>({B, L, 6});
  Tape<double> t;
  exo.begin(t, t.constant(emb));
  for (int64_t n = 0; n < 2; ++n) {
    attn::Projections<double> p{t.constant(rng.normal<double>({B, 2, L, 3})),
                                t.constant(rng.normal<double>({B, 2, L, 3})),
                                t.constant(rng.normal<double>({B, 2, L, 3})), Var<double>{}};
    exo.mix(t, n, t.constant(rng.normal<double>({B, L, 6})), p);
    REQUIRE(p.gate.defined());
    // anchor_proj columns: q [0, 6), k [6, 12), v [12, 18), g [18, 24).
    const Tensor<double>& W = exo.anchor_proj.weight.value;
    REQUIRE(W.shape() == Shape{6, 24});
    Tensor<double> ag = Tensor<double>::zeros({B, 2, L, 3});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tt = 0; tt < L; ++tt)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t c = 0; c < 3; ++c) {
            double s = 0;
            for (int64_t i = 0; i < 6; ++i) s += emb(b, tt, i) * W(i, 18 + h * 3 + c);
            ag(b, h, tt, c) = s;
          }
    const Tensor<double> anc = ref_rms_rows(ag, exo.anchor_norm[3].weight.value, 1e-6);
    const Tensor<double>& l1 = exo.coeffs[n].lambda[3][0].value;
    Tensor<double> want = anc.clone();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t tt = 0; tt < L; ++tt)
          for (int64_t c = 0; c < 3; ++c) want(b, h, tt, c) = l1(h, c) * anc(b, h, tt, c);
    INFO("layer ", n);
    check_equal(p.gate.value(), want);
  }
}

namespace {

enum class Src { Input, Value, Anchor };
const char* src_name(Src s) { return s == Src::Input ? "x" : s == Src::Value ? "v" : "anchor"; }

// One attention layer (causal softmax, no RoPE / QK-norm) written out in double, with the gate
// logits taken from `src`: x·W_g + b (Input), v·W_g + b (Value, v = the V columns of x·W_qkv) or
// the given anchor logits [B, gh, T, G].
template <class Module>
Tensor<double> ref_layer(const Module& m, const Tensor<double>& x, Src src, const Tensor<double>& anchor,
                         bool on_values, int64_t G) {
  const int64_t B = x.size(0), L = x.size(1), D = x.size(2), H = m.H, Hkv = m.Hkv, dh = m.dh;
  const int64_t N = (H + 2 * Hkv) * dh, gh = on_values ? Hkv : H;
  const Tensor<double>& Wqkv = m.w_qkv.value;
  Tensor<double> qkv = Tensor<double>::zeros({B, L, N});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += x(b, t, i) * Wqkv(i, j);
        qkv(b, t, j) = s;
      }
  // Gate logits [B, gh, T, G].
  Tensor<double> g = Tensor<double>::zeros({B, gh, L, G});
  if (src == Src::Anchor) {
    g = anchor;
  } else {
    const Tensor<double>& Wg = m.w_gate.value;
    const int64_t rows = Wg.size(0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t h = 0; h < gh; ++h)
          for (int64_t c = 0; c < G; ++c) {
            double s = m.b_gate.value.defined() ? m.b_gate.value(h * G + c) : 0.0;
            for (int64_t i = 0; i < rows; ++i)
              s += (src == Src::Input ? x(b, t, i) : qkv(b, t, (H + Hkv) * dh + i)) * Wg(i, h * G + c);
            g(b, h, t, c) = s;
          }
  }
  auto gate = [&](int64_t b, int64_t h, int64_t t, int64_t c) { return sigmoid(g(b, h, t, G == 1 ? 0 : c)); };
  Tensor<double> merged = Tensor<double>::zeros({B, L, H * dh});
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv);
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> s(i + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < dh; ++c) dot += qkv(b, i, h * dh + c) * qkv(b, j, (H + hk) * dh + c);
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(s[j] - mx);
        for (int64_t c = 0; c < dh; ++c) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double v = qkv(b, j, (H + Hkv + hk) * dh + c);
            if (on_values) v *= gate(b, hk, j, c);
            o += std::exp(s[j] - mx) / z * v;
          }
          if (!on_values) o *= gate(b, h, i, c);
          merged(b, i, h * dh + c) = o;
        }
      }
    }
  const Tensor<double>& Wo = m.w_o.value;
  Tensor<double> y = Tensor<double>::zeros({B, L, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t j = 0; j < D; ++j) {
        double s = 0;
        for (int64_t i = 0; i < H * dh; ++i) s += merged(b, t, i) * Wo(i, j);
        y(b, t, j) = s;
      }
  return y;
}

template <class Gate>
void check_gate_source(Src src, uint64_t seed) {
  using A = attn::Attention<score::Softmax, Gate>;
  constexpr bool on_values = A::gate_on_values;
  // d_model = H_kv·d_head, so W_g fits x and v alike and a wrong source is not a shape error.
  // GQA (4 query heads, 2 kv heads): gates on the output are per query head, on the values per kv head.
  const attn::Config cfg{.d_model = 8, .heads = 4, .kv_heads = 2, .head_dim = 4};
  Rng rng(seed);
  typename A::template Module<double> m("attn", cfg, rng);
  Rng pr(seed + 1);
  m.parameters([&](Parameter<double>& p) { p.value.copy_from(pr.normal<double>(p.shape(), 0.0, 0.5)); });
  const int64_t B = 2, L = 5, G = Gate::channels(4), gh = on_values ? 2 : 4;
  REQUIRE(m.gate_heads == gh);
  const Tensor<double> x = pr.normal<double>({B, L, 8});
  const Tensor<double> anchor = pr.normal<double>({B, gh, L, G}, 0.0, 2.0);
  Tape<double> t;
  attn::Extras<double> ex;
  if (src == Src::Anchor) ex.gate_logits = t.constant(anchor);
  const Tensor<double> got = m.forward(t, t.constant(x), ex).value();
  INFO("gate source ", std::string(src_name(src)), std::string(on_values ? " on values" : " on output"),
       std::string(G == 1 ? " per head" : " per channel"));
  check_equal(got, ref_layer(m, x, src, anchor, on_values, G));
  // Every other source gives a clearly different output.
  for (Src other : {Src::Input, Src::Value, Src::Anchor}) {
    if (other == src || (other != Src::Anchor && !m.w_gate.value.defined())) continue;
    INFO("wrong source ", std::string(src_name(other)));
    CHECK(max_abs_diff(got, ref_layer(m, x, other, anchor, on_values, G)) > 1e-3);
  }
  // With the probe's materialised path too, and the recorded gate values are σ(logits).
  autodiff::AttentionRecorder<double> rec;
  ex.probe = &rec;
  Tape<double> t2;
  if (src == Src::Anchor) ex.gate_logits = t2.constant(anchor);
  check_equal(m.forward(t2, t2.constant(x), ex).value(), got);
  REQUIRE(rec.gate_values.shape() == Shape{B, gh, L, G});
  if (src == Src::Anchor)
    for (int64_t i = 0; i < anchor.numel(); ++i)
      CHECK(rec.gate_values.data()[i] == doctest::Approx(sigmoid(anchor.data()[i])).epsilon(1e-12));
}

}  // namespace

TEST_CASE("gate sources in an attention layer: FromInput reads x, FromValue reads v, FromAnchor the anchor logits") {
  using namespace sinklab::gate;
  check_gate_source<FromInput<per_channel, on_output>>(Src::Input, 10);
  check_gate_source<FromInput<per_head, on_values>>(Src::Input, 11);
  check_gate_source<FromValue<per_head, on_values>>(Src::Value, 12);
  check_gate_source<FromValue<per_channel, on_output>>(Src::Value, 13);
  check_gate_source<FromValue<per_channel, on_values>>(Src::Value, 14);
  check_gate_source<FromAnchor<per_channel, on_output>>(Src::Anchor, 15);
  check_gate_source<FromAnchor<per_head, on_values>>(Src::Anchor, 16);
}
