// What the language-model examples read: --text FILE (one sentence per line), the built-in
// smoke-test sentences (--smoke: no network, no corpus; for CTest), or the Brown corpus, with a
// message that says how to fetch it when it is missing.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/data/brown.hpp"
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

}  // namespace examples
