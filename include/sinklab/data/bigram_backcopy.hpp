// The Bigram-Backcopy task (Guo et al. 2024, used by the VGA paper; docs/papers.md), built from
// the character statistics of any text.
//
// Vocabulary: the `num_chars` (65) most frequent bytes of the text, ties broken by the smaller
// byte value; a text with fewer distinct bytes uses all of them (num_chars() says how many).
// Character tokens are numbered in byte order (like sorted(set(text))), then <s> = num_chars(),
// then one unused token = num_chars() + 1; vocab_size() = num_chars() + 2.
// Bigram matrix: row-normalised counts of adjacent pairs (a, b) of the text with both bytes in
// the vocabulary (a pair touching an out-of-vocabulary byte is skipped, not bridged). A
// character that is never followed by an in-vocabulary character gets the unigram marginal as
// its row (this only matters for rare bytes at the very end of a text). cond[<s>] = marginal.
// Triggers: the `num_triggers` (3) most frequent characters (ties: smaller byte first).
//
// A sequence is <s>, then a non-trigger drawn from the marginal with triggers zeroed, then,
// while its length < T + 1: after a trigger append the token before the trigger (backcopy),
// otherwise draw from cond[last]. x = seq[:-1], y = seq[1:].
// (Triggers never follow each other: a trigger is only ever drawn after a non-trigger, and the
// token it copies is that non-trigger.)
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/data/token_batch.hpp"

namespace sinklab::data {

struct BigramBackcopyConfig {
  int64_t seq_len = 256;  // T: x and y are [B, T]
  int num_chars = 65;
  int num_triggers = 3;
};

// Mean risks of a model's predictions on a Bigram-Backcopy batch (nats).
struct BigramBackcopyRisk {
  double bigram = 0;    // mean KL(true next-token distribution || model) at non-trigger positions t >= 1
  double backcopy = 0;  // mean cross-entropy at trigger positions (the target is the copied token)
  int64_t bigram_positions = 0, backcopy_positions = 0;
};

class BigramBackcopy {
 public:
  explicit BigramBackcopy(std::string_view text, BigramBackcopyConfig cfg = {}) : cfg_(cfg) {
    SINKLAB_CHECK(cfg.seq_len >= 2, "BigramBackcopy: seq_len must be >= 2, got ", cfg.seq_len);
    SINKLAB_CHECK(cfg.num_chars >= 2 && cfg.num_chars <= 256, "BigramBackcopy: num_chars must be in [2, 256], got ",
                  cfg.num_chars);
    SINKLAB_CHECK(cfg.num_triggers >= 0 && cfg.num_triggers < cfg.num_chars,
                  "BigramBackcopy: num_triggers must be in [0, num_chars), got ", cfg.num_triggers);
    build_vocabulary(text);
    build_statistics(text);
  }

  int64_t seq_len() const { return cfg_.seq_len; }
  int num_chars() const { return n_chars_; }
  int vocab_size() const { return n_chars_ + 2; }
  int32_t bos() const { return n_chars_; }
  int32_t unused() const { return n_chars_ + 1; }

  bool is_trigger(int32_t token) const {
    return token >= 0 && token < n_chars_ && is_trigger_[static_cast<std::size_t>(token)];
  }
  const std::vector<int32_t>& triggers() const { return triggers_; }

  bool in_vocabulary(char c) const { return token_of_[static_cast<uint8_t>(c)] >= 0; }
  int32_t to_token(char c) const {
    const int32_t t = token_of_[static_cast<uint8_t>(c)];
    SINKLAB_CHECK(t >= 0, "BigramBackcopy::to_token: byte ", int(static_cast<uint8_t>(c)),
                  " is not in the vocabulary");
    return t;
  }
  char to_char(int32_t token) const {
    SINKLAB_CHECK(token >= 0 && token < n_chars_, "BigramBackcopy::to_char: token ", token,
                  " is not a character (characters are 0..", n_chars_ - 1, ", <s> = ", bos(), ")");
    return chars_[static_cast<std::size_t>(token)];
  }
  std::vector<int32_t> encode(std::string_view s) const {
    std::vector<int32_t> out;
    out.reserve(s.size());
    for (char c : s) out.push_back(to_token(c));
    return out;
  }
  // Characters as themselves, <s> as "<s>", the unused token as "<unused>".
  template <class Ints>
  std::string decode(const Ints& tokens) const {
    std::string s;
    for (auto t : tokens) {
      const auto k = static_cast<int32_t>(t);
      s += k == bos() ? std::string("<s>") : k == unused() ? std::string("<unused>") : std::string(1, to_char(k));
    }
    return s;
  }

  // Adjacent-pair counts [vocab, vocab] (rows/columns of <s> and the unused token are zero).
  const Tensor<int64_t>& bigram_counts() const { return counts_; }
  // Row a = cond[a], the true next-token distribution after character a; row <s> = marginal;
  // the unused token's row is zero. [vocab, vocab], rows sum to 1 except the unused one.
  const Tensor<double>& transition() const { return cond_; }
  // Unigram marginal over the vocabulary (zero for <s> and unused).
  const std::vector<double>& marginal() const { return marginal_; }
  // Distribution of the first token after <s>: the marginal with triggers zeroed, renormalised.
  const std::vector<double>& first_token_distribution() const { return first_; }

  // True distribution of y[t] given the prefix x[0..t] of a sequence of this task.
  std::vector<double> next_distribution(const int32_t* x, int64_t t) const {
    std::vector<double> p(static_cast<std::size_t>(vocab_size()), 0.0);
    if (t == 0) return first_;
    if (is_trigger(x[t])) {
      p[static_cast<std::size_t>(x[t - 1])] = 1.0;
      return p;
    }
    const double* row = cond_.data() + static_cast<int64_t>(x[t]) * vocab_size();
    return std::vector<double>(row, row + vocab_size());
  }

  // One sequence of length T + 1.
  std::vector<int32_t> sample_sequence(Rng& rng) const {
    std::vector<int32_t> seq;
    seq.reserve(static_cast<std::size_t>(cfg_.seq_len + 1));
    seq.push_back(bos());
    seq.push_back(draw(first_cdf_, rng));
    while (static_cast<int64_t>(seq.size()) < cfg_.seq_len + 1) {
      const int32_t last = seq.back();
      if (is_trigger(last)) {
        seq.push_back(seq[seq.size() - 2]);
      } else {
        seq.push_back(draw(cond_cdf_[static_cast<std::size_t>(last)], rng));
      }
    }
    return seq;
  }

  // A fresh batch. Row b is drawn from its own counter-based stream keyed by one draw from
  // `rng`, so the batch depends only on the state of `rng`, not on the thread count.
  TokenBatch sample(Rng& rng, int64_t batch) const {
    SINKLAB_CHECK(batch >= 1, "BigramBackcopy::sample: batch must be >= 1, got ", batch);
    const int64_t T = cfg_.seq_len;
    TokenBatch b{Tensor<int32_t>::empty({batch, T}), Tensor<int32_t>::empty({batch, T})};
    const uint64_t key = rng.next_u64();
    int32_t* x = b.x.data();
    int32_t* y = b.y.data();
    parallel_for(0, batch, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        Rng row(key, static_cast<uint64_t>(r));
        const auto seq = sample_sequence(row);
        std::copy(seq.begin(), seq.end() - 1, x + r * T);
        std::copy(seq.begin() + 1, seq.end(), y + r * T);
      }
    });
    return b;
  }

  // 1 where x[b, t] is a trigger (y[b, t] is then a backcopy), else 0. [B, T]
  Tensor<float> trigger_mask(const Tensor<int32_t>& x) const {
    return mask(x, [&](const int32_t* row, int64_t t) { return t >= 1 && is_trigger(row[t]); });
  }
  // 1 where y[b, t] follows the bigram of x[b, t] (non-trigger, t >= 1), else 0. [B, T]
  Tensor<float> bigram_mask(const Tensor<int32_t>& x) const {
    return mask(x, [&](const int32_t* row, int64_t t) { return t >= 1 && !is_trigger(row[t]) && row[t] < n_chars_; });
  }

  // Bigram and backcopy risks of next-token logits [B, T, vocab] (any real type).
  template <class L>
  BigramBackcopyRisk risk(const Tensor<int32_t>& x, const Tensor<int32_t>& y, const Tensor<L>& logits) const {
    const int64_t V = vocab_size();
    SINKLAB_CHECK(x.rank() == 2 && y.shape() == x.shape(), "BigramBackcopy::risk: x ", x.shape(), " and y ",
                  y.shape(), " must both be [B, T]");
    SINKLAB_CHECK(logits.rank() == 3 && logits.size(0) == x.size(0) && logits.size(1) == x.size(1) &&
                      logits.size(2) == V,
                  "BigramBackcopy::risk: logits ", logits.shape(), " must be [", x.size(0), ", ", x.size(1), ", ", V,
                  "]");
    const Tensor<int32_t> xc = x.contiguous(), yc = y.contiguous();
    const Tensor<L> lc = logits.contiguous();
    const int64_t B = x.size(0), T = x.size(1);
    BigramBackcopyRisk r;
    std::vector<double> logp(static_cast<std::size_t>(V));
    for (int64_t b = 0; b < B; ++b) {
      const int32_t* xr = xc.data() + b * T;
      for (int64_t t = 1; t < T; ++t) {
        const L* z = lc.data() + (b * T + t) * V;
        double mx = -std::numeric_limits<double>::infinity(), s = 0;
        for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(z[v]));
        for (int64_t v = 0; v < V; ++v) s += std::exp(double(z[v]) - mx);
        const double lse = mx + std::log(s);
        for (int64_t v = 0; v < V; ++v) logp[v] = double(z[v]) - lse;
        if (is_trigger(xr[t])) {
          r.backcopy -= logp[static_cast<std::size_t>(yc.data()[b * T + t])];
          ++r.backcopy_positions;
        } else if (xr[t] < n_chars_) {
          const double* p = cond_.data() + static_cast<int64_t>(xr[t]) * V;
          double kl = 0;
          for (int64_t v = 0; v < V; ++v)
            if (p[v] > 0) kl += p[v] * (std::log(p[v]) - logp[v]);
          r.bigram += kl;
          ++r.bigram_positions;
        }
      }
    }
    if (r.backcopy_positions) r.backcopy /= double(r.backcopy_positions);
    if (r.bigram_positions) r.bigram /= double(r.bigram_positions);
    return r;
  }

 private:
  void build_vocabulary(std::string_view text) {
    std::array<int64_t, 256> freq{};
    for (char c : text) ++freq[static_cast<uint8_t>(c)];
    std::vector<int> present;
    for (int c = 0; c < 256; ++c)
      if (freq[c] > 0) present.push_back(c);
    SINKLAB_CHECK(static_cast<int>(present.size()) > cfg_.num_triggers,
                  "BigramBackcopy: the text has ", present.size(), " distinct characters; need more than the ",
                  cfg_.num_triggers, " triggers");
    auto by_freq = [&](int a, int b) { return freq[a] != freq[b] ? freq[a] > freq[b] : a < b; };
    std::stable_sort(present.begin(), present.end(), by_freq);
    if (static_cast<int>(present.size()) > cfg_.num_chars) present.resize(static_cast<std::size_t>(cfg_.num_chars));
    std::vector<int> triggers(present.begin(), present.begin() + cfg_.num_triggers);
    std::sort(present.begin(), present.end());
    n_chars_ = static_cast<int>(present.size());
    token_of_.fill(-1);
    for (int i = 0; i < n_chars_; ++i) {
      chars_.push_back(static_cast<char>(present[static_cast<std::size_t>(i)]));
      token_of_[static_cast<std::size_t>(present[static_cast<std::size_t>(i)])] = i;
    }
    is_trigger_.assign(static_cast<std::size_t>(n_chars_), false);
    for (int c : triggers) {
      const int32_t t = token_of_[static_cast<std::size_t>(c)];
      triggers_.push_back(t);
      is_trigger_[static_cast<std::size_t>(t)] = true;
    }
    std::sort(triggers_.begin(), triggers_.end());
  }

  void build_statistics(std::string_view text) {
    const int64_t V = vocab_size();
    counts_ = Tensor<int64_t>::zeros({V, V});
    marginal_.assign(static_cast<std::size_t>(V), 0.0);
    int64_t total = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const int32_t a = token_of_[static_cast<uint8_t>(text[i])];
      if (a < 0) continue;
      marginal_[static_cast<std::size_t>(a)] += 1.0;
      ++total;
      if (i + 1 < text.size()) {
        const int32_t b = token_of_[static_cast<uint8_t>(text[i + 1])];
        if (b >= 0) counts_(a, b) += 1;
      }
    }
    for (double& m : marginal_) m /= double(total);

    cond_ = Tensor<double>::zeros({V, V});
    for (int64_t a = 0; a < n_chars_; ++a) {
      int64_t row = 0;
      for (int64_t b = 0; b < n_chars_; ++b) row += counts_(a, b);
      for (int64_t b = 0; b < n_chars_; ++b)
        cond_(a, b) = row > 0 ? double(counts_(a, b)) / double(row) : marginal_[static_cast<std::size_t>(b)];
    }
    for (int64_t b = 0; b < V; ++b) cond_(bos(), b) = marginal_[static_cast<std::size_t>(b)];

    first_ = marginal_;
    double keep = 0;
    for (int32_t t : triggers_) first_[static_cast<std::size_t>(t)] = 0;
    for (double p : first_) keep += p;
    for (double& p : first_) p /= keep;

    first_cdf_ = cumulative(first_.data());
    for (int64_t a = 0; a < V; ++a) cond_cdf_.push_back(cumulative(cond_.data() + a * V));
  }

  std::vector<double> cumulative(const double* p) const {
    std::vector<double> c(static_cast<std::size_t>(vocab_size()));
    double acc = 0;
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = acc += p[i];
    return c;
  }
  // Inverse-CDF draw; a zero-probability token is never returned since the CDF does not rise there.
  static int32_t draw(const std::vector<double>& cdf, Rng& rng) {
    const double u = rng.uniform() * cdf.back();
    return static_cast<int32_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  }

  template <class Pred>
  Tensor<float> mask(const Tensor<int32_t>& x, Pred pred) const {
    SINKLAB_CHECK(x.rank() == 2, "BigramBackcopy: expected x of shape [B, T], got ", x.shape());
    const Tensor<int32_t> xc = x.contiguous();
    const int64_t B = x.size(0), T = x.size(1);
    Tensor<float> m = Tensor<float>::zeros({B, T});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) m(b, t) = pred(xc.data() + b * T, t) ? 1.f : 0.f;
    return m;
  }

  BigramBackcopyConfig cfg_;
  int n_chars_ = 0;
  std::vector<char> chars_;
  std::array<int32_t, 256> token_of_{};
  std::vector<bool> is_trigger_;
  std::vector<int32_t> triggers_;
  Tensor<int64_t> counts_;
  Tensor<double> cond_;
  std::vector<double> marginal_, first_, first_cdf_;
  std::vector<std::vector<double>> cond_cdf_;
};

}  // namespace sinklab::data
