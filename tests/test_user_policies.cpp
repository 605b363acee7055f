// Policies written outside the library, exactly as docs/extending.md shows them: a soft-capped
// score, a tanh gate, a scaled RMS norm (used as block norm, QK-norm and anchor norm) and a
// per-head value scale. Each is checked against its formula computed here, and a model built
// from all of them passes a whole-model gradcheck.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "model_testing.hpp"
#include "softcap_score.hpp"
#include "sinklab/autodiff/gradcheck.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/nn/transformer.hpp"

namespace user {
using namespace sinklab;

// A tanh gate on each head's output, g = tanh(x·W_g), in place of the sigmoid.
struct TanhGate : gate::FromInput<gate::per_head, gate::on_output> {
  static constexpr const char* name = "tanh_gate";
  template <class V>
  SINKLAB_HD static V activation(V x) {
    using std::tanh;
    return tanh(x);
  }
  template <class V>
  SINKLAB_HD static V activation_grad(V x) {
    using std::tanh;
    const V t = tanh(x);
    return V(1) - t * t;
  }
};

// RMSNorm with a fixed output scale: y = scale · x / √(mean(x²) + eps) ⊙ g.
struct ScaledRMS {
  static constexpr const char* name = "ScaledRMS";
  template <class T, class Device = cpu>
  struct Module {
    autodiff::Parameter<T, Device> weight;
    int64_t dim = 0;
    double eps = 1e-6, scale = 2.0;
    Module() = default;
    Module(std::string prefix, int64_t d, Rng&, const norm::Options& o = {})
        : dim(d), eps(o.eps.value_or(1e-6)) {
      weight = autodiff::Parameter<T, Device>(nn::join_name(prefix, "weight"), Tensor<T, Device>::ones({d}));
    }
    autodiff::Var<T, Device> operator()(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> x) {
      return autodiff::rms_norm(x, tape.param(weight), eps) * scale;
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
    }
  };
};

// v̂ = s_h · v with one learnable scale per key/value head (init 1).
struct HeadScale {
  static constexpr bool identity = false;
  static constexpr const char* name = "head_scale";
  template <class T>
  struct Params {
    Tensor<T> scale;  // [H_kv]
    template <class F>
    void parameters(F&& f) {
      f("value_scale", scale);
    }
    template <class F>
    void parameters(F&& f) const {
      f("value_scale", scale);
    }
  };
  template <class T>
  struct Args {
    const T* scale = nullptr;
  };
  template <class T>
  Params<T> make_params(int64_t kv_heads) const {
    return {Tensor<T>::ones({kv_heads})};
  }
  template <class T>
  Args<T> args(const Params<T>& p) const {
    return {p.scale.data()};
  }
  template <class T>
  void check_params(const Params<T>& p, int64_t kv_heads, const char* where) const {
    SINKLAB_CHECK(p.scale.defined() && p.scale.shape() == Shape{kv_heads}, where, ": value_scale must be [", kv_heads,
                  "]");
  }
  template <class T>
  SINKLAB_HD void forward_row(const Args<T>& a, int64_t hk, const T* v, T* out, int64_t d) const {
    for (int64_t c = 0; c < d; ++c) out[c] = a.scale[hk] * v[c];
  }
  template <class T>
  SINKLAB_HD T backward_row(const Args<T>& a, int64_t hk, const T* v, const T* dvhat, T* dv, int64_t d) const {
    T g = 0;
    for (int64_t c = 0; c < d; ++c) {
      dv[c] = a.scale[hk] * dvhat[c];
      g += v[c] * dvhat[c];
    }
    return g;
  }
  template <class T>
  void add_param_grad(Params<T>& grads, int64_t hk, double g) const {
    grads.scale.data()[hk] += static_cast<T>(g);
  }
};

}  // namespace user

using namespace sinklab;

static_assert(score::Policy<user::Softcap> && score::HasLogitsTransform<user::Softcap>);
static_assert(gate::is_policy_v<user::TanhGate>);
static_assert(norm::Policy<user::ScaledRMS>);
static_assert(value::Policy<user::HeadScale>);
static_assert(!norm::Policy<int> && !value::Policy<user::ScaledRMS> && !score::Policy<user::HeadScale>);

TEST_CASE("user score: soft-capped logits in the fused kernels (both layouts) and the reference match the formula") {
  using namespace kernels::cpu;
  const user::Softcap sc{{}, 1.5};
  for (int64_t d : {16, 6}) {  // 16: whole SIMD vectors (the transposed forward); 6: the row path
    CAPTURE(d);
    const int64_t B = 1, H = 2, T = 37;
    Rng rng(4);
    auto q = rng.normal<double>({B, H, T, d}, 0.0, 2.0);
    auto k = rng.normal<double>({B, H, T, d}, 0.0, 2.0);
    auto v = rng.normal<double>({B, H, T, d}, 0.0, 1.0);
    // The formula, by hand: causal softmax of cap·tanh(q·k/√d / cap).
    Tensor<double> want = Tensor<double>::zeros({B, H, T, d});
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> t(static_cast<std::size_t>(i + 1));
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += q(0, h, i, c) * k(0, h, j, c);
          t[j] = 1.5 * std::tanh(s / std::sqrt(double(d)) / 1.5);
          mx = std::max(mx, t[j]);
        }
        for (int64_t j = 0; j <= i; ++j) z += std::exp(t[j] - mx);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < d; ++c) want(0, h, i, c) += std::exp(t[j] - mx) / z * v(0, h, j, c);
      }
    AttentionOptions opt;
    opt.block_q = 8;
    opt.block_k = 16;
    const auto params = sc.make_params<double>(H);
    auto fused = attention_fused_forward(sc, mask::Causal{}, q, k, v, params, opt);
    auto ref = attention_reference_forward(sc, mask::Causal{}, q, k, v, params, opt);
    for (int64_t n = 0; n < want.numel(); ++n) {
      CHECK(fused.out.data()[n] == doctest::Approx(want.data()[n]).epsilon(1e-12).scale(1.0));
      CHECK(ref.out.data()[n] == doctest::Approx(want.data()[n]).epsilon(1e-12).scale(1.0));
    }
    // Float kernels agree with the double formula too.
    auto fused_f = attention_fused_forward(sc, mask::Causal{}, q.to<float>(), k.to<float>(), v.to<float>(),
                                           sc.make_params<float>(H), opt);
    for (int64_t n = 0; n < want.numel(); ++n)
      CHECK(fused_f.out.data()[n] == doctest::Approx(want.data()[n]).epsilon(1e-5).scale(1.0));
    // Fused and reference gradients agree (the transform's derivative multiplies dS).
    auto dout = rng.normal<double>({B, H, T, d}, 0.0, 1.0);
    auto gf = attention_fused_backward(sc, mask::Causal{}, q, k, v, params, fused, dout, opt);
    auto gr = attention_reference_backward(sc, mask::Causal{}, q, k, v, params, dout, opt);
    for (int64_t n = 0; n < q.numel(); ++n) {
      CHECK(gf.dq.data()[n] == doctest::Approx(gr.dq.data()[n]).epsilon(1e-10).scale(1.0));
      CHECK(gf.dk.data()[n] == doctest::Approx(gr.dk.data()[n]).epsilon(1e-10).scale(1.0));
    }
  }
}

TEST_CASE("user gate and value transform: a tanh gate and a per-head value scale compute their formulas") {
  using namespace kernels::cpu;
  Rng rng(6);
  auto v = rng.normal<double>({1, 2, 3, 4}, 0.0, 1.0);
  auto lg = rng.normal<double>({1, 2, 3, 1}, 0.0, 1.0);
  auto y = gate_forward(user::TanhGate{}, v, lg);
  CHECK(y(0, 1, 2, 3) == doctest::Approx(std::tanh(lg(0, 1, 2, 0)) * v(0, 1, 2, 3)));
  user::HeadScale hs;
  auto p = hs.make_params<double>(2);
  p.scale(1) = 3.0;
  auto vh = value_transform_forward(hs, v, p);
  CHECK(vh(0, 1, 2, 3) == doctest::Approx(3.0 * v(0, 1, 2, 3)));
  CHECK(vh(0, 0, 2, 3) == doctest::Approx(v(0, 0, 2, 3)));
}

TEST_CASE("user norm: ScaledRMS as the block norm, the QK-norm and ExoFormer's anchor norm") {
  using Attn = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Causal, user::ScaledRMS>;
  using Model = nn::Transformer<nn::PreNorm<user::ScaledRMS>, Attn, ffn::SwiGLU, pos::RoPE, tokens::None,
                                mix::ExoFormer<mix::per_head, mix::Static, user::ScaledRMS>>;
  nn::ModelConfig c;
  c.vocab = 7;
  c.d_model = 8;
  c.layers = 1;
  c.heads = 2;
  c.qk_norm = true;
  Rng rng(1);
  Model::Module<double> m("", c, rng);
  std::vector<std::string> names;
  m.parameters([&](auto& p) { names.push_back(p.name); });
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  CHECK(has("layers.0.attn_norm.weight"));
  CHECK(has("layers.0.attn.q_norm.weight"));
  CHECK(has("layers.0.attn.k_norm.weight"));
  CHECK(has("mix.anchor_q_norm.weight"));
  // The QK-norm is the user's: q after it is 2·RMSNorm(q) (scale 2), so |q_head|² ≈ 4·d_head
  // (RMS alone would give d_head = 4).
  autodiff::Tape<double> tape;
  auto x = tape.leaf(Rng(2).normal<double>({1, 3, 8}, 0.0, 1.0));
  attn::Extras<double> ex;
  auto& layer = m.layers[0].attn;
  const attn::Path route = layer.path(ex, true);
  const auto p = layer.project(tape, x, ex, route);
  const auto qn = layer.q_norm(tape, p.q).value();
  double qnorm2 = 0;
  for (int64_t c2 = 0; c2 < 4; ++c2) qnorm2 += qn(0, 1, 2, c2) * qn(0, 1, 2, c2);
  layer.attend(tape, x, p, ex, route);
  CHECK(qnorm2 == doctest::Approx(4.0 * 4.0).epsilon(5e-3));  // eps 1e-6 against a small q: 15.988
}

TEST_CASE("a model of user policies only (score, gate, value, norms) passes a whole-model gradcheck") {
  using Attn = attn::Attention<user::Softcap, user::TanhGate, user::HeadScale, mask::Causal, user::ScaledRMS>;
  using Model = nn::Transformer<nn::PreNorm<user::ScaledRMS>, Attn, ffn::SwiGLU>;
  nn::ModelConfig c;
  c.vocab = 7;
  c.d_model = 8;
  c.layers = 2;
  c.heads = 2;
  c.ffn_hidden = 12;
  c.qk_norm = true;
  Rng rng(3);
  Model::Module<double> model("", c, rng);
  model_test::randomise(model, 4);
  auto ids = Tensor<int32_t>::from({2, 4}, {0, 3, 6, 1, 2, 2, 5, 4});
  auto tg = Tensor<int32_t>::from({2, 4}, {3, 6, 1, 0, 2, 5, 4, 0});
  auto params = nn::parameter_list<double>(model);
  bool has_value_scale = false;
  for (auto* p : params) has_value_scale |= p->name == "layers.1.attn.value_scale";
  CHECK(has_value_scale);
  // The scale-2 norms put this loss in a region of high curvature: the central difference's
  // truncation error (∝ eps², measured 3e-3 at eps 1e-4, 8e-6 at the default 5e-6) needs eps 1e-6
  // to fall under the usual tolerance (3e-7 there).
  autodiff::GradcheckOptions o;
  o.eps = 1e-6;
  auto r = autodiff::gradcheck([&](autodiff::Tape<double>& t) { return model.loss(t, ids, tg); }, params, o);
  INFO(r);
  CHECK(r.ok);
}
