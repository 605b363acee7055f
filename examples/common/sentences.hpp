// What the language-model examples read: --text FILE (one sentence per line), the built-in
// smoke-test sentences (--smoke: no network, no corpus; for CTest), or --corpus: the Brown corpus
// and the prose documents scripts/fetch-data.sh fetches, with a message that says how to fetch
// a text when it is missing.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/data/brown.hpp"
#include "sinklab/data/cache_dir.hpp"
#include "sinklab/data/prose.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/io/files.hpp"

namespace examples {

inline const char* kSmokeText =
    "the quick brown fox jumps over the lazy dog while seven tired owls watch from an old oak tree .\n"
    "a small boat drifts along the quiet river ; the ferryman hums , counts his coins and waits .\n"
    "every morning the baker opens her shop at six , and the smell of fresh bread fills the street .\n"
    "the old man said that the river was high and the boat would wait for the morning .\n"
    "she opens the door , and the dog runs into the street to watch the boat on the river .\n";

struct Sentences {
  std::vector<std::string> lines;
  std::string source;  // what the text is, for the log and run.json
};

// Exits with status 2 and a hint when the Brown corpus is needed and missing.
inline Sentences load_sentences(const char* program, const std::string& text_file, const std::string& brown_dir,
                                bool smoke) {
  namespace fs = std::filesystem;
  using namespace sinklab;
  Sentences s;
  if (!text_file.empty()) {
    SINKLAB_CHECK(fs::exists(text_file), program, ": --text '", text_file, "' does not exist (expected a plain-text file)");
    s.lines = data::nonempty_lines(io::read_file_text(text_file));
    s.source = "file " + text_file;
  } else if (smoke) {
    for (int rep = 0; rep < 12; ++rep)
      for (auto& l : data::nonempty_lines(kSmokeText)) s.lines.push_back(l);
    s.source = "the built-in smoke-test sentences (--smoke; NOT the Brown corpus, results are meaningless)";
  } else {
    std::optional<fs::path> dir;
    if (!brown_dir.empty()) dir = fs::path(brown_dir);
    try {
      data::find_brown_files(dir);
    } catch (const Error& e) {
      std::fprintf(stderr,
                   "%s: the Brown corpus is missing.\n  %s\n"
                   "  Fetch it with `scripts/fetch-data.sh brown`, point --brown-dir at it, or train on any plain\n"
                   "  text (one sentence per line) with --text FILE.\n",
                   program, e.what());
      std::exit(2);
    }
    s.lines = data::load_brown_sentences(dir);
    s.source = "Brown corpus (" + std::to_string(s.lines.size()) + " sentences)";
  }
  return s;
}

// The texts --corpus can name, and the same as a list for messages ("brown, sotu, moby-dick").
inline const std::vector<std::string> kCorpusTexts = {"brown", "sotu", "moby-dick"};
inline std::string corpus_texts_listed() {
  std::string s;
  for (const auto& t : kCorpusTexts) s += (s.empty() ? "" : ", ") + t;
  return s;
}

// The texts --corpus names (kCorpusTexts), in that order: Brown's sentences and the prose
// documents, each document closed by an <eod> word (Brown comes as sentences without its
// document boundaries). --text and --smoke take precedence. Every name is checked before anything
// is read; a missing text exits with status 2 and the fetch command.
inline Sentences load_corpus(const char* program, const std::vector<std::string>& parts, const std::string& text_file,
                             const std::string& brown_dir, bool smoke) {
  namespace fs = std::filesystem;
  using namespace sinklab;
  if (smoke || !text_file.empty()) return load_sentences(program, text_file, brown_dir, smoke);
  SINKLAB_CHECK(!parts.empty(), program, ": --corpus names no text (known: ", corpus_texts_listed(), ")");
  for (const auto& part : parts)
    SINKLAB_CHECK(std::find(kCorpusTexts.begin(), kCorpusTexts.end(), part) != kCorpusTexts.end(), program,
                  ": --corpus: unknown text '", part, "' (known: ", corpus_texts_listed(), ")");
  Sentences out;
  for (const auto& part : parts) {
    if (part == "brown") {
      Sentences b = load_sentences(program, "", brown_dir, false);
      out.lines.insert(out.lines.end(), b.lines.begin(), b.lines.end());
      out.source += (out.source.empty() ? "" : " + ") + b.source;
      continue;
    }
    const fs::path dir = data::data_cache_dir() / part;
    if (!fs::is_directory(dir)) {
      std::fprintf(stderr, "%s: --corpus %s: %s is missing; fetch it with `scripts/fetch-data.sh %s`\n", program,
                   part.c_str(), dir.string().c_str(), part.c_str());
      std::exit(2);
    }
    const auto docs = data::load_prose_documents(dir);
    std::size_t n = 0;
    for (auto doc : docs) {
      doc.back() += " <eod>";
      n += doc.size();
      out.lines.insert(out.lines.end(), doc.begin(), doc.end());
    }
    out.source += (out.source.empty() ? "" : " + ") + part + " (" + std::to_string(docs.size()) + " documents, " +
                  std::to_string(n) + " sentences)";
  }
  return out;
}

}  // namespace examples
