// norm:: GatedNorm / GatedDyT gradchecks, and every norm in float against double.
#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/nn/norm.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

Tensor<double> randn(const Shape& s, uint64_t seed, double mean = 0.0, double scale = 1.0) {
  return Rng(seed).normal<double>(s, mean, scale);
}

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

}  // namespace

TEST_CASE("norm::GatedNorm and GatedDyT: gradcheck of input, base and gate parameters") {
  Rng rng(3);
  norm::GatedNorm<norm::RMS, 4>::Module<double> g("gn", 12, rng);
  CHECK(g.down.weight.name == "gn.gate.down.weight");
  CHECK(g.up.weight.shape() == Shape{4, 12});
  CHECK(g.base.weight.name == "gn.weight");
  gradcheck_module(g, {2, 5, 12}, 90);
  norm::GatedDyT::Module<double> gd("gd", 12, rng);
  CHECK(gd.down.weight.shape() == Shape{12, 16});
  gradcheck_module(gd, {2, 5, 12}, 100);
  norm::GatedNorm<norm::PreAffineRMS, 3>::Module<double> gp("gp", 10, rng);
  gradcheck_module(gp, {3, 10}, 110);
  norm::GatedNorm<norm::LayerNorm, 2>::Module<double> gl("gl", 10, rng);
  gradcheck_module(gl, {3, 10}, 120);
  static_assert(norm::is_policy_v<norm::GatedNorm<>>);
  static_assert(!norm::is_policy_v<int>);
  static_assert(norm::GatedNorm<>::rank == 16);
}


TEST_CASE("norm: float matches double (values and gradients)") {
  const Shape xs{4, 6, 50};
  const Tensor<double> xd = randn(xs, 11, 0.5, 2.0);
  const Tensor<double> Rd = randn(xs, 12);
  auto run = [&]<class T>(T, auto&& make) {
    Rng rng(5);
    auto m = make.template operator()<T>(rng);
    uint64_t s = 20;
    m.parameters([&](Parameter<T>& p) { p.value = randn(p.shape(), ++s, 0.8, 0.3).template to<T>(); });
    Tape<T> t;
    Var<T> x = t.leaf(xd.to<T>());
    Var<T> y = m(t, x);
    t.backward(sum(mul(y, t.constant(Rd.to<T>()))));
    std::vector<Tensor<double>> out{y.value().template to<double>(), x.grad().template to<double>()};
    m.parameters([&](Parameter<T>& p) { out.push_back(p.grad.template to<double>()); });
    return out;
  };
  auto compare = [&](auto&& make, const char* what) {
    INFO(what);
    auto d = run(double{}, make);
    auto f = run(float{}, make);
    REQUIRE(d.size() == f.size());
    for (std::size_t k = 0; k < d.size(); ++k) {
      double scale = 0;
      for (int64_t i = 0; i < d[k].numel(); ++i) scale = std::max(scale, std::abs(d[k].data()[i]));
      for (int64_t i = 0; i < d[k].numel(); ++i)
        CHECK(std::abs(f[k].data()[i] - d[k].data()[i]) <= 2e-4 * scale + 1e-6);
    }
  };
  compare([]<class T>(Rng& r) { return norm::RMS::Module<T>("rms", 50, r); }, "RMS");
  compare([]<class T>(Rng& r) { return norm::LayerNorm::Module<T>("ln", 50, r); }, "LayerNorm");
  compare([]<class T>(Rng& r) { return norm::PreAffineRMS::Module<T>("pa", 50, r); }, "PreAffineRMS");
  compare([]<class T>(Rng& r) { return norm::DyT::Module<T>("dyt", 50, r); }, "DyT");
  compare([]<class T>(Rng& r) { return norm::GatedNorm<>::Module<T>("gn", 50, r); }, "GatedNorm");
}
