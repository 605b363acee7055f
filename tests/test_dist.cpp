// Data-parallel gradient reduction in one process: the buckets, their order and overlap, each
// parameter reduced exactly once (unused and frozen ones included), failures agreed over ranks,
// batch shards. A stand-in communicator plays a 2-rank job whose other rank computed the same
// gradients; the real 2-rank runs are tests/scripts/dist_mpi.sh.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/data/token_batch.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/dist/world.hpp"

using namespace sinklab;
using autodiff::Parameter;

namespace {

// Rank `rank` of `size` ranks that all hold what this one holds: a sum multiplies by size.
// Records every collective, to check their order and sizes.
class Mirror final : public dist::Communicator {
 public:
  explicit Mirror(int size = 2, int rank = 0) : size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mirror"; }
  void all_reduce_sum(float* d, int64_t n) override { scale(d, n), log.push_back(n); }
  void all_reduce_sum(double* d, int64_t n) override { scale(d, n), log.push_back(n); }
  void all_reduce_max(double*, int64_t n) override { log.push_back(-n); }
  std::unique_ptr<dist::Pending> start_all_reduce_sum(float* d, int64_t n) override {
    started.push_back(n);
    return std::make_unique<Later>(this, d, n);
  }
  void broadcast(void* d, int64_t bytes, int) override {
    if (on_broadcast) on_broadcast(d, bytes);
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

  std::function<void(void*, int64_t)> on_broadcast;  // what "rank 0" sends (default: what this rank has)
  std::vector<int64_t> log, started;
  int waited = 0;

 private:
  template <class T>
  void scale(T* d, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] *= T(size_);
  }
  struct Later final : dist::Pending {
    Later(Mirror* m, float* d, int64_t n) : m(m), d(d), n(n) {}
    bool test() override { return false; }
    void wait() override {
      if (d) m->scale(d, n), ++m->waited;
      d = nullptr;
    }
    Mirror* m;
    float* d;
    int64_t n;
  };
  int size_, rank_;
};

// Three layers (so gradients complete at three different times), a parameter the loss never
// uses (a gate that is off) and a frozen one.
struct Net {
  Parameter<float> w1, w2, w3, unused, frozen;
  Net() {
    Rng rng(3);
    w1 = Parameter<float>("w1", rng.normal<float>({6, 32}, 0.f, 0.4f));
    w2 = Parameter<float>("w2", rng.normal<float>({32, 32}, 0.f, 0.2f));
    w3 = Parameter<float>("w3", rng.normal<float>({32, 3}, 0.f, 0.2f));
    unused = Parameter<float>("unused", rng.normal<float>({5}));
    frozen = Parameter<float>("frozen", rng.normal<float>({4}));
    frozen.requires_grad = false;
  }
  std::vector<Parameter<float>*> params() { return {&w1, &w2, &w3, &unused, &frozen}; }
  std::function<void(autodiff::Var<float>)> tap;  // sees the first layer's output
  autodiff::Var<float> loss(autodiff::Tape<float>& t, const Tensor<float>& x) {
    using namespace autodiff;
    auto h = tanh(matmul(t.constant(x), t.param(w1)));
    if (tap) tap(h);
    h = tanh(matmul(h, t.param(w2)));
    h = matmul(h, t.param(w2));  // w2 twice: complete only at its first leaf
    return mean(square(matmul(h, t.param(w3))));
  }
};

std::vector<std::vector<float>> grads(Net& n) {
  std::vector<std::vector<float>> g;
  for (auto* p : n.params())
    if (p->requires_grad) g.push_back(p->grad.to_vector());
  return g;
}

}  // namespace

TEST_CASE("dist: one process reduces nothing and changes no gradient") {
  const Tensor<float> x = Rng(1).normal<float>({16, 6});
  Net a, b;
  autodiff::Tape<float> ta, tb;
  ta.backward(a.loss(ta, x));
  dist::SingleProcess one;
  dist::DataParallel<float> dp(one, b.params());
  const auto r = dp.backward(tb, b.loss(tb, x));
  CHECK(grads(a) == grads(b));
  CHECK(r.loss == doctest::Approx(a.loss(ta, x).item()));
  CHECK_FALSE(r.stop);
  CHECK(dp.reductions() == std::vector<int32_t>{1, 1, 1, 1, 0});
  tb.clear();
  CHECK(dp.backward(tb, b.loss(tb, x), /*stop=*/true).stop);
  CHECK(&dist::world() == &dist::world());
  CHECK(dist::world().size() == 1);  // not started by mpirun
}

TEST_CASE("dist: buckets overlap the backward pass and reduce every trainable parameter once") {
  const Tensor<float> x = Rng(1).normal<float>({16, 6});
  Net ref, net;
  autodiff::Tape<float> tr, t;
  tr.backward(ref.loss(tr, x));
  Mirror two;
  // Buckets of at most 1024 elements: w3 (96), w2 (1024), w1 (192), unused (5).
  dist::DataParallel<float> dp(two, net.params(), {.bucket_elements = 1024});
  for (int step = 0; step < 2; ++step) {  // the layout of the first step is kept
    for (auto* p : net.params()) p->zero_grad();
    t.clear();
    two.started.clear();
    const auto r = dp.backward(t, net.loss(t, x));
    // The average of two equal gradients is the gradient.
    CHECK(grads(ref) == grads(net));
    CHECK(r.loss == doctest::Approx(ref.loss(tr, x).item()));
    // In the order their gradients complete: w3 first, then w2 (its first leaf comes after
    // w1's), w1, and the unused parameter last; the frozen one in none.
    const std::vector<std::vector<int32_t>> expect{{2}, {1}, {0, 3}};
    CHECK(dp.buckets() == expect);
    CHECK(two.started == std::vector<int64_t>{96, 1024, 197});
    CHECK(dp.reductions() == std::vector<int32_t>{1, 1, 1, 1, 0});
    // w3's and w2's buckets started inside backward; the last waits for the unused parameter.
    CHECK(dp.last_step().buckets == 3);
    CHECK(dp.last_step().buckets_overlapped == 2);
    CHECK(dp.last_step().elements == 96 + 1024 + 197);
  }
  // The unused parameter's gradient stays zero; its neighbour in the bucket is averaged.
  for (float g : net.unused.grad.to_vector()) CHECK(g == 0.0f);
}

TEST_CASE("dist: without overlap every bucket starts after backward, with the same result") {
  const Tensor<float> x = Rng(2).normal<float>({8, 6});
  Net a, b;
  Mirror two;
  dist::DataParallel<float> on(two, a.params(), {.bucket_elements = 64}),
      off(two, b.params(), {.bucket_elements = 64, .overlap = false});
  autodiff::Tape<float> ta, tb;
  on.backward(ta, a.loss(ta, x));
  off.backward(tb, b.loss(tb, x));
  CHECK(grads(a) == grads(b));
  CHECK(on.last_step().buckets_overlapped > 0);
  CHECK(off.last_step().buckets_overlapped == 0);
  CHECK(off.buckets() == on.buckets());
}

TEST_CASE("dist: a failure inside backward still completes the step's collectives, then every rank throws") {
  const Tensor<float> x = Rng(1).normal<float>({16, 6});
  for (const bool non_finite : {true, false}) {
    CAPTURE(non_finite);
    Net net;
    // The failure comes when backward reaches the first layer: after w3's and w2's buckets started.
    net.tap = [&](autodiff::Var<float> h) {
      h.register_hook([&](Tensor<float>&) {
        if (non_finite) throw autodiff::NonFinite("a NaN, injected");
        throw Error("an error, injected");
      });
    };
    Mirror two;
    dist::DataParallel<float> dp(two, net.params(), {.bucket_elements = 1024});
    autodiff::Tape<float> t;
    auto loss = net.loss(t, x);
    if (non_finite) {
      CHECK_THROWS_WITH_AS(dp.backward(t, loss), doctest::Contains("on rank 0 of 2: a NaN, injected"),
                           autodiff::NonFinite);
    } else {
      CHECK_THROWS_WITH_AS(dp.backward(t, loss), doctest::Contains("on rank 0 of 2: an error, injected"), Error);
    }
    // Every bucket was still started and finished, as the other ranks' were.
    CHECK(dp.last_step().buckets_overlapped == 2);
    CHECK(two.started.size() == 3);
    CHECK(two.waited == 3);
    CHECK(dp.reductions() == std::vector<int32_t>{1, 1, 1, 1, 0});
  }
}

TEST_CASE("dist: ranks that hold different parameters, and bad arguments, are refused") {
  Net net;
  Mirror two(2, 1);
  // Rank 0 announces 4 parameters; this rank holds 5.
  two.on_broadcast = [](void* d, int64_t bytes) {
    if (bytes == 2 * sizeof(double)) static_cast<double*>(d)[0] = 4;
  };
  CHECK_THROWS_WITH_AS(dist::DataParallel<float>(two, net.params()),
                       doctest::Contains("rank 1 of 2 has 5, rank 0 has 4"), Error);
  Mirror same;
  CHECK_NOTHROW(dist::DataParallel<float>(same, net.params()));
  CHECK_THROWS_WITH_AS(dist::DataParallel<float>(same, {nullptr}), doctest::Contains("parameter 0 is null"), Error);
  CHECK_THROWS_WITH_AS(dist::DataParallel<float>(same, net.params(), {.bucket_elements = 0}),
                       doctest::Contains("bucket_elements must be positive"), Error);
}

TEST_CASE("dist: each rank's rows of a batch") {
  data::TokenBatch b{Tensor<int32_t>::empty({6, 3}), Tensor<int32_t>::empty({6, 3})};
  for (int i = 0; i < 18; ++i) b.x.data()[i] = i, b.y.data()[i] = 100 + i;
  Mirror r1(3, 1);
  const data::TokenBatch s = dist::shard(b, r1);
  REQUIRE(s.x.shape() == Shape{2, 3});
  CHECK(s.x.contiguous().to_vector() == std::vector<int32_t>{6, 7, 8, 9, 10, 11});
  CHECK(s.y.contiguous().to_vector() == std::vector<int32_t>{106, 107, 108, 109, 110, 111});
  Mirror r0of4(4, 0);
  CHECK_THROWS_WITH_AS(dist::shard(b, r0of4), doctest::Contains("6 rows does not split evenly over 4 ranks"), Error);
  dist::SingleProcess one;
  CHECK(dist::shard(b, one).x.shape() == Shape{6, 3});
}

TEST_CASE("dist: on_root runs on rank 0 and keeps an error's type in one process") {
  dist::SingleProcess one;
  int ran = 0;
  dist::on_root(one, [&] { ++ran; });
  CHECK(ran == 1);
  CHECK_THROWS_AS(dist::on_root(one, [] { throw std::out_of_range("x"); }), std::out_of_range);
  CHECK(dist::from_root(one, 42) == 42);
}
