// The tape itself: accumulation, hooks, no_grad, reuse without reallocation, errors,
// and that gradcheck catches a wrong gradient; the block pool behind every tensor.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "sinklab/autodiff/autodiff.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

TEST_CASE("tape: gradients accumulate over uses and into parameters across backward calls") {
  Parameter<double> w("w", Tensor<double>::from({2}, {1.0, -2.0}));
  for (int step = 0; step < 2; ++step) {
    Tape<double> t;
    auto x = t.param(w);
    auto y = sum(x * x + x);  // dy/dx = 2x + 1
    t.backward(y);
  }
  CHECK(w.grad(0) == doctest::Approx(2 * 3.0));
  CHECK(w.grad(1) == doctest::Approx(2 * -3.0));
  w.zero_grad();
  CHECK(w.grad(0) == 0.0);
}

TEST_CASE("tape: hooks observe and may rewrite a gradient before it flows on") {
  Tape<double> t;
  auto x = t.leaf(Tensor<double>::from({3}, {1, 2, 3}));
  auto h = x * 2.0;
  Tensor<double> seen;
  h.register_hook([&](Tensor<double>& g) { seen = g.clone(); });
  h.register_hook([&](Tensor<double>& g) { g.fill(10.0); });  // hooks run newest first
  auto y = sum(h * h);
  t.backward(y);
  // dy/dh = 2h = [4, 8, 12], but the newest hook runs first and rewrites it to 10, so the
  // older hook sees 10 and so does x.
  CHECK(seen(1) == 10.0);
  CHECK(x.grad()(0) == 20.0);  // rewritten 10 · dh/dx = 2
}

TEST_CASE("tape: a gradient passed on unchanged is shared without a copy until someone writes to it") {
  Tape<double> t;
  auto x = t.leaf(Tensor<double>::from({3}, {1, 2, 3}));
  auto a = x * 2.0, b = x * 3.0;
  auto h = a + b;          // add passes h's gradient on to a and b unchanged
  auto z = h * h + a;       // a's first gradient is an alias of z's; adding h's must not change z's
  auto y = sum(z);
  Tensor<double> seen_b;
  b.register_hook([&](Tensor<double>& g) {  // a hook may write: it gets its own copy
    seen_b = g.clone();
    g.fill(1.0);
  });
  t.backward(y);
  // dy/dh = 2h = 10x; dy/da = 10x + 1; dy/db = 10x, rewritten to 1 by the hook.
  CHECK(a.grad()(1) == 10 * 2.0 + 1);
  CHECK(seen_b(1) == 10 * 2.0);
  CHECK(h.grad()(1) == 10 * 2.0);  // b's hook did not change h's gradient
  CHECK(z.grad()(1) == 1.0);       // nor did the sum into a's
  CHECK(b.grad()(1) == 1.0);
  CHECK(x.grad()(1) == 2 * (10 * 2.0 + 1) + 3 * 1.0);
}

TEST_CASE("tape: no_grad records no backward and marks outputs as not requiring grad") {
  Tape<float> t;
  auto x = t.leaf(Tensor<float>::ones({4}));
  Var<float> y;
  {
    no_grad ng;
    CHECK_FALSE(grad_enabled());
    y = exp(x);
  }
  CHECK(grad_enabled());
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_WITH_AS(t.backward(sum(y)), doctest::Contains("does not depend"), Error);
}

TEST_CASE("tape: clear() and reuse keep capacity and stop allocating after the first step") {
  Tape<float> t;
  Parameter<float> w("w", Rng(1).normal<float>({64, 64}));
  auto x0 = Rng(2).normal<float>({32, 64});
  std::size_t misses_after_first = 0, cap = 0;
  for (int step = 0; step < 5; ++step) {
    t.clear();
    auto x = t.constant(x0);
    auto y = mean(square(tanh(matmul(x, t.param(w)))));
    t.backward(y);
    if (step == 1) {
      misses_after_first = BlockPool::instance().misses();
      cap = t.capacity();
    }
  }
  CHECK(BlockPool::instance().misses() == misses_after_first);
  CHECK(t.capacity() == cap);
}

TEST_CASE("storage: blocks of 1 MiB and more are whole 2 MiB pages, reused by size; smaller ones 64-byte aligned") {
  auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const std::size_t MiB = std::size_t{1} << 20;
  for (std::size_t bytes : {MiB - 4, MiB, 3 * MiB + 4, 4 * MiB}) {
    auto a = allocate_host<float>(bytes / sizeof(float));
    CHECK_MESSAGE(address(a.get()) % (bytes >= MiB ? 2 * MiB : 64) == 0, bytes, " bytes");
    std::fill(a.get(), a.get() + bytes / sizeof(float), 1.f);  // the whole block is ours
  }
  // 1.5 MiB and 2 MiB share a pool size (one 2 MiB page): the second reuses the first's block.
  const float* first = nullptr;
  { auto a = allocate_host<float>(3 * MiB / 2 / sizeof(float)); first = a.get(); }
  const std::size_t misses = BlockPool::instance().misses();
  auto b = allocate_host<float>(2 * MiB / sizeof(float));
  CHECK(b.get() == first);
  CHECK(BlockPool::instance().misses() == misses);
}

TEST_CASE("tape: errors name the operation and shapes") {
  Tape<float> t, other;
  auto a = t.leaf(Tensor<float>::zeros({2, 3}));
  auto b = t.leaf(Tensor<float>::zeros({4, 5}));
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("matmul: inner dimensions differ: [2, 3] · [4, 5]"), Error);
  CHECK_THROWS_WITH_AS(a + t.leaf(Tensor<float>::zeros({2, 4})), doctest::Contains("[2, 3] and [2, 4] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(a + other.leaf(Tensor<float>::zeros({2, 3})), doctest::Contains("different tapes"), Error);
  CHECK_THROWS_WITH_AS(reshape(a, {5}), doctest::Contains("reshape: cannot reshape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(a, Tensor<int32_t>::from({2}, {0, 3})), doctest::Contains("target 3"), Error);
  CHECK_THROWS_WITH_AS(embedding(a, Tensor<int32_t>::from({1}, {2})), doctest::Contains("id 2"), Error);
  CHECK_THROWS_WITH_AS(t.backward(a), doctest::Contains("root has shape [2, 3]"), Error);
}

TEST_CASE("gradcheck reports a wrong gradient") {
  Parameter<double> p("x", Rng(5).normal<double>({6}));
  auto wrong_square = [&](Tape<double>& t) {
    auto x = t.param(p);
    const Tensor<double> xv = x.value();
    Tensor<double> y = Tensor<double>::empty(xv.shape());
    for (int64_t i = 0; i < xv.numel(); ++i) y.data()[i] = xv.data()[i] * xv.data()[i];
    return t.record(y, {x}, [x, xv](Tape<double>& tp, const Tensor<double>& g) {
      Tensor<double> gx = Tensor<double>::empty(g.shape());
      for (int64_t i = 0; i < g.numel(); ++i) gx.data()[i] = 2.1 * xv.data()[i] * g.data()[i];  // should be 2x
      tp.accumulate(x, gx);
    });
  };
  auto r = gradcheck(wrong_square, {&p});
  CHECK_FALSE(r.ok);
  CHECK(r.max_error > 0.04);
}

TEST_CASE("tape: the non-finite guard names the op, the parameter and the backward that produced a NaN/Inf") {
  Parameter<double> w("layer.w", Tensor<double>::from({3}, {4.0, 0.0, 1.0}));
  {  // Off by default: NaNs flow through as values.
    Tape<double> t;
    auto y = log(t.param(w) - 5.0);
    CHECK(std::isnan(y.value()(0)));
  }
  CheckFinite on;
  SUBCASE("a forward value: the op that recorded it") {
    Tape<double> t;
    auto x = t.param(w);
    auto y = x * 2.0;  // fine
    CHECK_THROWS_WITH_AS(log(y - 5.0), doctest::Contains("forward value of op 'detail::unary<Log>'"), NonFinite);
  }
  SUBCASE("a gradient: the node it reached and the backward that wrote it") {
    Tape<double> t;
    auto y = sum(sqrt(t.param(w)));  // sqrt'(0) = +Inf
    try {
      t.backward(y);
      FAIL("no NonFinite thrown");
    } catch (const NonFinite& e) {
      const std::string m = e.what();
      CHECK(m.find("+Inf at element 1") != std::string::npos);
      CHECK(m.find("written by the backward of op 'detail::unary<Sqrt>'") != std::string::npos);
    }
  }
  SUBCASE("a parameter that already holds a NaN is named when it is used") {
    Parameter<double> bad("head.bias", Tensor<double>::from({2}, {1.0, std::nan("")}));
    Tape<double> t;
    CHECK_THROWS_WITH_AS(t.param(bad), doctest::Contains("parameter 'head.bias'"), NonFinite);
  }
  SUBCASE("finite values and gradients pass, and the guard ends with its scope") {
    Tape<double> t;
    auto y = sum(square(t.param(w)));
    t.backward(y);
    CHECK(w.grad(0) == doctest::Approx(8.0));
  }
}

TEST_CASE("tape: the guard's setting is restored when its scope ends") {
  CHECK_FALSE(check_finite());
  {
    CheckFinite on;
    CHECK(check_finite());
    {
      CheckFinite off(false);
      CHECK_FALSE(check_finite());
    }
    CHECK(check_finite());
  }
  CHECK_FALSE(check_finite());
}
