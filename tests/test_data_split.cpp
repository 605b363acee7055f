#include <doctest/doctest.h>

#include <set>

#include "sinklab/data/split.hpp"

using namespace sinklab;

TEST_CASE("split: train/validation split is a seeded partition") {
  auto s = data::split_indices(100, 0.2, 7);
  CHECK(s.validation.size() == 20);
  CHECK(s.train.size() == 80);
  std::set<int64_t> all(s.train.begin(), s.train.end());
  all.insert(s.validation.begin(), s.validation.end());
  CHECK(all.size() == 100);
  CHECK(*all.begin() == 0);
  CHECK(*all.rbegin() == 99);
  auto again = data::split_indices(100, 0.2, 7);
  CHECK(again.validation == s.validation);
  CHECK(data::split_indices(100, 0.2, 8).validation != s.validation);
  CHECK(s.validation != std::vector<int64_t>{80, 81, 82, 83, 84, 85, 86, 87, 88, 89,
                                             90, 91, 92, 93, 94, 95, 96, 97, 98, 99});  // shuffled, not a tail
  CHECK_THROWS_AS(data::split_indices(10, 1.5, 0), Error);

  std::vector<int32_t> stream(1000);
  for (int i = 0; i < 1000; ++i) stream[i] = i;
  auto [train, val] = data::split_stream(stream, 0.1);
  CHECK(train.size() == 900);
  CHECK(val.front() == 900);  // contiguous tail
}

TEST_CASE("split: IndexBatcher covers each epoch exactly once and reshuffles per epoch") {
  data::IndexBatcher b(10, 4, 123);
  CHECK(b.batches_per_epoch() == 3);
  std::vector<int64_t> epoch0, epoch1;
  for (int k = 0; k < 3; ++k) {
    auto idx = b.next();
    CHECK(idx.size() == (k < 2 ? 4u : 2u));
    epoch0.insert(epoch0.end(), idx.begin(), idx.end());
  }
  CHECK(b.epoch() == 0);
  for (int k = 0; k < 3; ++k) {
    auto idx = b.next();
    epoch1.insert(epoch1.end(), idx.begin(), idx.end());
  }
  CHECK(b.epoch() == 1);
  CHECK(std::set<int64_t>(epoch0.begin(), epoch0.end()).size() == 10);
  CHECK(std::set<int64_t>(epoch1.begin(), epoch1.end()).size() == 10);
  CHECK(epoch0 != epoch1);

  // Resuming at epoch 1 reproduces it; the seed fixes the order.
  data::IndexBatcher resumed(10, 4, 123);
  resumed.start_epoch(1);
  std::vector<int64_t> r;
  for (int k = 0; k < 3; ++k) {
    auto idx = resumed.next();
    r.insert(r.end(), idx.begin(), idx.end());
  }
  CHECK(r == epoch1);

  data::IndexBatcher dropping(std::vector<int64_t>{5, 6, 7, 8, 9}, 2, 1, /*drop_last=*/true);
  CHECK(dropping.batches_per_epoch() == 2);
  std::set<int64_t> seen;
  for (int k = 0; k < 2; ++k)
    for (auto i : dropping.next()) seen.insert(i);
  CHECK(seen.size() == 4);
  for (auto i : seen) CHECK((i >= 5 && i <= 9));

  auto t = Tensor<float>::arange({5, 2});
  auto g = data::gather_rows(t, {4, 0});
  CHECK(g.shape() == Shape{2, 2});
  CHECK(g.to_vector() == std::vector<float>{8, 9, 0, 1});
  CHECK_THROWS_AS(data::gather_rows(t, {5}), Error);
}

TEST_CASE("split: token stream windows are shifted pairs drawn from a seed") {
  std::vector<int32_t> stream(200);
  for (int i = 0; i < 200; ++i) stream[i] = i * 3;
  data::TokenStreamBatcher a(stream, 16, 99), b(stream, 16, 99), c(stream, 16, 100);
  auto ba = a.sample(8);
  CHECK(ba.x.shape() == Shape{8, 16});
  for (int64_t r = 0; r < 8; ++r) {
    const int32_t start = ba.x(r, 0) / 3;
    CHECK((start >= 0 && start + 16 < 200));
    for (int64_t t = 0; t < 16; ++t) {
      CHECK(ba.x(r, t) == (start + t) * 3);
      CHECK(ba.y(r, t) == (start + t + 1) * 3);
    }
  }
  CHECK(b.sample(8).x.to_vector() == ba.x.to_vector());
  CHECK(c.sample(8).x.to_vector() != ba.x.to_vector());
  CHECK(a.sample(8).x.to_vector() != ba.x.to_vector());  // the stream moves on

  auto val = a.sequential(5);
  // (200 - 1) / 16 = 12 windows -> batches of 5, 5, 2.
  REQUIRE(val.size() == 3);
  CHECK(val[2].x.size(0) == 2);
  CHECK(val[0].x(1, 0) == 16 * 3);
  CHECK(val[2].y(1, 15) == (11 * 16 + 16) * 3);
  CHECK(a.sequential(5, 1).size() == 1);
  CHECK_THROWS_AS(data::TokenStreamBatcher(std::vector<int32_t>(16), 16, 0), Error);
}
