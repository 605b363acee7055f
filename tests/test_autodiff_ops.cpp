// Gradient checks of every differentiable op in double, and fp32 against double.
#include <doctest/doctest.h>

#include "sinklab/autodiff/autodiff.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {
Tensor<double> randn(const Shape& s, uint64_t seed, double scale = 1.0) { return Rng(seed).normal<double>(s, 0.0, scale); }
Tensor<double> positive(const Shape& s, uint64_t seed) {
  auto t = Rng(seed).uniform<double>(s, 0.5, 2.0);
  return t;
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
  CHECK(r.max_error <= 1e-6);
}
}  // namespace

TEST_CASE("gradcheck: unary functions") {
  const Shape s{3, 5};
  check_grad([](auto& v) { return exp(v[0]); }, {randn(s, 1)});
  check_grad([](auto& v) { return log(v[0]); }, {positive(s, 2)});
  check_grad([](auto& v) { return tanh(v[0]); }, {randn(s, 3)});
  check_grad([](auto& v) { return sigmoid(v[0]); }, {randn(s, 4)});
  check_grad([](auto& v) { return silu(v[0]); }, {randn(s, 5)});
  check_grad([](auto& v) { return gelu(v[0]); }, {randn(s, 6)});
  check_grad([](auto& v) { return relu(v[0]); }, {randn(s, 7)});
  check_grad([](auto& v) { return square(v[0]); }, {randn(s, 8)});
  check_grad([](auto& v) { return sqrt(v[0]); }, {positive(s, 9)});
  check_grad([](auto& v) { return pow(v[0], 1.5); }, {positive(s, 10)});
  // Long enough to exercise the vector body and the scalar tail.
  check_grad([](auto& v) { return gelu(v[0]) * 0.5 + 1.0; }, {randn({37}, 11)});
}

TEST_CASE("gradcheck: broadcasting binary ops") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}},
      {{2, 1, 4}, {1, 3, 1}}, {{2, 3}, {}},     {{}, {2, 3}},      {{2, 3, 4, 5}, {3, 1, 5}}};
  uint64_t seed = 100;
  for (auto [sa, sb] : cases) {
    CAPTURE(sa);
    CAPTURE(sb);
    check_grad([](auto& v) { return v[0] + v[1]; }, {randn(sa, seed++), randn(sb, seed++)});
    check_grad([](auto& v) { return v[0] - v[1]; }, {randn(sa, seed++), randn(sb, seed++)});
    check_grad([](auto& v) { return v[0] * v[1]; }, {randn(sa, seed++), randn(sb, seed++)});
    check_grad([](auto& v) { return v[0] / v[1]; }, {randn(sa, seed++), positive(sb, seed++)});
  }
  check_grad([](auto& v) { return 2.0 - v[0] * 3.0 / 4.0 + v[0]; }, {randn({5}, 1)});
  check_grad([](auto& v) { return -v[0]; }, {randn({5}, 2)});
}

TEST_CASE("gradcheck: matmul, plain and batched") {
  check_grad([](auto& v) { return matmul(v[0], v[1]); }, {randn({3, 4}, 1), randn({4, 5}, 2)});
  check_grad([](auto& v) { return matmul(v[0], v[1]); }, {randn({2, 3, 4}, 3), randn({4, 5}, 4)});
  check_grad([](auto& v) { return matmul(v[0], v[1]); }, {randn({2, 3, 4}, 5), randn({2, 4, 2}, 6)});
  check_grad([](auto& v) { return matmul(v[0], v[1]); }, {randn({2, 2, 3, 4}, 7), randn({2, 2, 4, 3}, 8)});
  // The same weight used twice accumulates both contributions.
  check_grad([](auto& v) { return matmul(matmul(v[0], v[1]), v[1]); }, {randn({3, 4}, 9), randn({4, 4}, 10)});
}

TEST_CASE("gradcheck: reductions") {
  const Shape s{2, 3, 4};
  for (int axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    check_grad([axis](auto& v) { return sum(v[0], axis); }, {randn(s, 1)});
    check_grad([axis](auto& v) { return mean(v[0], axis, true); }, {randn(s, 2)});
    check_grad([axis](auto& v) { return max(v[0], axis); }, {randn(s, 3)});
  }
  check_grad([](auto& v) { return sum(v[0]); }, {randn(s, 4)});
  check_grad([](auto& v) { return mean(square(v[0])); }, {randn(s, 5)});
}

TEST_CASE("gradcheck: softmax, log_softmax and cross-entropy") {
  check_grad([](auto& v) { return softmax(v[0]); }, {randn({2, 3, 7}, 1, 2.0)});
  check_grad([](auto& v) { return log_softmax(v[0]); }, {randn({4, 19}, 2, 2.0)});
  auto targets = Tensor<int32_t>::from({2, 3}, {1, 4, -100, 0, 6, 2});
  check_grad([&](auto& v) { return cross_entropy(v[0], targets); }, {randn({2, 3, 7}, 3, 2.0)});
  auto t7 = Tensor<int32_t>::from({2}, {7, 7});
  check_grad([&](auto& v) { return cross_entropy(v[0], t7, 7); }, {randn({2, 9}, 4)});
}

TEST_CASE("gradcheck: shape ops and embedding") {
  check_grad([](auto& v) { return reshape(v[0], {4, 6}) * v[1]; }, {randn({2, 3, 4}, 1), randn({6}, 2)});
  check_grad([](auto& v) { return transpose(v[0], 0, 2) * v[1]; }, {randn({2, 3, 4}, 3), randn({4, 3, 2}, 4)});
  check_grad([](auto& v) { return slice(v[0], 1, 1, 3) * v[1]; }, {randn({2, 4, 3}, 5), randn({2, 2, 3}, 6)});
  check_grad([](auto& v) { return concat<double>({v[0], v[1], v[0]}, 1) * v[2]; },
             {randn({2, 3}, 7), randn({2, 2}, 8), randn({2, 8}, 9)});
  auto ids = Tensor<int32_t>::from({2, 3}, {0, 4, 4, 1, 0, 2});
  check_grad([&](auto& v) { return embedding(v[0], ids) * v[1]; }, {randn({5, 3}, 10), randn({3}, 11)});
}

TEST_CASE("float32 results agree with double within 1e-5 relative") {
  Rng rng(3);
  auto xd = rng.normal<double>({4, 8, 16});
  auto wd = rng.normal<double>({16, 16}, 0.0, 0.25);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    Tape<T> t;
    auto x = t.leaf(xd.to<T>());
    auto w = t.leaf(wd.to<T>());
    auto h = gelu(matmul(x, w));
    auto y = log_softmax(h * tanh(h) + sigmoid(h));
    auto l = mean(sum(square(y), -1));
    t.backward(l);
    return std::make_tuple(y.value().template to<double>(), w.grad().template to<double>(), l.item());
  };
  auto [yf, gwf, lf] = run(float{});
  auto [yd, gwd, ld] = run(double{});
  auto rel = [](const Tensor<double>& a, const Tensor<double>& b) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      num = std::max(num, std::abs(a.data()[i] - b.data()[i]));
      den = std::max(den, std::abs(b.data()[i]));
    }
    return num / den;
  };
  CHECK(rel(yf, yd) < 1e-5);
  CHECK(rel(gwf, gwd) < 1e-5);
  CHECK(std::abs(lf - ld) / std::abs(ld) < 1e-5);
}
