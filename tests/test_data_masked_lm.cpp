#include <doctest/doctest.h>

#include "sinklab/data/masked_lm.hpp"

using namespace sinklab;

namespace {
Tensor<int32_t> ramp_ids(int64_t B, int64_t T, int64_t lo, int64_t vocab) {
  Tensor<int32_t> ids = Tensor<int32_t>::empty({B, T});
  for (int64_t i = 0; i < B * T; ++i) ids.data()[i] = static_cast<int32_t>(lo + i % (vocab - lo));
  return ids;
}
}  // namespace

TEST_CASE("masked_lm: 15% selected, 80/10/10 mask/random/keep, targets only at selected positions") {
  const int64_t B = 64, T = 256, V = 1000;
  const data::MaskedLmOptions opt{.mask_id = 3, .vocab = V, .random_lo = 4, .first_maskable = 1};
  const Tensor<int32_t> ids = ramp_ids(B, T, 4, V);
  Rng rng(11);
  const data::TokenBatch b = data::mask_tokens(ids, rng, opt);
  REQUIRE(b.x.shape() == ids.shape());
  REQUIRE(b.y.shape() == ids.shape());
  int64_t selected = 0, masked = 0, changed = 0, kept = 0, maskable = 0;
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t in = ids(r, t), x = b.x(r, t), y = b.y(r, t);
      if (t == 0) {
        CHECK(y == -100);  // never selected before first_maskable
        CHECK(x == in);
        continue;
      }
      ++maskable;
      if (y == -100) {
        CHECK(x == in);  // unselected positions are untouched
        continue;
      }
      ++selected;
      CHECK(y == in);
      if (x == opt.mask_id) ++masked;
      else if (x != in) {
        ++changed;
        CHECK(x >= opt.random_lo);
        CHECK(x < V);
      } else ++kept;
    }
  const double sel = double(selected) / double(maskable);
  CHECK(sel == doctest::Approx(0.15).epsilon(0.1));
  CHECK(double(masked) / double(selected) == doctest::Approx(0.8).epsilon(0.05));
  // Random replacements can hit the original token (1 in ~1000), so "kept" is ~10% + a hair.
  CHECK(double(changed) / double(selected) == doctest::Approx(0.1).epsilon(0.2));
  CHECK(double(kept) / double(selected) == doctest::Approx(0.1).epsilon(0.2));
}

TEST_CASE("masked_lm: deterministic from the Rng, and the stream advances by a fixed count") {
  const data::MaskedLmOptions opt{.mask_id = 1, .vocab = 50, .random_lo = 2};
  const Tensor<int32_t> a = ramp_ids(4, 32, 2, 50), c = ramp_ids(4, 32, 7, 50);
  Rng r1(5), r2(5), r3(5);
  const auto b1 = data::mask_tokens(a, r1, opt), b2 = data::mask_tokens(a, r2, opt);
  for (int64_t i = 0; i < a.numel(); ++i) {
    CHECK(b1.x.data()[i] == b2.x.data()[i]);
    CHECK(b1.y.data()[i] == b2.y.data()[i]);
  }
  data::mask_tokens(c, r3, opt);  // other ids, same shape
  CHECK(r1.counter() == r3.counter());
  Rng r4(6);
  const auto b4 = data::mask_tokens(a, r4, opt);
  bool differs = false;
  for (int64_t i = 0; i < a.numel(); ++i) differs |= b4.y.data()[i] != b1.y.data()[i];
  CHECK(differs);
}

TEST_CASE("masked_lm: every row gets a target, even at tiny T") {
  const data::MaskedLmOptions opt{.mask_id = 0, .vocab = 10, .random_lo = 1, .first_maskable = 1, .select = 0.01};
  const Tensor<int32_t> ids = ramp_ids(200, 3, 1, 10);
  Rng rng(3);
  const auto b = data::mask_tokens(ids, rng, opt);
  for (int64_t r = 0; r < 200; ++r) {
    int n = 0;
    for (int64_t t = 0; t < 3; ++t) n += b.y(r, t) != -100;
    CHECK(n >= 1);
    CHECK(b.y(r, 0) == -100);
  }
}

TEST_CASE("masked_lm: special ids below first_selectable_id ([SEP]) are never selected, and the stream is unchanged") {
  const data::MaskedLmOptions all{.mask_id = 1, .vocab = 50, .random_lo = 3, .first_maskable = 1};
  data::MaskedLmOptions words = all;
  words.first_selectable_id = 3;
  Tensor<int32_t> ids = ramp_ids(64, 16, 3, 50);
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t t = 4; t < 16; t += 5) ids(r, t) = 2;  // a [SEP] every five tokens
  Rng r1(9), r2(9);
  const auto a = data::mask_tokens(ids, r1, all), b = data::mask_tokens(ids, r2, words);
  CHECK(r1.counter() == r2.counter());
  int64_t sep_selected = 0, kept_same = 0, word_selected = 0;
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t t = 0; t < 16; ++t) {
      if (ids(r, t) == 2) {
        CHECK(b.y(r, t) == -100);
        CHECK(b.x(r, t) == 2);
        sep_selected += a.y(r, t) != -100;
      } else if (a.y(r, t) != -100) {
        ++word_selected;
        kept_same += b.y(r, t) == a.y(r, t) && b.x(r, t) == a.x(r, t);
      }
    }
  CHECK(sep_selected > 0);                // without the option they are selected as any word is
  CHECK(kept_same == word_selected);  // the words' selections are the same draws
  // A row whose only maskable tokens are specials has nothing to predict.
  Tensor<int32_t> seps = Tensor<int32_t>::full({1, 4}, 2);
  seps(0, 0) = 0;
  Rng r3(1);
  CHECK_THROWS_WITH_AS(data::mask_tokens(seps, r3, words), doctest::Contains("nothing to predict"), Error);
}

TEST_CASE("masked_lm: bad options and ids are refused with the reason") {
  const Tensor<int32_t> ids = ramp_ids(2, 8, 0, 10);
  Rng rng(0);
  CHECK_THROWS_WITH_AS(data::mask_tokens(ids, rng, {.mask_id = 10, .vocab = 10}), doctest::Contains("mask_id"), Error);
  CHECK_THROWS_WITH_AS(data::mask_tokens(ids, rng, {.mask_id = 0, .vocab = 10, .mask = 0.9, .random = 0.2}),
                       doctest::Contains("mask + random"), Error);
  CHECK_THROWS_WITH_AS(data::mask_tokens(ids, rng, {.mask_id = 0, .vocab = 5}), doctest::Contains("outside"), Error);
  CHECK_THROWS_WITH_AS(data::mask_tokens(ids, rng, {.mask_id = 0, .vocab = 10, .first_maskable = 8}),
                       doctest::Contains("no maskable"), Error);
  CHECK_THROWS_WITH_AS(data::mask_tokens(ids, rng, {.mask_id = 0, .vocab = 10, .first_selectable_id = 10}),
                       doctest::Contains("first_selectable_id 10 must be in [0, 10)"), Error);
}
