#include <doctest/doctest.h>

#include <set>

#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"

using namespace sinklab;

TEST_CASE("tensor: construction, indexing and views share storage") {
  auto t = Tensor<float>::arange({2, 3, 4});
  CHECK(t.numel() == 24);
  CHECK(t(1, 2, 3) == 23.f);
  auto s = t.select(0, 1);  // [3, 4]
  CHECK(s.shape() == Shape{3, 4});
  CHECK(s(0, 0) == 12.f);
  s(0, 0) = -1.f;
  CHECK(t(1, 0, 0) == -1.f);
  auto tr = t.transpose(1, 2);  // [2, 4, 3]
  CHECK_FALSE(tr.is_contiguous());
  CHECK(tr(0, 3, 2) == t(0, 2, 3));
  auto c = tr.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c(0, 3, 2) == t(0, 2, 3));
  auto sl = t.slice(2, 1, 3);  // [2, 3, 2]
  CHECK(sl(1, 1, 0) == t(1, 1, 1));
  CHECK(t.view({6, 4})(5, 3) == 23.f);
  CHECK(t.clone().shares_storage_with(t) == false);
}

TEST_CASE("tensor: shape errors name the operation and the shapes") {
  auto t = Tensor<float>::zeros({2, 3});
  CHECK_THROWS_WITH_AS(t.view({4, 2}), doctest::Contains("[2, 3]"), Error);
  CHECK_THROWS_WITH_AS(t.transpose(0, 1).view({6}), doctest::Contains("not contiguous"), Error);
  CHECK_THROWS_WITH_AS(t.slice(1, 2, 5), doctest::Contains("Tensor::slice"), Error);
  CHECK_THROWS_AS(t(2, 0), Error);
  CHECK_THROWS_AS((Shape{1, 2, 3, 4, 5}), Error);
  CHECK_THROWS_WITH_AS(Tensor<float>::from({2, 2}, {1.f, 2.f}), doctest::Contains("expected 4"), Error);
}

TEST_CASE("tensor: copy_from into a strided view and casts") {
  auto t = Tensor<double>::zeros({3, 3});
  auto col = t.slice(1, 1, 2);  // non-contiguous [3, 1]
  col.copy_from(Tensor<double>::from({3, 1}, {1, 2, 3}));
  CHECK(t(2, 1) == 3.0);
  CHECK(t(2, 0) == 0.0);
  auto f = t.to<float>();
  CHECK(f(1, 1) == 2.f);
}

TEST_CASE("rng: same seed gives the same numbers on any thread count") {
  Rng a(42), b(42);
  set_num_threads(1);
  auto x = a.normal<float>({1000, 37});
  set_num_threads(2);
  auto y = b.normal<float>({1000, 37});
  CHECK(x.to_vector() == y.to_vector());
  auto z = Rng(43).normal<float>({1000, 37});
  CHECK(x.to_vector() != z.to_vector());
  // Mean and variance of the normal fill.
  double m = 0, v = 0;
  for (float e : x.to_vector()) m += e;
  m /= x.numel();
  for (float e : x.to_vector()) v += (e - m) * (e - m);
  v /= x.numel();
  CHECK(std::abs(m) < 0.02);
  CHECK(std::abs(v - 1.0) < 0.03);
  // Consecutive fills do not repeat.
  auto x2 = a.normal<float>({1000, 37});
  CHECK(x2.to_vector() != x.to_vector());
}

TEST_CASE("rng: uniform range, randint and truncated normal bounds") {
  Rng r(7);
  auto u = r.uniform<double>({10000}, -2.0, 3.0);
  for (double e : u.to_vector()) CHECK((e >= -2.0 && e < 3.0));
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(r.randint(3, 8));
  CHECK(seen == std::set<int64_t>{3, 4, 5, 6, 7});
  auto tn = Tensor<float>::empty({20000});
  r.fill_truncated_normal(tn, 0.f, 0.02f);
  for (float e : tn.to_vector()) CHECK(std::abs(e) <= 0.04f + 1e-7f);
}
