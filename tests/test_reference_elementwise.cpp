// Forward VALUES pinned against independent references (gradchecks alone pass for any wrong
// formula whose backward is consistent with it):
//   - the three GELU implementations (policy::math, kernels::cpu::fn::Gelu behind autodiff::gelu,
//     act::GELU behind act_mul) against 50-digit mpmath values of the exact (erf) GELU and
//     its derivative (tests/reference/gelu_reference.py), at negative, tiny and large inputs;
//   - cross-entropy with ignore_index, and the model loss with z-loss, against log-sum-exp
//     written out in double;
//   - GatedNorm<RMS> / GatedNorm<LayerNorm> / GatedDyT forward values against
//     σ(W_up·silu(W_down·B(x))) ⊙ B(x) computed with plain loops.
// GCC 12 reports its own AVX-512 intrinsics inside xsimd's double exp as -Wuninitialized
// (a false positive, as optim/adamw.hpp notes for sqrt); the double batches below reach it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model_testing.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/glu.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/nn/norm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/policy/math.hpp"
#include "sinklab/policy/score.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

// x, gelu(x) = x·Φ(x), gelu'(x) = Φ(x) + x·φ(x), and the tanh approximation, from
// tests/reference/gelu_reference.py (mpmath, 50 digits; values below the double range as 0).
struct GeluRef {
  double x, f, df, f_tanh;
};
const GeluRef kGelu[] = {
    {-1e4, 0.0, 0.0, 0.0},
    {-30, -1.4720141781444561e-196, -4.4160316907084944e-195, 0.0},
    {-10, -7.6198530241605261e-23, -7.6184000964648141e-22, -1.2040923482098107e-37},
    {-5, -1.4332578593959696e-6, -7.1469460017922946e-6, -2.291796196629506e-7},
    {-3, -0.0040496940948902836, -0.011945647204183927, -0.0036373920817730188},
    {-2, -0.045500263896358414, -0.085231801078196897, -0.045402305912224981},
    {-1.5, -0.1002108019032871, -0.12746919222997953, -0.10042842301976708},
    {-1, -0.15865525393145705, -0.083315470587686298, -0.1588080093917233},
    {-0.5, -0.15426876936299345, 0.13250487534383716, -0.15428599017485608},
    {-1e-3, -0.00049960105778608894, 0.4992021157051586, -0.00049960105778641803},
    {0, 0.0, 0.5, 0.0},
    {2e-3, 0.0010015957680577603, 0.50159576699391548, 0.0010015957680524947},
    {0.5, 0.34573123063700655, 0.86749512465616284, 0.34571400982514392},
    {1, 0.84134474606854295, 1.0833154705876863, 0.8411919906082767},
    {1.5, 1.3997891980967129, 1.1274691922299795, 1.3995715769802329},
    {2, 1.9544997361036416, 1.0852318010781969, 1.954597694087775},
    {3, 2.9959503059051097, 1.0119456472041839, 2.996362607918227},
    {5, 4.9999985667421406, 1.0000071469460018, 4.9999997708203803},
    {10, 10.0, 1.0, 10.0},
    {40, 40.0, 1.0, 40.0},
    {1e4, 10000.0, 1.0, 10000.0},
};

// |got − want| within rel·max(1, |want|) + abs. double: the erf form loses digits only in
// 1 + erf(x/√2) for x ≪ 0, an absolute error of a few 1e-16. float: a few ulps of 1 (the
// 1 + erf cancellation again) and ulps of |x| for large x.
template <class T>
bool close(double got, double want) {
  const double rel = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  const double abs = std::is_same_v<T, float> ? 4e-7 : 2e-15;
  return std::isfinite(got) && std::abs(got - want) <= rel * std::max(1.0, std::abs(want)) + abs;
}

// Calls f(x) on a scalar and, lane by lane, on an xsimd batch (every lane a grid point), and
// checks both against want(ref).
template <class T, class F, class W>
void check_gelu_impl(const char* what, F&& f, W&& want) {
  using B = xsimd::batch<T>;
  constexpr std::size_t N = sizeof(kGelu) / sizeof(kGelu[0]);
  // Scalars.
  for (const GeluRef& r : kGelu) {
    INFO(std::string(what), " scalar ", std::string(sizeof(T) == 4 ? "float" : "double"), " x = ", r.x);
    const double got = static_cast<double>(f(static_cast<T>(r.x)));
    CHECK_MESSAGE(close<T>(got, want(r)), "got ", got, " want ", want(r));
  }
  // Batches: the grid laid over consecutive lanes.
  alignas(64) T in[((N + B::size - 1) / B::size) * B::size];
  alignas(64) T out[sizeof(in) / sizeof(T)];
  for (std::size_t i = 0; i < sizeof(in) / sizeof(T); ++i) in[i] = static_cast<T>(kGelu[i % N].x);
  for (std::size_t i = 0; i < sizeof(in) / sizeof(T); i += B::size) f(B::load_aligned(in + i)).store_aligned(out + i);
  for (std::size_t i = 0; i < N; ++i) {
    INFO(std::string(what), " batch ", std::string(sizeof(T) == 4 ? "float" : "double"), " x = ", kGelu[i].x);
    CHECK_MESSAGE(close<T>(static_cast<double>(out[i]), want(kGelu[i])), "got ", out[i], " want ", want(kGelu[i]));
  }
}

template <class T>
void check_all_gelus() {
  auto f = [](const GeluRef& r) { return r.f; };
  auto df = [](const GeluRef& r) { return r.df; };
  // 1. policy::math (score::fn::GELU, the attention point-wise family).
  check_gelu_impl<T>("policy::math::gelu", [](auto x) { return policy::math::gelu(x); }, f);
  check_gelu_impl<T>("policy::math::gelu_grad", [](auto x) { return policy::math::gelu_grad(x); }, df);
  check_gelu_impl<T>("score::fn::GELU::f", [](auto x) { return score::fn::GELU::f(x); }, f);
  check_gelu_impl<T>("score::fn::GELU::df", [](auto x) { return score::fn::GELU::df(x); }, df);
  // 2. kernels::cpu::fn::Gelu (autodiff::gelu: GeluMLP, ExoFormer's dynamic mixing).
  check_gelu_impl<T>("kernels::cpu::fn::Gelu::value", [](auto x) { return kernels::cpu::fn::Gelu::value(x); }, f);
  check_gelu_impl<T>(
      "kernels::cpu::fn::Gelu::grad",
      [](auto x) {
        using V = decltype(x);
        return kernels::cpu::fn::Gelu::grad(x, V(0), V(1));
      },
      df);
  // 3. act::GELU (act_mul / act_mul_halves / glu_mlp: GEGLU).
  check_gelu_impl<T>(
      "act::GELU f",
      [](auto x) {
        decltype(x) y, dy;
        act::GELU::eval(x, y, dy);
        return y;
      },
      f);
  check_gelu_impl<T>(
      "act::GELU df",
      [](auto x) {
        decltype(x) y, dy;
        act::GELU::eval(x, y, dy);
        return dy;
      },
      df);
}

}  // namespace

TEST_CASE("GELU: the three implementations equal the exact (erf) GELU and its derivative (mpmath values)") {
  check_all_gelus<double>();
  check_all_gelus<float>();
  // The reference is the erf form, not the tanh approximation: they differ by > 1e-4 at x = 1 and
  // x = −3, far above the tolerances above, so a switch to the tanh form would be caught.
  for (const GeluRef& r : kGelu)
    if (r.x == 1.0 || r.x == -3.0) CHECK(std::abs(r.f - r.f_tanh) > 1e-4);
  CHECK(std::abs(policy::math::gelu(1.0) - 0.8411919906082767) > 1e-4);
}

TEST_CASE("GELU through the tape: autodiff::gelu and act_mul<Gelu> give the reference values and derivatives") {
  constexpr int64_t N = sizeof(kGelu) / sizeof(kGelu[0]);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    INFO(std::string(sizeof(T) == 4 ? "float" : "double"));
    // 3 copies of the grid: more than one SIMD batch plus a scalar tail.
    std::vector<T> xs;
    for (int rep = 0; rep < 3; ++rep)
      for (const GeluRef& r : kGelu) xs.push_back(static_cast<T>(r.x));
    const int64_t n = static_cast<int64_t>(xs.size());
    {
      Tape<T> t;
      Var<T> x = t.leaf(Tensor<T>::from({n}, xs));
      Var<T> y = gelu(x);
      t.backward(sum(y));
      for (int64_t i = 0; i < n; ++i) {
        const GeluRef& r = kGelu[i % N];
        INFO("autodiff::gelu x = ", r.x);
        CHECK(close<T>(static_cast<double>(y.value().data()[i]), r.f));
        CHECK(close<T>(static_cast<double>(x.grad().data()[i]), r.df));
      }
    }
    {
      // act_mul<Gelu>(a, b) = gelu(a)·b with b = 2: d/da = 2·gelu'(a), d/db = gelu(a).
      Tape<T> t;
      Var<T> a = t.leaf(Tensor<T>::from({3, N}, xs));
      Var<T> b = t.leaf(Tensor<T>::full({3, N}, T(2)));
      Var<T> y = autodiff::act_mul<act::GELU>(a, b);
      t.backward(sum(y));
      for (int64_t i = 0; i < n; ++i) {
        const GeluRef& r = kGelu[i % N];
        INFO("act_mul<Gelu> x = ", r.x);
        CHECK(close<T>(static_cast<double>(y.value().data()[i]), 2 * r.f));
        CHECK(close<T>(static_cast<double>(a.grad().data()[i]), 2 * r.df));
        CHECK(close<T>(static_cast<double>(b.grad().data()[i]), r.f));
      }
    }
  };
  run(double{});
  run(float{});
}

namespace {

// Mean over non-ignored rows of log Σ_v e^{x_v} − x_target, in double with the max subtracted.
double reference_cross_entropy(const Tensor<double>& logits, const std::vector<int32_t>& targets, int32_t ignore) {
  const int64_t V = logits.shape()[-1], N = logits.numel() / V;
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (targets[r] == ignore) continue;
    const double* x = logits.data() + r * V;
    double m = x[0];
    for (int64_t v = 1; v < V; ++v) m = std::max(m, x[v]);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(x[v] - m);
    total += m + std::log(s) - x[targets[r]];
    ++count;
  }
  return count ? total / static_cast<double>(count) : 0.0;
}

}  // namespace

TEST_CASE("cross_entropy: mean over non-ignored targets of logsumexp − logit (values)") {
  const Tensor<double> logits = Rng(3).normal<double>({2, 3, 5}, 0.0, 2.0);
  // Hand-computable case first: logits 0 everywhere give log V per row.
  {
    Tape<double> t;
    auto zero = t.constant(Tensor<double>::zeros({4, 5}));
    CHECK(cross_entropy(zero, Tensor<int32_t>::from({4}, {0, 1, -100, 4})).item() == doctest::Approx(std::log(5.0)));
  }
  // Rows 2 and 3 ignored: the mean is over 4 rows, not 6.
  const std::vector<int32_t> tg{1, 4, -100, -100, 0, 2};
  Tape<double> t;
  const double got = cross_entropy(t.constant(logits), Tensor<int32_t>::from({2, 3}, tg)).item();
  CHECK(got == doctest::Approx(reference_cross_entropy(logits, tg, -100)).epsilon(1e-14));
  // Dividing by all 6 rows instead would differ by a factor 1.5.
  CHECK(std::abs(got - reference_cross_entropy(logits, {1, 4, 0, 0, 0, 2}, -100)) > 1e-3);
  // A custom ignore_index (7), and a target equal to the default ignore value is then an error.
  const std::vector<int32_t> tg7{7, 3, 3, 7, 1, 0};
  CHECK(cross_entropy(t.constant(logits), Tensor<int32_t>::from({2, 3}, tg7), 7).item() ==
        doctest::Approx(reference_cross_entropy(logits, tg7, 7)).epsilon(1e-14));
  // Every target ignored: 0.
  CHECK(cross_entropy(t.constant(logits), Tensor<int32_t>::full({2, 3}, -100)).item() == 0.0);
  // Large logits (1e4 offset): log-sum-exp stays exact; float too.
  Tensor<double> big = logits.clone();
  for (int64_t i = 0; i < big.numel(); ++i) big.data()[i] += 1e4;
  CHECK(cross_entropy(t.constant(big), Tensor<int32_t>::from({2, 3}, tg)).item() ==
        doctest::Approx(reference_cross_entropy(logits, tg, -100)).epsilon(1e-10));
  Tape<float> tf;
  CHECK(cross_entropy(tf.constant(big.to<float>()), Tensor<int32_t>::from({2, 3}, tg)).item() ==
        doctest::Approx(reference_cross_entropy(logits, tg, -100)).epsilon(2e-3));
}

TEST_CASE("Transformer::loss with z-loss: CE over non-ignored targets + z · mean over all positions of lse²") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
  nn::ModelConfig cfg;
  cfg.vocab = 9;
  cfg.d_model = 8;
  cfg.layers = 1;
  cfg.heads = 2;
  cfg.ffn_hidden = 8;
  cfg.z_loss = 0.25;
  Rng rng(2);
  M::Module<double> model("", cfg, rng);
  model_test::randomise(model, 3);
  const auto ids = Tensor<int32_t>::from({2, 4}, {1, 2, 3, 4, 8, 7, 6, 5});
  const std::vector<int32_t> tg{2, 3, -100, 5, 7, -100, -100, 4};
  Tape<double> t;
  const Tensor<double> lg = model.logits(t, ids).value();
  Tape<double> t2;
  const double got = model.loss(t2, ids, Tensor<int32_t>::from({2, 4}, tg)).item();
  // z-loss = mean over all B·T positions (the docs: "over every position", ignored ones included)
  // of (log Σ_v e^{logit_v})².
  double z = 0;
  for (int64_t r = 0; r < 8; ++r) {
    double s = 0;
    for (int64_t v = 0; v < 9; ++v) s += std::exp(lg.data()[r * 9 + v]);
    z += std::log(s) * std::log(s);
  }
  z /= 8;
  const double ce = reference_cross_entropy(lg, tg, -100);
  CHECK(z > 1.0);  // the z term is not negligible here
  CHECK(got == doctest::Approx(ce + 0.25 * z).epsilon(1e-12));
  // Without z-loss the loss is the cross-entropy alone.
  model.cfg.z_loss = 0;
  Tape<double> t3;
  CHECK(model.loss(t3, ids, Tensor<int32_t>::from({2, 4}, tg)).item() == doctest::Approx(ce).epsilon(1e-12));
}

namespace {

// Reference norms, one row of n values, in double.
std::vector<double> ref_rms(const double* x, const std::vector<double>& g, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * g[i];
  return y;
}
std::vector<double> ref_layer_norm(const double* x, const std::vector<double>& g, const std::vector<double>& b,
                                   int64_t n, double eps) {
  double mu = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mu += x[i];
  mu /= n;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
  var /= n;
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) / std::sqrt(var + eps) * g[i] + b[i];
  return y;
}
std::vector<double> ref_dyt(const double* x, double alpha, const std::vector<double>& g, const std::vector<double>& b,
                            int64_t n) {
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] * std::tanh(alpha * x[i]) + b[i];
  return y;
}
// Qwen §3.4: y′ = σ(W_up · swish(W_down · y)) ⊙ y, weights stored [in, out] (row vector · W).
std::vector<double> ref_gate(const std::vector<double>& y, const Tensor<double>& wd, const Tensor<double>& wu) {
  const int64_t n = static_cast<int64_t>(y.size()), r = wd.size(1);
  std::vector<double> h(r, 0.0), out(n, 0.0);
  for (int64_t k = 0; k < r; ++k) {
    double a = 0;
    for (int64_t i = 0; i < n; ++i) a += y[i] * wd(i, k);
    h[k] = a / (1.0 + std::exp(-a));  // swish = silu
  }
  for (int64_t i = 0; i < n; ++i) {
    double l = 0;
    for (int64_t k = 0; k < r; ++k) l += h[k] * wu(k, i);
    out[i] = y[i] / (1.0 + std::exp(-l));
  }
  return out;
}

std::vector<double> to_std(const Tensor<double>& t) { return t.to_vector(); }

template <class Policy, class Base>
void check_gated(const char* what, Base&& base_ref) {
  INFO(std::string(what));
  const int64_t n = 12;
  Rng rng(7);
  typename Policy::template Module<double> m("gn", n, rng);
  // Non-trivial parameters everywhere; gate weights large enough that σ(·) is far from 0.5.
  uint64_t s = 40;
  m.parameters([&](Parameter<double>& p) {
    Tensor<double> v = Rng(++s).normal<double>(p.shape(), 0.0, 0.6);
    if (p.name.find("gate") == std::string::npos)
      for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += 1.0;
    p.value.copy_from(v);
  });
  const Tensor<double> x = Rng(50).normal<double>({2, 3, n}, 0.3, 1.5);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    typename Policy::template Module<T> mt("gn", n, rng);
    std::vector<Tensor<double>> vals;
    m.parameters([&](Parameter<double>& p) { vals.push_back(p.value); });
    std::size_t i = 0;
    mt.parameters([&](Parameter<T>& p) { p.value.copy_from(vals[i++].template to<T>()); });
    Tape<T> t;
    return mt(t, t.constant(x.to<T>())).value().template to<double>();
  };
  const Tensor<double> yd = run(double{}), yf = run(float{});
  double max_gate_dev = 0;
  for (int64_t r = 0; r < 6; ++r) {
    const std::vector<double> b = base_ref(m.base, x.data() + r * n, n);
    const std::vector<double> want = ref_gate(b, m.down.weight.value, m.up.weight.value);
    for (int64_t i = 0; i < n; ++i) {
      INFO("row ", r, " channel ", i);
      CHECK(yd.data()[r * n + i] == doctest::Approx(want[i]).epsilon(1e-12).scale(1.0));
      CHECK(yf.data()[r * n + i] == doctest::Approx(want[i]).epsilon(2e-5).scale(1.0));
      if (b[i] != 0) max_gate_dev = std::max(max_gate_dev, std::abs(want[i] / b[i] - 0.5));
    }
  }
  CHECK(max_gate_dev > 0.2);  // the gate is far from a constant 0.5, so a wrong gate shows
}

}  // namespace

TEST_CASE("GatedNorm<RMS>, GatedNorm<LayerNorm>, GatedDyT: forward values equal σ(W_up·silu(W_down·B(x))) ⊙ B(x)") {
  check_gated<norm::GatedNorm<norm::RMS, 4>>("GatedNorm<RMS, 4>", [](auto& base, const double* x, int64_t n) {
    return ref_rms(x, to_std(base.weight.value), n, base.eps);
  });
  check_gated<norm::GatedNorm<norm::LayerNorm, 3>>(
      "GatedNorm<LayerNorm, 3>", [](auto& base, const double* x, int64_t n) {
        return ref_layer_norm(x, to_std(base.weight.value), to_std(base.bias.value), n, base.eps);
      });
  check_gated<norm::GatedDyT>("GatedDyT", [](auto& base, const double* x, int64_t n) {
    return ref_dyt(x, base.alpha.value.data()[0], to_std(base.weight.value), to_std(base.bias.value), n);
  });
  // Defaults the formulas above rely on.
  Rng rng(1);
  norm::GatedDyT::Module<double> gd("gd", 6, rng);
  CHECK(gd.base.alpha.value.data()[0] == 0.5);
  CHECK(gd.down.weight.shape() == Shape{6, 16});
  CHECK_FALSE(gd.down.has_bias());
  CHECK_FALSE(gd.up.has_bias());
  norm::GatedNorm<>::Module<double> gr("gr", 6, rng);
  CHECK(gr.base.eps == 1e-6);
}
