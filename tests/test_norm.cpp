// norm:: fused nodes: gradcheck (input and every parameter), equality with a reference composed
// from autodiff ops (value and gradients), float vs double, and error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "sinklab/nn/norm.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

Tensor<double> randn(const Shape& s, uint64_t seed, double mean = 0.0, double scale = 1.0) {
  return Rng(seed).normal<double>(s, mean, scale);
}

// Gradcheck of a module on input x, with every parameter perturbed away from its init first
// (ones and zeros would hide errors in the parameter gradients).
template <class M>
void gradcheck_module(M& m, const Shape& xshape, uint64_t seed, double x_mean = 0.0) {
  uint64_t s = seed;
  m.parameters([&](Parameter<double>& p) {
    p.value = randn(p.shape(), ++s, 0.8, 0.3);
  });
  auto x = make_inputs({randn(xshape, seed + 100, x_mean)});
  auto ps = nn::parameter_list<double>(m);
  ps.push_back(&x[0]);
  auto r = gradcheck([&](Tape<double>& t) { return m(t, t.param(x[0])); }, ps);
  INFO(r);
  CHECK(r.ok);
}

// Values and all gradients of two computations over the same parameters agree.
void check_same(const std::function<Var<double>(Tape<double>&)>& fused,
                const std::function<Var<double>(Tape<double>&)>& reference, std::vector<Parameter<double>*> ps,
                const Shape& out, double tol = 1e-11) {
  const Tensor<double> R = randn(out, 999);
  std::vector<Tensor<double>> g1, g2;
  Tensor<double> y1, y2;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto* p : ps) p->zero_grad();
    Tape<double> t;
    Var<double> y = pass == 0 ? fused(t) : reference(t);
    REQUIRE(y.shape() == out);
    t.backward(sum(mul(y, t.constant(R))));
    (pass == 0 ? y1 : y2) = y.value().clone();
    for (auto* p : ps) (pass == 0 ? g1 : g2).push_back(p->grad.clone());
  }
  for (int64_t i = 0; i < y1.numel(); ++i) CHECK(y1.data()[i] == doctest::Approx(y2.data()[i]).epsilon(tol));
  for (std::size_t k = 0; k < ps.size(); ++k) {
    INFO("gradient of " << ps[k]->name);
    for (int64_t i = 0; i < g1[k].numel(); ++i)
      CHECK(g1[k].data()[i] == doctest::Approx(g2[k].data()[i]).epsilon(1e-9).scale(1.0));
  }
}

Var<double> rms_reference(Var<double> x, Var<double> gain, double eps) {
  Var<double> ms = mean(square(x), -1, true);
  return x / sqrt(ms + eps) * gain;
}

}  // namespace

TEST_CASE("norm::RMS, LayerNorm, PreAffineRMS, DyT: gradcheck of input and parameters") {
  Rng rng(1);
  // 37 columns: exercises the SIMD body and the scalar tail; 3-D input: rows over leading axes.
  const Shape xs{2, 3, 37};
  norm::RMS::Module<double> rms("blocks.0.norm1", 37, rng);
  gradcheck_module(rms, xs, 10);
  norm::LayerNorm::Module<double> ln("ln", 37, rng);
  gradcheck_module(ln, xs, 20, 0.7);
  norm::PreAffineRMS::Module<double> pa("pa", 37, rng);
  gradcheck_module(pa, xs, 30);
  norm::DyT::Module<double> dyt("dyt", 37, rng);
  gradcheck_module(dyt, xs, 40);
  // A tiny eps and a large offset: the relative-error check still holds.
  norm::RMS::Module<double> rms2("rms2", 8, rng, norm::Options{.eps = 1e-12});
  gradcheck_module(rms2, {5, 8}, 50, 3.0);
}

TEST_CASE("norm: many rows exercise the chunked parameter-gradient reduction") {
  Rng rng(2);
  norm::RMS::Module<double> rms("rms", 16, rng);
  gradcheck_module(rms, {4, 300, 16}, 60);
  norm::DyT::Module<double> dyt("dyt", 16, rng);
  gradcheck_module(dyt, {4, 300, 16}, 70);
  norm::LayerNorm::Module<double> ln("ln", 16, rng);
  gradcheck_module(ln, {4, 300, 16}, 80);
}

TEST_CASE("norm::RMS: the input gradient is summed in the kernel's pass, whatever x's gradient already holds") {
  // x is an intermediate: its gradient is first written by one norm (nothing before), added to in
  // place by a second, and, in a residual x + rms(x), summed with the alias add passes on.
  const double eps = 1e-6;
  auto ps = make_inputs({randn({3, 5, 24}, 1), randn({24}, 2, 1.0, 0.3), randn({24}, 3, 1.0, 0.3)});
  auto with = [&](auto&& norm_fn) {
    return [&, norm_fn](Tape<double>& t) {
      auto x = t.param(ps[0]) * 1.5;
      return norm_fn(x, t.param(ps[2])) * 2.0 + (norm_fn(x, t.param(ps[1])) + x);
    };
  };
  auto fused = [&](Var<double> x, Var<double> g) { return autodiff::rms_norm(x, g, eps); };
  auto reference = [&](Var<double> x, Var<double> g) { return rms_reference(x, g, eps); };
  check_same(with(fused), with(reference), pointers(ps), {3, 5, 24});
}

TEST_CASE("norm: fused nodes equal their composed-from-ops references") {
  const Shape xs{3, 4, 21};
  auto in = make_inputs({randn(xs, 1, 0.3), randn({21}, 2, 1.0, 0.5), randn({21}, 3, 0.0, 0.5),
                         randn({21}, 4, 1.0, 0.5), randn({1}, 5, 0.6, 0.1)});
  auto ps = pointers(in);
  Parameter<double>&x = in[0], &g = in[1], &b = in[2], &pre = in[3], &alpha = in[4];

  check_same([&](Tape<double>& t) { return autodiff::rms_norm(t.param(x), t.param(g), 1e-6); },
             [&](Tape<double>& t) { return rms_reference(t.param(x), t.param(g), 1e-6); }, {&x, &g}, xs);
  check_same([&](Tape<double>& t) { return autodiff::pre_affine_rms_norm(t.param(x), t.param(pre), t.param(g), 1e-6); },
             [&](Tape<double>& t) { return rms_reference(t.param(x) * t.param(pre), t.param(g), 1e-6); },
             {&x, &pre, &g}, xs);
  check_same([&](Tape<double>& t) { return autodiff::layer_norm(t.param(x), t.param(g), t.param(b), 1e-5); },
             [&](Tape<double>& t) {
               Var<double> xv = t.param(x);
               Var<double> c = xv - mean(xv, -1, true);
               return c / sqrt(mean(square(c), -1, true) + 1e-5) * t.param(g) + t.param(b);
             },
             {&x, &g, &b}, xs);
  check_same([&](Tape<double>& t) { return autodiff::dyt(t.param(x), t.param(alpha), t.param(g), t.param(b)); },
             [&](Tape<double>& t) { return tanh(t.param(x) * t.param(alpha)) * t.param(g) + t.param(b); },
             {&x, &alpha, &g, &b}, xs);
  check_same([&](Tape<double>& t) { return autodiff::act_mul<act::Sigmoid>(t.param(x), t.param(x) * 0.5); },
             [&](Tape<double>& t) { return sigmoid(t.param(x)) * (t.param(x) * 0.5); }, {&x}, xs);
  (void)ps;
}

TEST_CASE("norm::RMS: output has unit RMS with unit gain; LayerNorm: zero mean, unit variance") {
  Rng rng(4);
  norm::RMS::Module<double> rms("rms", 64, rng);
  norm::LayerNorm::Module<double> ln("ln", 64, rng);
  Tape<double> t;
  auto x = t.constant(randn({5, 64}, 7, 2.0, 10.0));
  auto y = rms(t, x).value();
  auto z = ln(t, x).value();
  for (int64_t r = 0; r < 5; ++r) {
    double ss = 0, m = 0, v = 0;
    for (int64_t i = 0; i < 64; ++i) {
      ss += y(r, i) * y(r, i);
      m += z(r, i);
    }
    m /= 64;
    for (int64_t i = 0; i < 64; ++i) v += (z(r, i) - m) * (z(r, i) - m);
    CHECK(std::sqrt(ss / 64) == doctest::Approx(1.0).epsilon(1e-5));
    CHECK(m == doctest::Approx(0.0).scale(1.0).epsilon(1e-9));
    CHECK(v / 64 == doctest::Approx(1.0).epsilon(1e-4));
  }
}

TEST_CASE("norm: options and errors name the layer and shapes") {
  Rng rng(6);
  norm::Options dyt_opts;
  dyt_opts.alpha = 0.2;
  norm::DyT::Module<float> dyt("blocks.2.norm2", 8, rng, dyt_opts);
  CHECK(dyt.alpha.value.data()[0] == doctest::Approx(0.2f));
  CHECK(dyt.weight.name == "blocks.2.norm2.weight");
  norm::LayerNorm::Module<float> ln("ln", 8, rng);
  CHECK(ln.eps == 1e-5);
  norm::RMS::Module<float> rms("blocks.1.norm1", 8, rng, norm::Options{.eps = 1e-5});
  CHECK(rms.eps == 1e-5);
  Tape<float> t;
  auto x = t.leaf(Tensor<float>::zeros({2, 3, 7}));
  CHECK_THROWS_WITH_AS(rms(t, x), doctest::Contains("RMS norm 'blocks.1.norm1': input of shape [2, 3, 7]"), Error);
  CHECK_THROWS_WITH_AS(dyt(t, x), doctest::Contains("DyT 'blocks.2.norm2'"), Error);
  CHECK_THROWS_WITH_AS(autodiff::rms_norm(x, t.leaf(Tensor<float>::ones({8}))),
                       doctest::Contains("rms_norm: gain must have shape [7], got [8]"), Error);
  // All-zero rows stay finite (eps) and pass finite gradients.
  auto z = t.leaf(Tensor<float>::zeros({2, 8}));
  auto y = rms(t, z);
  t.backward(sum(y));
  for (float v : z.grad().to_vector()) CHECK(std::isfinite(v));
}
