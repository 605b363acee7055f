// A word-level language-modelling corpus from sentences (the Brown corpus, or any text with one
// sentence per line), and the windows the language-model studies train and evaluate on.
//
//   data::WordLmCorpus c = data::make_word_lm(sentences, {.vocab = 4096, .specials = 2});
//   data::TokenBatch b = data::sample_lm_windows(c.train, rng, 16, 64, /*first=*/0);
//   auto val = data::consecutive_lm_windows(c.validation, 64, 16, /*max_batches=*/8, 0);
//
// The sentences are split with a fixed seed (every genre lands in both parts), lowercased, and the
// word vocabulary is built from the training part only, so validation has honest <unk>s. Token
// ids are the WordTokenizer's shifted up by `specials`: ids below it are the caller's (a BOS or
// [CLS] token, a [MASK]). A window is [first, w_s, …, w_{s+T−2}] → [w_s, …, w_{s+T−1}]: every
// sequence starts with the same `first` token, which is where attention sinks form. With `first`
// = kNoFirstToken a window is plain text, [w_{s−1}, …, w_{s+T−2}] → [w_s, …, w_{s+T−1}] (Gu et
// al.'s contrast: no fixed token at position 0).
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/data/split.hpp"
#include "sinklab/data/token_batch.hpp"
#include "sinklab/data/tokenizer.hpp"

namespace sinklab::data {

struct WordLmOptions {
  int64_t vocab = 4096;                  // including the specials
  int32_t specials = 1;                  // ids reserved below the words (BOS, [MASK], ...)
  double validation_fraction = 0.1;      // of the sentences
  uint64_t split_seed = 1234;
  // >= 0: this id, one of the specials, follows every sentence in both streams (BERT's [SEP]:
  // a token of no content at every boundary, where Bondarenko et al. find BERT's no-op heads
  // and outliers); -1: the sentences run together.
  int32_t sentence_end = -1;
};

struct WordLmCorpus {
  std::vector<int32_t> train, validation;  // token streams (word ids + specials)
  int64_t vocab = 0;                       // including the specials
  double unk_rate = 0;                     // of the validation stream
};

// The lines of a text that hold at least one word.
inline std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!split_words(line).empty()) lines.push_back(line);
  return lines;
}

inline WordLmCorpus make_word_lm(const std::vector<std::string>& sentences, const WordLmOptions& o = {}) {
  SINKLAB_CHECK(sentences.size() >= 10, "data::make_word_lm: the text has ", sentences.size(),
                " non-empty lines; at least 10 are needed for a train/validation split");
  SINKLAB_CHECK(o.specials >= 0 && o.vocab > o.specials + 1, "data::make_word_lm: vocab ", o.vocab,
                " leaves no room for words after ", o.specials, " special ids and <unk>");
  SINKLAB_CHECK(o.sentence_end < o.specials && o.sentence_end >= -1, "data::make_word_lm: sentence_end ",
                o.sentence_end, " must be one of the ", o.specials, " special ids [0, ", o.specials, ") or -1 (none)");
  const SplitIndices split = split_indices(static_cast<int64_t>(sentences.size()), o.validation_fraction, o.split_seed);
  auto join = [&](const std::vector<int64_t>& idx) {
    std::string t;
    for (int64_t i : idx) {
      for (char c : sentences[static_cast<std::size_t>(i)])
        t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      t += '\n';
    }
    return t;
  };
  const std::string train_text = join(split.train), val_text = join(split.validation);
  const WordTokenizer tok(train_text, {.max_size = o.vocab - o.specials});
  WordLmCorpus c;
  c.vocab = tok.vocab_size() + o.specials;
  auto encode = [&](const std::string& t) {
    std::vector<int32_t> ids = tok.encode(t);
    for (auto& i : ids) i += o.specials;
    return ids;
  };
  // With a sentence end, sentence by sentence (the same words as the whole text: lines split words).
  auto encode_sentences = [&](const std::string& t) {
    if (o.sentence_end < 0) return encode(t);
    std::vector<int32_t> ids;
    std::istringstream in(t);
    std::string line;
    while (std::getline(in, line)) {
      const std::vector<int32_t> words = encode(line);
      ids.insert(ids.end(), words.begin(), words.end());
      ids.push_back(o.sentence_end);
    }
    return ids;
  };
  c.train = encode_sentences(train_text);
  c.validation = encode_sentences(val_text);
  const auto unk = std::count(c.validation.begin(), c.validation.end(), o.specials + WordTokenizer::kUnk);
  c.unk_rate = c.validation.empty() ? 0.0 : double(unk) / double(c.validation.size());
  return c;
}

inline constexpr int32_t kNoFirstToken = -1;

// Windows of `stream` starting at `starts` (inputs start with `first`; targets are the words).
inline TokenBatch lm_windows(const std::vector<int32_t>& stream, const std::vector<int64_t>& starts, int64_t T,
                             int32_t first) {
  const auto B = static_cast<int64_t>(starts.size());
  TokenBatch b{Tensor<int32_t>::empty({B, T}), Tensor<int32_t>::empty({B, T})};
  for (int64_t r = 0; r < B; ++r) {
    const int64_t s = starts[static_cast<std::size_t>(r)];
    SINKLAB_CHECK(s >= 0 && s + T <= static_cast<int64_t>(stream.size()), "data::lm_windows: a window of ", T,
                  " tokens at ", s, " runs past the stream's ", stream.size(), " tokens");
    SINKLAB_CHECK(first >= 0 || s >= 1, "data::lm_windows: a window without a first token reads the word before ",
                  "its start, so it cannot start at 0");
    b.x(r, 0) = first >= 0 ? first : stream[static_cast<std::size_t>(s - 1)];
    for (int64_t t = 1; t < T; ++t) b.x(r, t) = stream[static_cast<std::size_t>(s + t - 1)];
    for (int64_t t = 0; t < T; ++t) b.y(r, t) = stream[static_cast<std::size_t>(s + t)];
  }
  return b;
}

// `batch` windows at uniformly drawn starts.
inline TokenBatch sample_lm_windows(const std::vector<int32_t>& stream, Rng& rng, int64_t batch, int64_t T,
                                    int32_t first) {
  const int64_t n = static_cast<int64_t>(stream.size()) - T;
  SINKLAB_CHECK(n >= 0, "data::sample_lm_windows: the stream has ", stream.size(), " tokens, fewer than one window of ",
                T, "; use more text or a shorter sequence length");
  const int64_t lo = first >= 0 ? 0 : 1;
  SINKLAB_CHECK(n >= lo, "data::sample_lm_windows: the stream has ", stream.size(), " tokens, too few for a window of ",
                T, " without a first token");
  std::vector<int64_t> starts(static_cast<std::size_t>(batch));
  for (auto& s : starts) s = rng.randint(lo, n + 1);
  return lm_windows(stream, starts, T, first);
}

// Non-overlapping windows from the start of `stream`, `batch` per batch, at most `max_batches`
// batches (the last may be smaller): a fixed evaluation set.
inline std::vector<TokenBatch> consecutive_lm_windows(const std::vector<int32_t>& stream, int64_t T, int64_t batch,
                                                      int64_t max_batches, int32_t first) {
  const int64_t shift = first >= 0 ? 0 : 1;  // a window without a first token reads one word before it
  const int64_t n_windows = (static_cast<int64_t>(stream.size()) - 1) / T;  // the last one ends by stream[size − 1]
  SINKLAB_CHECK(n_windows >= 1, "data::consecutive_lm_windows: the stream (", stream.size(),
                " tokens) is shorter than one sequence of ", T, " tokens; use more text or a shorter sequence length");
  std::vector<TokenBatch> out;
  for (int64_t w = 0; w < n_windows && static_cast<int64_t>(out.size()) < max_batches; w += batch) {
    std::vector<int64_t> starts;
    for (int64_t k = w; k < std::min(n_windows, w + batch); ++k) starts.push_back(k * T + shift);
    out.push_back(lm_windows(stream, starts, T, first));
  }
  return out;
}

}  // namespace sinklab::data
