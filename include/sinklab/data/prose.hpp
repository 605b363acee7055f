// Plain English prose (one document per .txt file, as scripts/fetch-data.sh leaves the State of
// the Union addresses and Moby-Dick) as the sentences the word-level language models read, in
// the Brown corpus' style: lowercase is left to data::make_word_lm, punctuation split off the
// words ("ishmael." → "ishmael ."), one sentence per line.
//
//   auto docs = data::load_prose_documents(cache / "sotu");   // [document][sentence]
//   auto lines = data::prose_sentences("Call me Ishmael. Some years ago—never mind how long...");
//
// The splitter is deliberately simple (no abbreviation list): a sentence ends at '.', '!' or '?'
// followed by white space (closing quotes and brackets between stay with it), and at a blank line. "Mr." therefore ends a sentence; the word-level
// models only see a stream of sentences, so a false boundary costs nothing but a line break.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/io/files.hpp"

namespace sinklab::data {

inline std::vector<std::string> prose_sentences(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == ' ') cur.pop_back();
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  auto space = [&] {
    if (!cur.empty() && cur.back() != ' ') cur += ' ';
  };
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n' && i + 1 < text.size() && text[i + 1] == '\n') {  // a blank line ends a paragraph
      flush();
      continue;
    }
    if (ws(c)) {
      space();
      continue;
    }
    // The em dash (UTF-8 E2 80 94) and "--" separate words.
    if ((c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && text[i + 2] == '\x94') ||
        (c == '-' && i + 1 < text.size() && text[i + 1] == '-')) {
      space();
      cur += "--";
      space();
      i += c == '-' ? 1 : 2;
      continue;
    }
    const auto digit = [&](std::size_t j) { return j < text.size() && text[j] >= '0' && text[j] <= '9'; };
    if ((c == '.' || c == ',') && i > 0 && digit(i - 1) && digit(i + 1)) {  // 3.5, 1,000
      cur += c;
      continue;
    }
    if (std::string_view(",;:()\"!?.").find(c) != std::string_view::npos) {
      space();
      cur += c;
      space();
      if (c == '.' || c == '!' || c == '?') {
        // The sentence ends when white space (or the end) follows, after any closing quotes and
        // brackets, which stay with it ('"Why?" He' ends after the quote).
        std::size_t j = i + 1;
        while (j < text.size() && (text[j] == '"' || text[j] == ')')) ++j;
        if (j == text.size() || ws(text[j])) {
          for (std::size_t k = i + 1; k < j; ++k) cur += text[k], space();
          flush();
          i = j - 1;
        }
      }
      continue;
    }
    cur += c;
  }
  flush();
  return out;
}

// Every *.txt file of `dir`, in name order, each split into sentences.
inline std::vector<std::vector<std::string>> load_prose_documents(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  SINKLAB_CHECK(fs::is_directory(dir), "data::load_prose_documents: '", dir.string(), "' is not a folder");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  SINKLAB_CHECK(!files.empty(), "data::load_prose_documents: '", dir.string(), "' holds no .txt document");
  std::sort(files.begin(), files.end());
  std::vector<std::vector<std::string>> docs;
  for (const auto& f : files) {
    auto s = prose_sentences(io::read_file_text(f));
    if (!s.empty()) docs.push_back(std::move(s));
  }
  return docs;
}

}  // namespace sinklab::data
