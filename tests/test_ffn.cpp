// ffn:: policies, the fused act(a)⊙b nodes and residual clipping: gradchecks in double, fused
// against composed-from-ops references, float vs double, options and errors.
#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/nn/projection.hpp"
#include "sinklab/nn/ffn.hpp"
#include "sinklab/autodiff/ops/clip.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

Tensor<double> randn(const Shape& s, uint64_t seed, double mean = 0.0, double scale = 1.0) {
  return Rng(seed).normal<double>(s, mean, scale);
}

template <class M>
void gradcheck_module(M& m, const Shape& xshape, uint64_t seed) {
  uint64_t s = seed;
  m.parameters([&](Parameter<double>& p) { p.value = randn(p.shape(), ++s, 0.0, 0.4); });
  auto x = make_inputs({randn(xshape, seed + 100)});
  auto ps = nn::parameter_list<double>(m);
  ps.push_back(&x[0]);
  auto r = gradcheck([&](Tape<double>& t) { return m(t, t.param(x[0])); }, ps);
  INFO(r);
  CHECK(r.ok);
}

template <class F>
void check_grad(F&& f, std::vector<Tensor<double>> xs) {
  auto ps = make_inputs(xs);
  auto ptrs = pointers(ps);
  auto r = gradcheck([&](Tape<double>& t) {
    std::vector<Var<double>> vs;
    for (auto* p : ptrs) vs.push_back(t.param(*p));
    return f(vs);
  }, ptrs);
  INFO(r);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("ffn: gradcheck of SwiGLU, GLU, GeluMLP, ReluMLP (input and every parameter)") {
  Rng rng(1);
  ffn::Options o;
  o.hidden = 11;  // odd: SIMD body and scalar tail in the fused gate node
  ffn::SwiGLU::Module<double> swiglu("blocks.0.ffn", 6, rng, o);
  CHECK(swiglu.gate_up.weight.shape() == Shape{6, 22});
  CHECK(swiglu.down.weight.name == "blocks.0.ffn.down.weight");
  gradcheck_module(swiglu, {2, 3, 6}, 10);
  ffn::GLU::Module<double> glu("glu", 6, rng, o);
  gradcheck_module(glu, {2, 3, 6}, 20);
  o.bias = true;
  ffn::GeluMLP::Module<double> gelu("gelu", 6, rng, o);
  CHECK(nn::parameter_count<double>(gelu) == 6 * 11 + 11 + 11 * 6 + 6);
  gradcheck_module(gelu, {2, 3, 6}, 30);
  ffn::ReluMLP::Module<double> relu("relu", 6, rng, o);
  gradcheck_module(relu, {4, 6}, 40);
  ffn::SwiGLU::Module<double> swiglu_b("swb", 6, rng, o);
  gradcheck_module(swiglu_b, {4, 6}, 50);
}

TEST_CASE("ffn: fused gate nodes equal silu(a)⊙b and σ(a)⊙b built from ops; gradchecks") {
  const Tensor<double> ab = randn({3, 5, 2 * 13}, 1, 0.0, 2.0);
  check_grad([](auto& v) { return autodiff::act_mul_halves<act::SiLU>(v[0]); }, {ab});
  check_grad([](auto& v) { return autodiff::act_mul_halves<act::Sigmoid>(v[0]); }, {ab});
  check_grad([](auto& v) { return autodiff::act_mul_halves<act::GELU>(v[0]); }, {ab});
  check_grad([](auto& v) { return autodiff::act_mul<act::SiLU>(v[0], v[1]); }, {randn({4, 19}, 2), randn({4, 19}, 3)});

  auto in = make_inputs({ab});
  for (int which = 0; which < 2; ++which) {
    Tensor<double> y[2], g[2];
    for (int pass = 0; pass < 2; ++pass) {
      in[0].zero_grad();
      Tape<double> t;
      Var<double> x = t.param(in[0]);
      Var<double> y_;
      if (pass == 0) {
        y_ = which == 0 ? autodiff::act_mul_halves<act::SiLU>(x) : autodiff::act_mul_halves<act::Sigmoid>(x);
      } else {
        Var<double> a = slice(x, -1, 0, 13), b = slice(x, -1, 13, 26);
        y_ = (which == 0 ? silu(a) : sigmoid(a)) * b;
      }
      t.backward(sum(mul(y_, t.constant(randn({3, 5, 13}, 7)))));
      y[pass] = y_.value().clone();
      g[pass] = in[0].grad.clone();
    }
    for (int64_t i = 0; i < y[0].numel(); ++i) CHECK(y[0].data()[i] == doctest::Approx(y[1].data()[i]).epsilon(1e-12));
    for (int64_t i = 0; i < g[0].numel(); ++i) CHECK(g[0].data()[i] == doctest::Approx(g[1].data()[i]).epsilon(1e-12));
  }
}

TEST_CASE("ffn::SwiGLU equals silu(x·W_gate) ⊙ (x·W_up) · W_down with W_gate|W_up the column halves") {
  Rng rng(2);
  ffn::Options o;
  o.hidden = 7;
  ffn::SwiGLU::Module<double> f("f", 5, rng, o);
  const Tensor<double> x = randn({3, 5}, 3);
  Tape<double> t;
  auto y = f(t, t.constant(x)).value();
  const Tensor<double>& W = f.gate_up.weight.value;
  const Tensor<double>& D = f.down.weight.value;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 5; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < 7; ++k) {
        double a = 0, b = 0;
        for (int64_t i = 0; i < 5; ++i) {
          a += x(r, i) * W(i, k);
          b += x(r, i) * W(i, 7 + k);
        }
        acc += a / (1 + std::exp(-a)) * b * D(k, j);
      }
      CHECK(y(r, j) == doctest::Approx(acc).epsilon(1e-12));
    }
}

TEST_CASE("autodiff::glu_mlp equals act_mul_halves(x·W_up)·W_down in value and every gradient (threaded GEMMs)") {
  // 300 rows: the GEMMs run on both threads, the activations in their row epilogues.
  set_num_threads(2);
  Rng rng(6);
  const Tensor<float> x = rng.normal<float>({2, 150, 64}), wu = rng.normal<float>({64, 200}, 0, 0.2f),
                      wd = rng.normal<float>({100, 48}, 0, 0.2f), seed = rng.normal<float>({2, 150, 48});
  auto run = [&](bool fused, bool sigmoid) {
    Tape<float> t;
    auto xv = t.leaf(x), u = t.leaf(wu), d = t.leaf(wd);
    auto block = [&](Var<float> in) {
      if (fused) return sigmoid ? autodiff::glu_mlp<act::Sigmoid>(in, u, d) : autodiff::glu_mlp<act::SiLU>(in, u, d);
      auto ab = matmul(in, u);
      return matmul(sigmoid ? autodiff::act_mul_halves<act::Sigmoid>(ab) : autodiff::act_mul_halves<act::SiLU>(ab), d);
    };
    // Applied twice and x also reaching the output directly: every gradient gets a second
    // contribution (accumulated with beta 1).
    auto out = block(xv) + block(xv * 0.5f) + slice(xv, 2, 0, 48);
    t.backward(sum(out * t.constant(seed)));
    return std::vector<Tensor<float>>{out.value(), xv.grad(), u.grad(), d.grad()};
  };
  for (bool sigmoid : {false, true}) {
    const auto want = run(false, sigmoid), got = run(true, sigmoid);
    for (std::size_t i = 0; i < want.size(); ++i) {
      REQUIRE(got[i].shape() == want[i].shape());
      double worst = 0, scale = 0;
      for (int64_t j = 0; j < want[i].numel(); ++j) {
        worst = std::max(worst, static_cast<double>(std::abs(got[i].data()[j] - want[i].data()[j])));
        scale = std::max(scale, static_cast<double>(std::abs(want[i].data()[j])));
      }
      CHECK_MESSAGE(worst <= 1e-5 * scale, "output ", i, " (value, dx, dW_up, dW_down), sigmoid ", sigmoid,
                    ": worst difference ", worst, " at scale ", scale);
    }
  }
}

TEST_CASE("ffn: the GLU forms stay composed under a projection hook and with biases") {
  Rng rng(7);
  ffn::Options o;
  o.hidden = 9;
  ffn::SwiGLU::Module<double> f("f", 6, rng, o);
  const Tensor<double> x = randn({4, 6}, 8);
  Tape<double> t;
  const Tensor<double> fused = f(t, t.constant(x)).value();
  int calls = 0;
  const nn::ProjectionHook<double> hook = [&](Tape<double>& tape, Var<double> v, const nn::ProjectionSite<double>& site) {
    ++calls;
    return site.product(tape, v);
  };
  {
    nn::ProjectionScope<double> scope(hook);
    const Tensor<double> composed = f(t, t.constant(x)).value();
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(composed.data()[i] == doctest::Approx(fused.data()[i]).epsilon(1e-12));
  }
  CHECK(calls == 2);  // the hook saw both projections
  o.bias = true;
  ffn::GLU::Module<double> b("b", 6, rng, o);
  auto y = b(t, t.constant(x));
  CHECK(y.shape() == Shape{4, 6});
  CHECK_THROWS_WITH_AS(autodiff::glu_mlp<act::SiLU>(t.constant(x), t.constant(Tensor<double>::zeros({6, 9})),
                                                    t.constant(Tensor<double>::zeros({4, 6}))),
                       doctest::Contains("glu_mlp<silu>: input [4, 6], up-projection [6, 9] and down-projection [4, 6] "
                                         "do not fit"),
                       Error);
}

TEST_CASE("ffn: default widths, zero-init output, float vs double, errors") {
  Rng rng(3);
  CHECK(ffn::glu_hidden(128) == 344);
  CHECK(ffn::glu_hidden(256) == 688);
  ffn::SwiGLU::Module<float> s("s", 128, rng);
  CHECK(s.hidden == 344);
  ffn::GeluMLP::Module<float> m("m", 64, rng);
  CHECK(m.hidden == 256);

  ffn::Options zo;
  zo.zero_init_output = true;
  ffn::GLU::Module<float> z("z", 16, rng, zo);
  Tape<float> t;
  auto x = t.leaf(Rng(4).normal<float>({2, 16}));
  auto y = z(t, x);
  for (float v : y.value().to_vector()) CHECK(v == 0.0f);
  double wsum = 0;
  for (float v : z.gate_up.weight.value.to_vector()) wsum += std::abs(v);
  CHECK(wsum > 0);  // only the output projection is zero

  CHECK_THROWS_WITH_AS(s(t, x), doctest::Contains("SwiGLU 's': input of shape [2, 16] has last axis 16, expected 128"),
                       Error);
  CHECK_THROWS_WITH_AS(autodiff::act_mul_halves<act::SiLU>(t.leaf(Tensor<float>::zeros({2, 5}))),
                       doctest::Contains("halves of equal width, got shape [2, 5]"), Error);

  // float vs double on the same weights.
  ffn::Options o;
  o.hidden = 40;
  Rng r1(9), r2(9);
  ffn::SwiGLU::Module<double> fd("f", 24, r1, o);
  ffn::SwiGLU::Module<float> ff("f", 24, r2, o);
  const Tensor<double> xd = randn({5, 24}, 5);
  Tape<double> td;
  Tape<float> tf;
  auto xvd = td.leaf(xd);
  auto xvf = tf.leaf(xd.to<float>());
  auto yd = fd(td, xvd);
  auto yf = ff(tf, xvf);
  td.backward(sum(yd));
  tf.backward(sum(yf));
  for (int64_t i = 0; i < yd.value().numel(); ++i)
    CHECK(yf.value().data()[i] == doctest::Approx(yd.value().data()[i]).epsilon(1e-4).scale(1e-3));
  for (int64_t i = 0; i < xd.numel(); ++i)
    CHECK(xvf.grad().data()[i] == doctest::Approx(xvd.grad().data()[i]).epsilon(1e-4).scale(1e-3));
  for (int64_t i = 0; i < fd.gate_up.weight.numel(); ++i)
    CHECK(ff.gate_up.weight.grad.data()[i] ==
          doctest::Approx(fd.gate_up.weight.grad.data()[i]).epsilon(1e-4).scale(1e-3));
  static_assert(ffn::is_policy_v<ffn::SwiGLU> && !ffn::is_policy_v<double>);
}

TEST_CASE("clip: values limited to ±c, gradient zero where clipped") {
  Tape<double> t;
  auto x = t.leaf(Tensor<double>::from({6}, {-250.0, -100.0, -3.0, 0.5, 100.0, 1e4}));
  auto y = autodiff::clip(x, 100.0);
  CHECK(y.value().to_vector() == std::vector<double>{-100.0, -100.0, -3.0, 0.5, 100.0, 100.0});
  t.backward(sum(y * 2.0));
  CHECK(x.grad().to_vector() == std::vector<double>{0.0, 2.0, 2.0, 2.0, 2.0, 0.0});
  // Gradcheck away from the kinks (values well inside or well outside ±1.5).
  Tensor<double> v = randn({3, 37}, 8, 0.0, 1.0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    double& e = v.data()[i];
    if (std::abs(std::abs(e) - 1.5) < 0.05) e += 0.2;
  }
  check_grad([](auto& vs) { return autodiff::clip(vs[0], 1.5) * vs[0]; }, {v});
  Tape<float> tf;
  auto z = tf.leaf(Tensor<float>::from({3}, {-20.f, 5.f, 20.f}));
  CHECK(autodiff::clip(z, 10.0).value().to_vector() == std::vector<float>{-10.f, 5.f, 10.f});
  CHECK_THROWS_WITH_AS(autodiff::clip(z, 0.0), doctest::Contains("threshold must be > 0, got 0 (input shape [3])"),
                       Error);
}
