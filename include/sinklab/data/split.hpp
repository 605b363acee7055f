// Deterministic train/validation splits and seeded batching.
//
// Everything here is a pure function of its seed: the permutation of epoch e is drawn from
// Rng(seed, e), so a run resumed at epoch e sees the same batches as an uninterrupted one.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/data/token_batch.hpp"

namespace sinklab::data {

// Fisher-Yates shuffle driven by a sinklab::Rng.
template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(rng.randint(0, i + 1))]);
}

inline std::vector<int64_t> permutation(int64_t n, Rng& rng) {
  std::vector<int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  shuffle(p, rng);
  return p;
}

struct SplitIndices {
  std::vector<int64_t> train, validation;  // each sorted ascending
};

// A random split of indices 0..n-1: round(n · val_fraction) go to validation.
inline SplitIndices split_indices(int64_t n, double val_fraction, uint64_t seed) {
  SINKLAB_CHECK(n >= 0, "data::split_indices: negative size ", n);
  SINKLAB_CHECK(val_fraction >= 0.0 && val_fraction <= 1.0, "data::split_indices: val_fraction ", val_fraction,
                " is outside [0, 1]");
  Rng rng(seed, 0x5e1170);
  auto p = permutation(n, rng);
  const auto n_val = static_cast<std::ptrdiff_t>(std::llround(double(n) * val_fraction));
  SplitIndices s{std::vector<int64_t>(p.begin() + n_val, p.end()), std::vector<int64_t>(p.begin(), p.begin() + n_val)};
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.validation.begin(), s.validation.end());
  return s;
}

// A token stream split in two contiguous parts (the last val_fraction is validation), so no
// window of one part overlaps the other.
template <class T>
std::pair<std::vector<T>, std::vector<T>> split_stream(const std::vector<T>& tokens, double val_fraction) {
  SINKLAB_CHECK(val_fraction >= 0.0 && val_fraction <= 1.0, "data::split_stream: val_fraction ", val_fraction,
                " is outside [0, 1]");
  const auto n_train = static_cast<std::ptrdiff_t>(
      static_cast<int64_t>(tokens.size()) - std::llround(double(tokens.size()) * val_fraction));
  return {std::vector<T>(tokens.begin(), tokens.begin() + n_train), std::vector<T>(tokens.begin() + n_train, tokens.end())};
}

// Rows `indices` of `src` along axis 0, as a new contiguous tensor.
template <class T>
Tensor<T> gather_rows(const Tensor<T>& src, const std::vector<int64_t>& indices) {
  SINKLAB_CHECK(src.rank() >= 1, "data::gather_rows: needs a tensor of rank >= 1, got ", src.shape());
  const Tensor<T> c = src.contiguous();
  const int64_t n = src.size(0), row = n > 0 ? c.numel() / n : 0;
  Tensor<T> out = Tensor<T>::empty(src.shape().with(0, static_cast<int64_t>(indices.size())));
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    SINKLAB_CHECK(i >= 0 && i < n, "data::gather_rows: index ", i, " out of range for ", n, " rows");
    std::copy(c.data() + i * row, c.data() + (i + 1) * row, out.data() + static_cast<int64_t>(k) * row);
  }
  return out;
}

// Batches of indices into a dataset of n items (or into a subset), reshuffled every epoch.
class IndexBatcher {
 public:
  IndexBatcher(std::vector<int64_t> items, int64_t batch, uint64_t seed, bool drop_last = false)
      : items_(std::move(items)), batch_(batch), seed_(seed), drop_last_(drop_last) {
    SINKLAB_CHECK(batch >= 1, "data::IndexBatcher: batch must be >= 1, got ", batch);
    SINKLAB_CHECK(!items_.empty(), "data::IndexBatcher: no items to batch");
    SINKLAB_CHECK(!drop_last || static_cast<int64_t>(items_.size()) >= batch, "data::IndexBatcher: ", items_.size(),
                  " items cannot fill one batch of ", batch, " with drop_last");
    start_epoch(0);
  }
  IndexBatcher(int64_t n, int64_t batch, uint64_t seed, bool drop_last = false)
      : IndexBatcher(iota(n), batch, seed, drop_last) {}

  int64_t batches_per_epoch() const {
    const auto n = static_cast<int64_t>(items_.size());
    return drop_last_ ? n / batch_ : (n + batch_ - 1) / batch_;
  }
  int64_t epoch() const { return epoch_; }

  // Indices of the next batch; the last batch of an epoch may be short unless drop_last.
  std::vector<int64_t> next() {
    if (pos_ >= batches_per_epoch()) start_epoch(epoch_ + 1);
    const auto begin = static_cast<std::size_t>(pos_ * batch_);
    const auto end = std::min(order_.size(), begin + static_cast<std::size_t>(batch_));
    ++pos_;
    return std::vector<int64_t>(order_.begin() + static_cast<std::ptrdiff_t>(begin),
                                order_.begin() + static_cast<std::ptrdiff_t>(end));
  }

  // Jump to the beginning of an epoch (e.g. when resuming).
  void start_epoch(int64_t e) {
    epoch_ = e;
    pos_ = 0;
    Rng rng(seed_, static_cast<uint64_t>(e));
    order_ = items_;
    shuffle(order_, rng);
  }

 private:
  static std::vector<int64_t> iota(int64_t n) {
    SINKLAB_CHECK(n >= 1, "data::IndexBatcher: dataset size must be >= 1, got ", n);
    std::vector<int64_t> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), int64_t{0});
    return v;
  }

  std::vector<int64_t> items_, order_;
  int64_t batch_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0, pos_ = 0;
};

// Next-token batches from one long token array: random windows of T + 1 tokens,
// x = window[:-1], y = window[1:].
class TokenStreamBatcher {
 public:
  TokenStreamBatcher(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t seq_len, uint64_t seed)
      : tokens_(std::move(tokens)), T_(seq_len), rng_(seed, 0x57AEA4) {
    SINKLAB_CHECK(tokens_ && T_ >= 1, "data::TokenStreamBatcher: needs tokens and seq_len >= 1");
    SINKLAB_CHECK(static_cast<int64_t>(tokens_->size()) >= T_ + 1, "data::TokenStreamBatcher: a stream of ",
                  tokens_->size(), " tokens is too short for windows of seq_len + 1 = ", T_ + 1);
  }
  TokenStreamBatcher(std::vector<int32_t> tokens, int64_t seq_len, uint64_t seed)
      : TokenStreamBatcher(std::make_shared<const std::vector<int32_t>>(std::move(tokens)), seq_len, seed) {}

  int64_t seq_len() const { return T_; }
  // Number of distinct window starts.
  int64_t num_windows() const { return static_cast<int64_t>(tokens_->size()) - T_; }

  // B windows with independent uniform starts.
  TokenBatch sample(int64_t batch) {
    SINKLAB_CHECK(batch >= 1, "data::TokenStreamBatcher::sample: batch must be >= 1, got ", batch);
    std::vector<int64_t> starts(static_cast<std::size_t>(batch));
    for (auto& s : starts) s = rng_.randint(0, num_windows());
    return windows(starts);
  }

  // Consecutive non-overlapping windows (for a validation pass over the whole stream):
  // batch k holds windows k·B ... k·B + B − 1; returns an empty list past the end.
  std::vector<TokenBatch> sequential(int64_t batch, int64_t max_batches = -1) const {
    SINKLAB_CHECK(batch >= 1, "data::TokenStreamBatcher::sequential: batch must be >= 1, got ", batch);
    const int64_t n_windows = (static_cast<int64_t>(tokens_->size()) - 1) / T_;
    std::vector<TokenBatch> out;
    for (int64_t w = 0; w < n_windows && (max_batches < 0 || static_cast<int64_t>(out.size()) < max_batches);
         w += batch) {
      std::vector<int64_t> starts;
      for (int64_t k = w; k < std::min(n_windows, w + batch); ++k) starts.push_back(k * T_);
      out.push_back(windows(starts));
    }
    return out;
  }

  TokenBatch windows(const std::vector<int64_t>& starts) const {
    const auto B = static_cast<int64_t>(starts.size());
    TokenBatch b{Tensor<int32_t>::empty({B, T_}), Tensor<int32_t>::empty({B, T_})};
    for (int64_t r = 0; r < B; ++r) {
      const int64_t s = starts[static_cast<std::size_t>(r)];
      SINKLAB_CHECK(s >= 0 && s + T_ + 1 <= static_cast<int64_t>(tokens_->size()),
                    "data::TokenStreamBatcher: window start ", s, " out of range");
      const int32_t* p = tokens_->data() + s;
      std::copy(p, p + T_, b.x.data() + r * T_);
      std::copy(p + 1, p + T_ + 1, b.y.data() + r * T_);
    }
    return b;
  }

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t T_;
  Rng rng_;
};

}  // namespace sinklab::data
