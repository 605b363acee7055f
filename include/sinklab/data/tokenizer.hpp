// Two tokenisers: bytes (256 ids, lossless on any text) and whitespace-separated words with a
// frequency-ranked vocabulary built from a corpus (id 0 = <unk>).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab::data {

class ByteTokenizer {
 public:
  static constexpr int vocab_size() { return 256; }
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<uint8_t>(text[i]);
    return ids;
  }
  template <class Ints>
  std::string decode(const Ints& ids) const {
    std::string s;
    for (auto id : ids) {
      SINKLAB_CHECK(id >= 0 && id < 256, "ByteTokenizer::decode: id ", static_cast<int64_t>(id),
                    " is outside [0, 256)");
      s += static_cast<char>(static_cast<uint8_t>(id));
    }
    return s;
  }
};

// The words of a text: maximal runs of non-whitespace (space, tab, newline, CR, FF, VT).
inline std::vector<std::string_view> split_words(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

struct WordTokenizerConfig {
  int64_t min_count = 1;  // words seen fewer times map to <unk>
  int64_t max_size = 0;   // vocabulary size including <unk>; 0 = no limit
};

class WordTokenizer {
 public:
  static constexpr int32_t kUnk = 0;
  static constexpr const char* kUnkText = "<unk>";

  // Vocabulary: <unk>, then words by decreasing count (ties: byte-wise order), keeping those
  // with count >= min_count, up to max_size entries in all.
  explicit WordTokenizer(std::string_view corpus, WordTokenizerConfig cfg = {}) {
    SINKLAB_CHECK(cfg.min_count >= 1, "WordTokenizer: min_count must be >= 1, got ", cfg.min_count);
    SINKLAB_CHECK(cfg.max_size == 0 || cfg.max_size >= 1, "WordTokenizer: max_size must be 0 or >= 1, got ",
                  cfg.max_size);
    std::unordered_map<std::string_view, int64_t> counts;
    for (std::string_view w : split_words(corpus)) ++counts[w];
    std::vector<std::pair<std::string_view, int64_t>> ranked(counts.begin(), counts.end());
    std::sort(ranked.begin(), ranked.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    words_.push_back(kUnkText);
    counts_.push_back(0);
    for (const auto& [w, n] : ranked) {
      if (n < cfg.min_count) break;
      if (cfg.max_size > 0 && static_cast<int64_t>(words_.size()) >= cfg.max_size) break;
      if (w == kUnkText) continue;  // the literal text "<unk>" is the unknown token
      words_.emplace_back(w);
      counts_.push_back(n);
    }
    for (std::size_t i = 0; i < words_.size(); ++i) index_[words_[i]] = static_cast<int32_t>(i);
  }

  int64_t vocab_size() const { return static_cast<int64_t>(words_.size()); }
  int32_t unk() const { return kUnk; }
  // Corpus count of a vocabulary entry (0 for <unk>).
  int64_t count(int32_t id) const { return counts_.at(check_id(id)); }
  const std::string& word(int32_t id) const { return words_[check_id(id)]; }
  int32_t id(std::string_view w) const {
    auto it = index_.find(std::string(w));
    return it == index_.end() ? kUnk : it->second;
  }
  bool contains(std::string_view w) const { return index_.count(std::string(w)) != 0; }

  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    for (std::string_view w : split_words(text)) ids.push_back(id(w));
    return ids;
  }
  // Words joined by single spaces (the whitespace layout of the input is not kept).
  template <class Ints>
  std::string decode(const Ints& ids) const {
    std::string s;
    bool first = true;
    for (auto i : ids) {
      if (!first) s += ' ';
      s += word(static_cast<int32_t>(i));
      first = false;
    }
    return s;
  }

 private:
  std::size_t check_id(int32_t id) const {
    SINKLAB_CHECK(id >= 0 && id < vocab_size(), "WordTokenizer: id ", id, " is outside [0, ", vocab_size(), ")");
    return static_cast<std::size_t>(id);
  }

  std::vector<std::string> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<std::string, int32_t> index_;
};

}  // namespace sinklab::data
