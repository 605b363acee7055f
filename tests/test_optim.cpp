#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/optim/sgd.hpp"

using namespace sinklab;
using autodiff::Parameter;
using optim::AdamW;
using optim::SGD;

namespace {

template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-6 : 1e-13;
}

template <class T>
void check_close(const Tensor<T>& t, const std::vector<double>& expect, double rtol) {
  auto v = t.to_vector();
  REQUIRE(v.size() == expect.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": got " << v[i] << ", expected " << expect[i]);
    CHECK(std::abs(static_cast<double>(v[i]) - expect[i]) <= rtol * std::max(1.0, std::abs(expect[i])));
  }
}

template <class T>
Tensor<T> tensor(const Shape& s, const std::vector<double>& v) {
  std::vector<T> c(v.begin(), v.end());
  return Tensor<T>::from(s, c);
}

}  // namespace

TEST_CASE_TEMPLATE("AdamW: the first step moves each coordinate by -lr*g/(|g|+eps) - lr*wd*p", T, float, double) {
  const std::vector<double> p0{0.5, -1.0, 2.0, 0.0, 3.0, -0.25, 1e3};
  const std::vector<double> g{0.3, -0.2, 0.0, 1e-4, 5.0, -7e-3, -1e-6};
  Parameter<T> p("w", tensor<T>({7}, p0));
  p.grad = tensor<T>({7}, g);
  optim::AdamWOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.eps = 1e-5;
  AdamW<T> opt({&p}, o);
  opt.step();
  std::vector<double> expect;
  // Bias correction makes m̂ = g and √v̂ = |g|, so the Adam part is lr·sign(g) up to eps.
  for (std::size_t i = 0; i < p0.size(); ++i)
    expect.push_back(p0[i] - o.lr * o.weight_decay * p0[i] - o.lr * g[i] / (std::abs(g[i]) + o.eps));
  check_close(p.value, expect, 4 * tol<T>());
  CHECK(opt.step_count() == 1);
  CHECK(opt.state("w").step == 1);
}

TEST_CASE_TEMPLATE("AdamW: matches torch.optim.AdamW over 4 steps with two groups and an lr scale", T, float,
                   double) {
  // Reference values made once with Debian's python3-torch 1.13 in float64:
  //   torch.optim.AdamW([{"params": [a], "lr": 0.1, "betas": (0.9, 0.99), "eps": 1e-3, "weight_decay": 0.1},
  //                      {"params": [b], "lr": 0.05, "betas": (0.8, 0.95), "eps": 1e-8, "weight_decay": 0.0}])
  // with the gradients below set before each step and every group's lr halved for steps 3 and 4.
  Parameter<T> a("a", tensor<T>({2, 3}, {0.5, -1.0, 2.0, 0.0, 3.0, -0.25}));
  Parameter<T> b("b", tensor<T>({2}, {1.5, -2.0}));
  using Group = typename AdamW<T>::Group;
  AdamW<T> opt({Group{{&a}, {0.1, 0.9, 0.99, 1e-3, 0.1}}, Group{{&b}, {0.05, 0.8, 0.95, 1e-8, 0.0}}});
  const std::vector<std::vector<double>> ga{{0.3, -0.2, 0.0, 1e-4, 5.0, -0.7},
                                            {0.1, 0.4, -0.3, 0.0, -2.0, 0.2},
                                            {-0.5, 0.05, 0.6, 1.0, 0.5, -0.1},
                                            {0.2, -0.3, 0.0, -0.4, 1.0, 0.9}};
  const std::vector<std::vector<double>> gb{{1.0, -3.0}, {0.5, 0.5}, {-2.0, 0.1}, {0.0, 1.0}};
  const std::vector<std::vector<double>> ref_a{
      {0.39533222591362127, -0.890497512437811, 1.98, -0.009090909090909089, 2.8700199960007997,
       -0.14764265335235377},
      {0.30450365876396857, -0.9180382305991579, 2.034098490011053, -0.013424752004271108, 2.8067115350662197,
       -0.10219427414909846},
      {0.3119549816746136, -0.9310086690490835, 2.0083104356442742, -0.045102502103259764, 2.7763646038200203,
       -0.08046004113980659},
      {0.30808975479993417, -0.9222393620257222, 1.9854519457835598, -0.05831048908276314, 2.74400104157871,
       -0.0915724953901961}};
  const std::vector<std::vector<double>> ref_b{{1.4500000005, -1.9500000001666666},
                                               {1.4039671860335374, -1.9251556828362089},
                                               {1.411294632921327, -1.9166621450792256},
                                               {1.416963824691885, -1.9159206738714747}};
  for (int k = 0; k < 4; ++k) {
    opt.set_lr_scale(k < 2 ? 1.0 : 0.5);
    a.grad = tensor<T>({2, 3}, ga[k]);
    b.grad = tensor<T>({2}, gb[k]);
    opt.step();
    INFO("step " << k + 1);
    // float: a few ulps per step, amplified where v̂ is tiny relative to eps.
    check_close(a.value, ref_a[k], 20 * tol<T>());
    check_close(b.value, ref_b[k], 20 * tol<T>());
  }
  check_close(opt.state("a").m, {0.004970000000000004, -0.007679999999999999, 0.029699999999999997,
                                 0.05000728999999998, 0.3474999999999999, 0.046169999999999996},
              20 * tol<T>());
  check_close(opt.state("a").v, {0.0038462791000000033, 0.0028810296000000026, 0.004446090000000003,
                                 0.011500000097029908, 0.29425375000000026, 0.01334550510000001},
              20 * tol<T>());
  CHECK(opt.state("b").step == 4);
  CHECK(opt.step_count() == 4);
}

TEST_CASE_TEMPLATE("AdamW: each parameter group uses its own lr and weight decay", T, float, double) {
  Parameter<T> x("x", Tensor<T>::full({3}, T(2))), y("y", Tensor<T>::full({3}, T(2)));
  x.grad.fill(T(1));
  y.grad.fill(T(1));
  using Group = typename AdamW<T>::Group;
  AdamW<T> opt({Group{{&x}, {0.1, 0.9, 0.999, 0.0, 0.0}}, Group{{&y}, {0.01, 0.9, 0.999, 0.0, 0.5}}});
  opt.set_lr_scale(2.0);
  opt.step();
  // x: lr 0.2, no decay → 2 − 0.2.  y: lr 0.02, wd 0.5 → 2 − 0.02·0.5·2 − 0.02.
  check_close(x.value, {1.8, 1.8, 1.8}, 4 * tol<T>());
  check_close(y.value, {1.96, 1.96, 1.96}, 4 * tol<T>());
  opt.groups()[1].opts.lr = 0.0;
  opt.groups()[1].opts.weight_decay = 0.0;
  opt.step();
  check_close(y.value, {1.96, 1.96, 1.96}, 4 * tol<T>());
}

TEST_CASE_TEMPLATE("AdamW: frozen parameters are skipped and zero_grad clears gradients", T, float, double) {
  Parameter<T> x("x", Tensor<T>::full({4}, T(1))), frozen("frozen", Tensor<T>::full({4}, T(1)));
  x.grad.fill(T(0.5));
  frozen.grad.fill(T(0.5));
  frozen.requires_grad = false;
  AdamW<T> opt({&x, &frozen});
  opt.step();
  CHECK(x.value(0) != T(1));
  check_close(frozen.value, {1, 1, 1, 1}, 0);
  CHECK(opt.state("frozen").step == 0);
  frozen.grad = Tensor<T>();  // frozen parameters may drop their gradient buffer
  opt.step();
  opt.zero_grad();
  check_close(x.grad, {0, 0, 0, 0}, 0);
}

TEST_CASE_TEMPLATE("AdamW: a large tensor (SIMD body, scalar tail, threads) matches one-element runs", T, float,
                   double) {
  const int64_t n = 100003;  // odd, larger than the parallel grain
  Rng rng(7);
  Parameter<T> big("big", rng.normal<T>({n}, T(0), T(1)));
  Tensor<T> g1 = rng.normal<T>({n}, T(0), T(1)), g2 = rng.normal<T>({n}, T(0), T(1));
  const Tensor<T> start = big.value.clone();
  optim::AdamWOptions o{0.01, 0.9, 0.99, 1e-6, 0.1};
  AdamW<T> opt({&big}, o);
  big.grad.copy_from(g1);
  opt.step();
  big.grad.copy_from(g2);
  opt.step();
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{17}, n / 2, n - 3, n - 1}) {
    Parameter<T> one("one", Tensor<T>::full({1}, start(i)));
    AdamW<T> ref({&one}, o);
    one.grad.fill(g1(i));
    ref.step();
    one.grad.fill(g2(i));
    ref.step();
    INFO("element " << i);
    CHECK(std::abs(static_cast<double>(big.value(i) - one.value(0))) <= 4 * tol<T>());
  }
}

TEST_CASE_TEMPLATE("AdamW: restoring saved state continues exactly like an uninterrupted run", T, float, double) {
  auto grad_at = [](int k) { return T(0.1) * T(k + 1) * (k % 2 ? T(-1) : T(1)); };
  Parameter<T> a("w", Tensor<T>::arange({5}));
  AdamW<T> full({&a});
  for (int k = 0; k < 6; ++k) {
    a.grad.fill(grad_at(k));
    full.step();
  }
  Parameter<T> b("w", Tensor<T>::arange({5}));
  AdamW<T> first({&b});
  for (int k = 0; k < 3; ++k) {
    b.grad.fill(grad_at(k));
    first.step();
  }
  AdamW<T> resumed({&b});
  resumed.state("w").m.copy_from(first.state("w").m);
  resumed.state("w").v.copy_from(first.state("w").v);
  resumed.state("w").step = first.state("w").step;
  resumed.set_step_count(first.step_count());
  for (int k = 3; k < 6; ++k) {
    b.grad.fill(grad_at(k));
    resumed.step();
  }
  CHECK(a.value.to_vector() == b.value.to_vector());
  CHECK(resumed.step_count() == 6);
}

TEST_CASE("AdamW and SGD: bad configurations and parameters throw") {
  Parameter<double> a("a", Tensor<double>::zeros({2})), a2("a", Tensor<double>::zeros({3}));
  CHECK_THROWS_WITH_AS(AdamW<double>({&a, &a2}), doctest::Contains("'a' appears more than once"), Error);
  CHECK_THROWS_WITH_AS(AdamW<double>({&a}, {0.1, 1.0, 0.999, 1e-8, 0}), doctest::Contains("betas"), Error);
  CHECK_THROWS_WITH_AS(AdamW<double>({&a}, {-1, 0.9, 0.999, 1e-8, 0}), doctest::Contains("lr -1"), Error);
  CHECK_THROWS_AS(AdamW<double>({nullptr}), Error);
  AdamW<double> opt({&a});
  CHECK_THROWS_WITH_AS(opt.state("nope"), doctest::Contains("no parameter named 'nope'"), Error);
  CHECK_THROWS_AS(opt.set_lr_scale(-1), Error);
  a.grad = Tensor<double>::zeros({3});
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("gradient shape [3]"), Error);

  optim::SGDOptions nesterov_without_momentum;
  nesterov_without_momentum.nesterov = true;
  CHECK_THROWS_WITH_AS(SGD<double>({&a2}, nesterov_without_momentum), doctest::Contains("nesterov"), Error);
}

TEST_CASE_TEMPLATE("SGD: momentum matches hand-computed values", T, float, double) {
  // lr 0.1, momentum 0.5, no dampening or decay; gradients 1, 2, -1:
  //   b1 = 1            p1 = 1 − 0.1·1    = 0.9
  //   b2 = 0.5·1 + 2    = 2.5,  p2 = 0.9 − 0.25 = 0.65
  //   b3 = 0.5·2.5 − 1  = 0.25, p3 = 0.65 − 0.025 = 0.625
  Parameter<T> p("p", Tensor<T>::full({3}, T(1)));
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.5;
  SGD<T> opt({&p}, o);
  const double grads[] = {1, 2, -1};
  const double expect[] = {0.9, 0.65, 0.625};
  for (int k = 0; k < 3; ++k) {
    p.grad.fill(static_cast<T>(grads[k]));
    opt.step();
    check_close(p.value, {expect[k], expect[k], expect[k]}, 4 * tol<T>());
  }
  check_close(opt.state("p").momentum, {0.25, 0.25, 0.25}, 4 * tol<T>());

  // Plain SGD with weight decay: p ← p − lr·(g + wd·p) = 0.625 − 0.1·(0 + 0.2·0.625).
  Parameter<T> q("q", Tensor<T>::full({1}, T(0.625)));
  SGD<T> plain({&q}, {0.1, 0, 0, 0.2, false});
  plain.step();
  check_close(q.value, {0.6125}, 4 * tol<T>());
}

TEST_CASE_TEMPLATE("SGD: dampening, weight decay and nesterov match torch.optim.SGD", T, float, double) {
  // Reference values made once with Debian's python3-torch 1.13 in float64: torch.optim.SGD([p], lr=0.1,
  // momentum=0.9, dampening=0.1, weight_decay=0.01) and (lr=0.1, momentum=0.9, nesterov=True,
  // weight_decay=0.01), p = [1, -2, 0.5], the gradients below.
  const std::vector<std::vector<double>> grads{{0.5, -1.0, 0.0}, {0.25, 2.0, -1.0}, {1.0, 0.0, 0.5}};
  const std::vector<std::vector<double>> damped{{0.949, -1.898, 0.4995},
                                                {0.8797459, -1.9844917999999998, 0.58860045},
                                                {0.72662543869, -2.06054837738, 0.6232611145950001}};
  const std::vector<std::vector<double>> nesterov{{0.9031, -1.8062, 0.49905},
                                                  {0.81257411, -2.10014822, 0.687696805},
                                                  {0.562869708191, -2.182336916382, 0.6716214505704999}};
  for (bool use_nesterov : {false, true}) {
    Parameter<T> p("p", tensor<T>({3}, {1.0, -2.0, 0.5}));
    SGD<T> opt({&p}, {0.1, 0.9, use_nesterov ? 0.0 : 0.1, 0.01, use_nesterov});
    for (int k = 0; k < 3; ++k) {
      p.grad = tensor<T>({3}, grads[k]);
      opt.step();
      INFO("nesterov " << use_nesterov << " step " << k + 1);
      check_close(p.value, use_nesterov ? nesterov[k] : damped[k], 10 * tol<T>());
    }
  }
}

TEST_CASE_TEMPLATE("AdamW and SGD: a quadratic bowl converges to its minimum", T, float, double) {
  // f(x) = ½ Σ a_i (x_i − c_i)², an ill-conditioned bowl; ∇f = a ⊙ (x − c).
  const std::vector<double> a{1.0, 10.0, 0.1, 4.0}, c{1.0, -2.0, 3.0, 0.5};
  auto descend = [&](auto& opt, Parameter<T>& x, int steps) {
    for (int k = 0; k < steps; ++k) {
      opt.zero_grad();
      for (int i = 0; i < 4; ++i) x.grad(i) = static_cast<T>(a[i] * (static_cast<double>(x.value(i)) - c[i]));
      opt.step();
    }
  };
  {
    Parameter<T> x("x", Tensor<T>::zeros({4}));
    AdamW<T> opt({&x}, {0.05, 0.9, 0.999, 1e-8, 0.0});
    optim::Schedule sched({optim::Decay::Cosine, 50, 2000, 0.0});
    for (int k = 0; k < 2000; ++k) {
      opt.set_lr_scale(sched.lr_scale(k));
      descend(opt, x, 1);
    }
    check_close(x.value, c, 1e-3);
  }
  {
    Parameter<T> x("x", Tensor<T>::zeros({4}));
    SGD<T> opt({&x}, {0.05, 0.9, 0.0, 0.0, true});
    descend(opt, x, 1500);
    check_close(x.value, c, 1e-4);
  }
}

TEST_CASE_TEMPLATE("clip_grad_norm: scales the global norm to max_norm and returns the norm before", T, float,
                   double) {
  Parameter<T> x("x", Tensor<T>::zeros({2})), y("y", Tensor<T>::zeros({2, 1})), z("z", Tensor<T>::zeros({1}));
  x.grad = tensor<T>({2}, {3, 0});
  y.grad = tensor<T>({2, 1}, {0, -4});
  z.grad = tensor<T>({1}, {100});
  z.requires_grad = false;  // left out of the norm and untouched
  std::vector<Parameter<T>*> ps{&x, &y, &z};
  CHECK(optim::grad_norm(ps) == doctest::Approx(5.0));
  const double before = optim::clip_grad_norm(ps, 2.0);
  CHECK(before == doctest::Approx(5.0).epsilon(1e-12));
  CHECK(optim::grad_norm(ps) == doctest::Approx(2.0).epsilon(4 * tol<T>()));
  check_close(x.grad, {1.2, 0}, 4 * tol<T>());
  check_close(y.grad, {0, -1.6}, 4 * tol<T>());
  check_close(z.grad, {100}, 0);
  // Below the bound nothing changes.
  CHECK(optim::clip_grad_norm(ps, 10.0) == doctest::Approx(2.0).epsilon(4 * tol<T>()));
  check_close(x.grad, {1.2, 0}, 4 * tol<T>());
  // A frozen parameter may have no gradient tensor at all.
  z.grad = Tensor<T>();
  CHECK(optim::clip_grad_norm(ps, 1.0) == doctest::Approx(2.0).epsilon(4 * tol<T>()));
  optim::clip_grad_value(ps, 1.0);

  // A large tensor: the clipped norm is max_norm up to rounding.
  Rng rng(3);
  Parameter<T> big("big", Tensor<T>::zeros({50001}));
  big.grad = rng.normal<T>({50001}, T(0), T(1));
  std::vector<Parameter<T>*> pb{&big};
  CHECK(optim::clip_grad_norm(pb, 1.0) > 100.0);
  CHECK(optim::grad_norm(pb) == doctest::Approx(1.0).epsilon(std::is_same_v<T, float> ? 1e-6 : 1e-12));
}

// The list form the norm is taken with: each buffer's sum_of_squares added in order (the bits of
// a loop over the parameters), empty buffers and an empty list included.
TEST_CASE_TEMPLATE("sum_of_squares_over: each buffer's sum, added in order", T, float, double) {
  Rng rng(5);
  std::vector<Tensor<T>> bufs;
  for (int64_t n : {0, 1, 4095, 4097, 0, 70001}) bufs.push_back(rng.normal<T>({n}, T(0.1), T(2)));
  std::vector<const T*> xs;
  std::vector<int64_t> ns;
  double want = 0;
  for (const auto& b : bufs) {
    xs.push_back(b.data()), ns.push_back(b.numel());
    want += kernels::cpu::sum_of_squares(b.data(), b.numel());
  }
  using K = kernels::backend<cpu>;
  CHECK(K::sum_of_squares_over(static_cast<int64_t>(xs.size()), xs.data(), ns.data()) == want);
  CHECK(K::sum_of_squares_over(int64_t{0}, xs.data(), ns.data()) == 0.0);
  CHECK(K::sum_of_squares_over(int64_t{1}, xs.data(), ns.data()) == 0.0);  // one empty buffer
}

TEST_CASE_TEMPLATE("clip_grad_norm: non-finite norms are reported and leave gradients alone", T, float, double) {
  Parameter<T> x("x", Tensor<T>::zeros({3}));
  x.grad = tensor<T>({3}, {1, std::numeric_limits<double>::infinity(), 2});
  std::vector<Parameter<T>*> ps{&x};
  CHECK(std::isinf(optim::clip_grad_norm(ps, 1.0)));
  CHECK(x.grad(0) == T(1));
  CHECK(x.grad(2) == T(2));
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm(ps, 1.0, true), doctest::Contains("non-finite"), Error);
  x.grad(1) = std::numeric_limits<T>::quiet_NaN();
  CHECK(std::isnan(optim::clip_grad_norm(ps, 1.0)));
  CHECK(x.grad(0) == T(1));
  CHECK_THROWS_AS(optim::clip_grad_norm(ps, 0.0), Error);
}

TEST_CASE_TEMPLATE("clip_grad_value: clamps each gradient value", T, float, double) {
  Parameter<T> x("x", Tensor<T>::zeros({5}));
  x.grad = tensor<T>({5}, {-3, -0.5, 0, 0.75, 9});
  std::vector<Parameter<T>*> ps{&x};
  optim::clip_grad_value(ps, 1.0);
  check_close(x.grad, {-1, -0.5, 0, 0.75, 1}, 0);
  CHECK_THROWS_AS(optim::clip_grad_value(ps, -1.0), Error);
}

TEST_CASE("schedule: values at the boundaries for every kind") {
  using optim::Decay;
  using optim::lr_scale;
  using optim::ScheduleOptions;
  using doctest::Approx;

  ScheduleOptions constant{Decay::Constant, 10};
  CHECK(lr_scale(constant, 0) == 0.0);
  CHECK(lr_scale(constant, 5) == Approx(0.5));
  CHECK(lr_scale(constant, 10) == 1.0);
  CHECK(lr_scale(constant, 1000000) == 1.0);
  CHECK(lr_scale(ScheduleOptions{}, 0) == 1.0);  // no warmup

  ScheduleOptions linear{Decay::Linear, 10, 110, 0.1};
  CHECK(lr_scale(linear, 0) == 0.0);
  CHECK(lr_scale(linear, 10) == 1.0);
  CHECK(lr_scale(linear, 60) == Approx(0.55));  // halfway: 0.1 + 0.9·0.5
  CHECK(lr_scale(linear, 110) == Approx(0.1));
  CHECK(lr_scale(linear, 500) == Approx(0.1));

  ScheduleOptions cosine{Decay::Cosine, 10, 110, 0.0};
  CHECK(lr_scale(cosine, 0) == 0.0);
  CHECK(lr_scale(cosine, 10) == 1.0);
  CHECK(lr_scale(cosine, 35) == Approx(0.5 * (1 + std::cos(M_PI / 4))));
  CHECK(lr_scale(cosine, 60) == Approx(0.5));
  CHECK(lr_scale(cosine, 110) == Approx(0.0));
  cosine.min_lr_ratio = 0.2;
  CHECK(lr_scale(cosine, 60) == Approx(0.6));
  CHECK(lr_scale(cosine, 110) == Approx(0.2));

  // WSD over 100 steps, decaying during the last 20%: stable on [10, 80), decay on [80, 100].
  ScheduleOptions wsd{Decay::WSD, 10, 100, 0.0, 0.2};
  CHECK(lr_scale(wsd, 0) == 0.0);
  CHECK(lr_scale(wsd, 10) == 1.0);
  CHECK(lr_scale(wsd, 50) == 1.0);
  CHECK(lr_scale(wsd, 79) == 1.0);
  CHECK(lr_scale(wsd, 80) == 1.0);
  CHECK(lr_scale(wsd, 90) == Approx(0.5));
  CHECK(lr_scale(wsd, 100) == Approx(0.0));
  wsd.min_lr_ratio = 0.1;
  wsd.wsd_shape = optim::WsdShape::OneMinusSqrt;
  CHECK(lr_scale(wsd, 85) == Approx(0.1 + 0.9 * 0.5));  // progress ¼ → 1 − √¼
  CHECK(lr_scale(wsd, 100) == Approx(0.1));
  wsd.wsd_shape = optim::WsdShape::Cosine;
  CHECK(lr_scale(wsd, 90) == Approx(0.55));

  // Warmup is monotone and the schedule object agrees with the free function.
  optim::Schedule s(linear);
  for (int64_t k = 1; k <= 10; ++k) CHECK(s.lr_scale(k) > s.lr_scale(k - 1));
  for (int64_t k = 0; k <= 120; k += 7) CHECK(s.lr_scale(k) == lr_scale(linear, k));
}

TEST_CASE("schedule: bad configurations throw") {
  using optim::Decay;
  using optim::ScheduleOptions;
  CHECK_THROWS_WITH_AS(optim::Schedule(ScheduleOptions{Decay::Cosine, 10, 10}), doctest::Contains("total_steps"),
                       Error);
  CHECK_THROWS_AS(optim::Schedule(ScheduleOptions{Decay::Linear, 0, 0}), Error);
  CHECK_THROWS_AS(optim::Schedule(ScheduleOptions{Decay::Constant, -1}), Error);
  CHECK_THROWS_WITH_AS(optim::Schedule(ScheduleOptions{Decay::Linear, 0, 100, 1.5}), doctest::Contains("min_lr_ratio"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::Schedule(ScheduleOptions{Decay::WSD, 50, 100, 0.0, 0.6}),
                       doctest::Contains("before the warmup"), Error);
  CHECK_THROWS_AS(optim::Schedule(ScheduleOptions{Decay::WSD, 0, 100, 0.0, 0.0}), Error);
  CHECK_THROWS_AS(optim::lr_scale(ScheduleOptions{Decay::Constant}, -1), Error);
}
