#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "sinklab/data/bigram_backcopy.hpp"

using namespace sinklab;
using data::BigramBackcopy;

namespace {
// A deterministic English-like text whose character frequencies are clearly ranked.
std::string sample_text() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and",
                         "then", "sleeps", "under", "warm", "sun", "while", "birds", "sing", "Zebra!", "x-ray,"};
  std::string s;
  uint64_t h = 12345;
  for (int i = 0; i < 4000; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    s += words[(h >> 33) % 20];
    s += (i % 13 == 12) ? ".\n" : " ";
  }
  return s;
}
}  // namespace

TEST_CASE("bigram_backcopy: vocabulary, triggers and statistics follow the text") {
  const std::string text = sample_text();
  BigramBackcopy task(text, {.seq_len = 64});
  std::map<char, int64_t> freq;
  for (char c : text) ++freq[c];
  CHECK(task.num_chars() == static_cast<int>(freq.size()));  // fewer than 65 distinct: all of them
  CHECK(task.vocab_size() == task.num_chars() + 2);
  CHECK(task.bos() == task.num_chars());
  CHECK(task.unused() == task.num_chars() + 1);

  // Triggers are the three most frequent characters.
  std::vector<std::pair<int64_t, char>> ranked;
  for (auto [c, n] : freq) ranked.push_back({-n, c});
  std::sort(ranked.begin(), ranked.end());
  std::set<char> top3 = {ranked[0].second, ranked[1].second, ranked[2].second};
  std::set<char> got;
  for (int32_t t : task.triggers()) got.insert(task.to_char(t));
  CHECK(got == top3);
  CHECK(task.is_trigger(task.to_token(' ')));  // space is the most frequent here
  CHECK_FALSE(task.is_trigger(task.bos()));

  // Token <-> char maps are inverse and ordered by byte value.
  for (int32_t t = 0; t < task.num_chars(); ++t) CHECK(task.to_token(task.to_char(t)) == t);
  for (int32_t t = 1; t < task.num_chars(); ++t)
    CHECK(static_cast<uint8_t>(task.to_char(t - 1)) < static_cast<uint8_t>(task.to_char(t)));
  CHECK(task.decode(task.encode("the fox")) == "the fox");
  CHECK_THROWS_AS(task.to_token('#'), Error);

  // Counts and conditionals match an independent count of adjacent pairs.
  const auto& counts = task.bigram_counts();
  const auto& cond = task.transition();
  std::map<std::pair<char, char>, int64_t> pairs;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) ++pairs[{text[i], text[i + 1]}];
  const char a = 'o', b = 'x';
  CHECK(counts(task.to_token(a), task.to_token(b)) == pairs[{a, b}]);
  int64_t row = 0;
  for (auto& [k, n] : pairs)
    if (k.first == a) row += n;
  CHECK(cond(task.to_token(a), task.to_token(b)) == doctest::Approx(double(pairs[{a, b}]) / double(row)));
  for (int64_t r = 0; r <= task.bos(); ++r) {
    double s = 0;
    for (int64_t c = 0; c < task.vocab_size(); ++c) s += cond(r, c);
    CHECK(s == doctest::Approx(1.0));
  }
  // cond[<s>] is the marginal; the first-token distribution drops the triggers.
  const auto& m = task.marginal();
  CHECK(m[task.to_token('e')] == doctest::Approx(double(freq['e']) / double(text.size())));
  for (int64_t c = 0; c < task.vocab_size(); ++c) CHECK(cond(task.bos(), c) == m[c]);
  for (int32_t t : task.triggers()) CHECK(task.first_token_distribution()[t] == 0.0);
}

TEST_CASE("bigram_backcopy: sequences obey the rules, and the seed fixes the stream") {
  const std::string text = sample_text();
  BigramBackcopy task(text, {.seq_len = 128});
  std::set<std::pair<char, char>> seen;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) seen.insert({text[i], text[i + 1]});

  Rng rng(42);
  auto batch = task.sample(rng, 64);
  REQUIRE(batch.x.shape() == Shape{64, 128});
  REQUIRE(batch.y.shape() == Shape{64, 128});
  int64_t backcopies = 0, bigrams = 0;
  for (int64_t b = 0; b < 64; ++b) {
    CHECK(batch.x(b, 0) == task.bos());
    CHECK_FALSE(task.is_trigger(batch.x(b, 1)));
    CHECK(batch.x(b, 1) < task.num_chars());
    for (int64_t t = 0; t < 128; ++t) {
      if (t + 1 < 128) REQUIRE(batch.y(b, t) == batch.x(b, t + 1));  // y is x shifted by one
      REQUIRE(batch.y(b, t) < task.num_chars());                      // never <s> or unused after 0
      if (t == 0) continue;
      const int32_t cur = batch.x(b, t), nxt = batch.y(b, t);
      if (task.is_trigger(cur)) {
        REQUIRE(nxt == batch.x(b, t - 1));  // backcopy
        REQUIRE_FALSE(task.is_trigger(batch.x(b, t - 1)));
        ++backcopies;
      } else {
        REQUIRE(seen.count({task.to_char(cur), task.to_char(nxt)}) == 1);  // a bigram of the text
        ++bigrams;
      }
    }
  }
  CHECK(backcopies > 500);  // triggers are the most frequent characters: plenty of copies
  CHECK(bigrams > 500);

  Rng again(42);
  auto same = task.sample(again, 64);
  CHECK(same.x.to_vector() == batch.x.to_vector());
  CHECK(same.y.to_vector() == batch.y.to_vector());
  auto next = task.sample(again, 64);  // the stream moves on
  CHECK(next.x.to_vector() != batch.x.to_vector());
  Rng other(43);
  CHECK(task.sample(other, 64).x.to_vector() != batch.x.to_vector());

  // Masks: trigger positions and bigram positions partition t >= 1.
  auto tm = task.trigger_mask(batch.x), bm = task.bigram_mask(batch.x);
  for (int64_t b = 0; b < 64; ++b) {
    CHECK(tm(b, 0) + bm(b, 0) == 0.f);
    for (int64_t t = 1; t < 128; ++t) CHECK(tm(b, t) + bm(b, t) == 1.f);
  }
}

TEST_CASE("bigram_backcopy: transition frequencies match the bigram matrix") {
  const std::string text = sample_text();
  BigramBackcopy task(text, {.seq_len = 256});
  Rng rng(5);
  auto batch = task.sample(rng, 256);
  // The most frequent non-trigger current token of the batch.
  std::vector<int64_t> occ(task.vocab_size(), 0);
  for (int64_t b = 0; b < 256; ++b)
    for (int64_t t = 1; t < 256; ++t)
      if (!task.is_trigger(batch.x(b, t))) ++occ[batch.x(b, t)];
  const int32_t a = static_cast<int32_t>(std::max_element(occ.begin(), occ.end()) - occ.begin());
  std::vector<double> hist(task.vocab_size(), 0.0);
  double n = 0;
  for (int64_t b = 0; b < 256; ++b)
    for (int64_t t = 1; t < 256; ++t)
      if (batch.x(b, t) == a) hist[batch.y(b, t)] += 1, n += 1;
  REQUIRE(n > 1000);
  double tv = 0;
  for (int64_t c = 0; c < task.vocab_size(); ++c) tv += std::abs(hist[c] / n - task.transition()(a, c));
  CHECK(0.5 * tv < 0.05);
}

TEST_CASE("bigram_backcopy: more than 65 distinct characters keeps the 65 most frequent") {
  // Byte k (k = 0..69, mapped to printable 40+k) appears 100 + k times: the 5 rarest drop out.
  std::string text;
  for (int k = 0; k < 70; ++k) text += std::string(100 + k, static_cast<char>(40 + k));
  BigramBackcopy task(text);
  CHECK(task.num_chars() == 65);
  for (int k = 0; k < 5; ++k) CHECK_FALSE(task.in_vocabulary(static_cast<char>(40 + k)));
  for (int k = 5; k < 70; ++k) CHECK(task.in_vocabulary(static_cast<char>(40 + k)));
  std::set<char> trig;
  for (int32_t t : task.triggers()) trig.insert(task.to_char(t));
  CHECK(trig == std::set<char>{char(40 + 69), char(40 + 68), char(40 + 67)});
  // The pair (44, 45) straddles a dropped byte (44): not counted; (45, 45) is.
  CHECK(task.bigram_counts()(task.to_token(char(45)), task.to_token(char(45))) == 104);
  CHECK(task.bigram_counts()(task.to_token(char(45)), task.to_token(char(46))) == 1);
  CHECK_THROWS_AS(BigramBackcopy("aab"), Error);  // 2 distinct characters, 3 triggers
}

TEST_CASE("bigram_backcopy: risks of the true distribution vanish, of uniform logits are known") {
  const std::string text = sample_text();
  BigramBackcopy task(text, {.seq_len = 32});
  Rng rng(9);
  auto batch = task.sample(rng, 16);
  const int64_t V = task.vocab_size();
  auto perfect = Tensor<double>::full({16, 32, V}, -1e9);
  auto uniform = Tensor<float>::zeros({16, 32, V});
  double expect_bigram = 0;
  int64_t nb = 0;
  for (int64_t b = 0; b < 16; ++b)
    for (int64_t t = 0; t < 32; ++t) {
      auto p = task.next_distribution(batch.x.data() + b * 32, t);
      double h = 0;
      for (int64_t c = 0; c < V; ++c)
        if (p[c] > 0) perfect(b, t, c) = std::log(p[c]), h -= p[c] * std::log(p[c]);
      if (t >= 1 && !task.is_trigger(batch.x(b, t))) expect_bigram += std::log(double(V)) - h, ++nb;
    }
  auto r = task.risk(batch.x, batch.y, perfect);
  CHECK(r.bigram == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(r.backcopy == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(r.bigram_positions + r.backcopy_positions == 16 * 31);
  auto u = task.risk(batch.x, batch.y, uniform);
  CHECK(u.bigram == doctest::Approx(expect_bigram / double(nb)));
  CHECK(u.backcopy == doctest::Approx(std::log(double(V))));
  CHECK_THROWS_AS(task.risk(batch.x, batch.y, Tensor<float>::zeros({16, 32, V - 1})), Error);
}
