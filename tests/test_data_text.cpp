// Tokenisers, the Brown corpus and prose loaders and the word-level language-modelling corpus.
#include <doctest/doctest.h>

#include "skip.hpp"
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "sinklab/data/brown.hpp"
#include "sinklab/data/prose.hpp"
#include "sinklab/data/tokenizer.hpp"
#include "sinklab/data/word_lm.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

TEST_CASE("tokenizer: bytes round-trip any text, including non-ASCII and NUL") {
  data::ByteTokenizer tok;
  const std::string text = std::string("héllo\tworld\n") + '\0' + "\xff\x80 end";
  auto ids = tok.encode(text);
  CHECK(ids.size() == text.size());
  CHECK(ids[1] == 0xC3);  // first byte of é in UTF-8
  for (int32_t id : ids) CHECK((id >= 0 && id < 256));
  CHECK(tok.decode(ids) == text);
  CHECK_THROWS_AS(tok.decode(std::vector<int32_t>{65, 256}), Error);
  CHECK_THROWS_AS(tok.decode(std::vector<int32_t>{-1}), Error);
}

TEST_CASE("tokenizer: word vocabulary by frequency with min count and <unk>") {
  const std::string corpus = "the cat sat on the mat .\nthe dog sat .\n  a cat !";
  data::WordTokenizer tok(corpus);
  // counts: the 3, cat 2, sat 2, . 2, then singletons.
  CHECK(tok.word(0) == "<unk>");
  CHECK(tok.word(1) == "the");
  CHECK(tok.count(1) == 3);
  std::set<std::string> second{tok.word(2), tok.word(3), tok.word(4)};
  CHECK(second == std::set<std::string>{"cat", "sat", "."});
  CHECK(tok.word(2) == ".");  // ties broken byte-wise: "." < "cat" < "sat"
  CHECK(tok.vocab_size() == 1 + 9);
  const std::string text = "the dog sat on a mat !";
  CHECK(tok.decode(tok.encode(text)) == text);  // every word known: exact round trip
  CHECK(tok.decode(tok.encode("  the\tcat\n\nsat  ")) == "the cat sat");  // whitespace normalised
  auto ids = tok.encode("the zebra sat");
  CHECK(ids == std::vector<int32_t>{tok.id("the"), tok.unk(), tok.id("sat")});
  CHECK(tok.decode(ids) == "the <unk> sat");

  data::WordTokenizer frequent(corpus, {.min_count = 2});
  CHECK(frequent.vocab_size() == 5);
  CHECK_FALSE(frequent.contains("dog"));
  CHECK(frequent.encode("dog")[0] == frequent.unk());
  data::WordTokenizer capped(corpus, {.max_size = 3});
  CHECK(capped.vocab_size() == 3);
  CHECK(capped.word(2) == ".");
  CHECK_THROWS_AS(tok.word(99), Error);
}

TEST_CASE("brown: tags are stripped at the last slash, sentences one per line") {
  CHECK(data::strip_brown_tags("\tThe/at Fulton/np-tl County/nn-tl said/vbd ./.") == "The Fulton County said .");
  CHECK(data::strip_brown_tags("1-1/2/cd ``/`` it's/pps+bez ''/''  ") == "1-1/2 `` it's ''");
  CHECK(data::strip_brown_tags("   ") == "");
  CHECK(data::strip_brown_tags("untagged word/x") == "untagged word");

  const fs::path dir = fs::temp_directory_path() / ("sinklab_brown_" + std::to_string(::getpid()));
  fs::create_directories(dir / "package");
  {
    std::ofstream(dir / "package" / "ca01") << "\n\n\tThe/at jury/nn said/vbd ./.\n\n\n\tIt/pps ran/vbd ./.\n";
    std::ofstream(dir / "package" / "cb02") << "\n\tNo/at news/nn ./.\n";
    std::ofstream(dir / "package" / "README") << "not/a corpus/file\n";
    std::ofstream(dir / "package" / "cats.txt") << "ca01 news\n";
  }
  auto files = data::find_brown_files(dir);  // found under package/
  REQUIRE(files.size() == 2);
  CHECK(files[0].filename() == "ca01");
  auto sentences = data::load_brown_sentences(dir);
  CHECK(sentences == std::vector<std::string>{"The jury said .", "It ran .", "No news ."});
  CHECK(data::load_brown_text(dir) == "The jury said .\nIt ran .\nNo news .\n");
  CHECK(data::load_brown_sentences(dir, {.categories = "b"}) == std::vector<std::string>{"No news ."});
  CHECK(data::load_brown_sentences(dir, {.max_files = 1}).size() == 2);
  CHECK_THROWS_WITH_AS(data::load_brown_sentences(dir, {.categories = "r"}), doctest::Contains("categories 'r'"),
                       Error);
  fs::remove_all(dir);

  // Damaged corpora: empty files, binary garbage, a directory named like a corpus file.
  fs::create_directories(dir / "ca02");
  { std::ofstream(dir / "ca01"); }
  CHECK_THROWS_WITH_AS(data::load_brown_sentences(dir), doctest::Contains("hold no sentences"), Error);
  {
    std::ofstream f(dir / "ca01", std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>((i * 131 + 7) % 256));
  }
  for (const auto& s : data::load_brown_sentences(dir)) CHECK(!s.empty());
  { std::ofstream(dir / "ca01") << "/ // a/ /b ///\n"; }
  CHECK(data::load_brown_sentences(dir) == std::vector<std::string>{"/ / a /b //"});
  fs::remove_all(dir);

  // Missing corpus: the error says how to get it.
  CHECK_THROWS_WITH_AS(data::find_brown_files(dir), doctest::Contains("scripts/fetch-data.sh"), Error);
}

TEST_CASE("brown: the real corpus, when fetched" * sinklab_test::optional()) {
  std::vector<fs::path> files;
  try {
    files = data::find_brown_files();
  } catch (const Error& e) {
    SINKLAB_SKIP("Brown corpus not present (run scripts/fetch-data.sh brown): ", e.what());
  }
  CHECK(files.size() == 500);
  auto sentences = data::load_brown_sentences(std::nullopt, {.categories = "a", .max_files = 1});
  REQUIRE(!sentences.empty());
  CHECK(sentences[0].rfind("The Fulton County Grand Jury said Friday", 0) == 0);
  for (const auto& s : sentences) {
    CHECK(s.find("/at") == std::string::npos);  // no tags left
    CHECK(s.find("/nn") == std::string::npos);
  }
  const std::string text = data::load_brown_text();
  MESSAGE("Brown corpus: ", files.size(), " files, ", text.size(), " characters untagged");
  CHECK(text.size() > 5'000'000);
}

TEST_CASE("word_lm: a seeded split, a training-only vocabulary above the specials, windows after BOS") {
  std::vector<std::string> sentences;
  for (int i = 0; i < 40; ++i) sentences.push_back("The cat sat " + std::to_string(i % 7) + " .");
  const data::WordLmCorpus c = data::make_word_lm(sentences, {.vocab = 7, .specials = 2, .validation_fraction = 0.25});
  CHECK(c.vocab == 7);  // 2 specials + <unk> + the 4 most frequent words (the, cat, sat, .)
  CHECK(c.train.size() + c.validation.size() == 40 * 5);
  CHECK(c.validation.size() == 10 * 5);
  for (int32_t id : c.train) CHECK((id >= 2 && id < 7));
  CHECK(c.unk_rate == doctest::Approx(0.2));  // the digits are outside a 4-word vocabulary
  // Lowercased: "the" and "The" are one word, as frequent as "cat".
  CHECK(std::count(c.train.begin(), c.train.end(), c.train[0]) == 30);
  // Deterministic in the split seed.
  CHECK(data::make_word_lm(sentences, {.vocab = 7, .specials = 2, .validation_fraction = 0.25}).validation == c.validation);

  const std::vector<int32_t> stream = {5, 6, 7, 8, 9, 10, 11};
  const data::TokenBatch b = data::lm_windows(stream, {0, 3}, 4, 0);
  CHECK(b.x.to_vector() == std::vector<int32_t>{0, 5, 6, 7, 0, 8, 9, 10});
  CHECK(b.y.to_vector() == std::vector<int32_t>{5, 6, 7, 8, 8, 9, 10, 11});
  CHECK_THROWS_WITH_AS(data::lm_windows(stream, {4}, 4, 0), doctest::Contains("runs past the stream's 7 tokens"),
                       Error);
  const auto val = data::consecutive_lm_windows(stream, 2, 2, 10, 0);  // windows at 0, 2, 4: batches of 2 and 1
  REQUIRE(val.size() == 2);
  CHECK(val[1].x.to_vector() == std::vector<int32_t>{0, 9});
  Rng rng(3);
  const data::TokenBatch r = data::sample_lm_windows(stream, rng, 5, 7, 0);  // the only window
  CHECK(r.y.to_vector() == std::vector<int32_t>{5, 6, 7, 8, 9, 10, 11, 5, 6, 7, 8, 9, 10, 11, 5, 6, 7, 8, 9, 10, 11,
                                                5, 6, 7, 8, 9, 10, 11, 5, 6, 7, 8, 9, 10, 11});
  CHECK_THROWS_WITH_AS(data::sample_lm_windows(stream, rng, 1, 8, 0), doctest::Contains("fewer than one window"), Error);
  CHECK_THROWS_WITH_AS(data::make_word_lm({"a", "b"}), doctest::Contains("at least 10"), Error);
}

TEST_CASE("word_lm: a sentence-end special follows every sentence in both streams") {
  std::vector<std::string> sentences;
  for (int i = 0; i < 40; ++i) sentences.push_back(i % 2 ? "The cat sat ." : "A dog");
  const data::WordLmCorpus plain = data::make_word_lm(sentences, {.vocab = 16, .specials = 3, .validation_fraction = 0.25});
  const data::WordLmCorpus sep =
      data::make_word_lm(sentences, {.vocab = 16, .specials = 3, .validation_fraction = 0.25, .sentence_end = 2});
  CHECK(sep.train.size() == plain.train.size() + 30);
  CHECK(sep.validation.size() == plain.validation.size() + 10);
  CHECK(std::count(sep.train.begin(), sep.train.end(), 2) == 30);
  CHECK(sep.train.back() == 2);
  std::vector<int32_t> words;  // without the ends, the same stream
  std::copy_if(sep.train.begin(), sep.train.end(), std::back_inserter(words), [](int32_t i) { return i != 2; });
  CHECK(words == plain.train);
  for (std::size_t i = 0; i + 1 < sep.train.size(); ++i)  // every sentence has words
    if (sep.train[i + 1] == 2) CHECK(sep.train[i] != 2);
  CHECK_THROWS_WITH_AS(data::make_word_lm(sentences, {.vocab = 16, .specials = 2, .sentence_end = 2}),
                       doctest::Contains("sentence_end 2 must be one of the 2 special ids"), Error);
}

TEST_CASE("word_lm: windows without a first token are plain text and never start at 0") {
  const std::vector<int32_t> stream = {5, 6, 7, 8, 9, 10, 11};
  const int32_t none = data::kNoFirstToken;
  const data::TokenBatch b = data::lm_windows(stream, {1, 3}, 4, none);
  CHECK(b.x.to_vector() == std::vector<int32_t>{5, 6, 7, 8, 7, 8, 9, 10});
  CHECK(b.y.to_vector() == std::vector<int32_t>{6, 7, 8, 9, 8, 9, 10, 11});
  CHECK_THROWS_WITH_AS(data::lm_windows(stream, {0}, 4, none), doctest::Contains("cannot start at 0"), Error);
  const auto val = data::consecutive_lm_windows(stream, 2, 2, 10, none);  // windows at 1, 3, 5
  REQUIRE(val.size() == 2);
  CHECK(val[0].x.to_vector() == std::vector<int32_t>{5, 6, 7, 8});
  CHECK(val[1].y.to_vector() == std::vector<int32_t>{10, 11});
  CHECK(data::consecutive_lm_windows(stream, 3, 4, 10, none)[0].y.to_vector() == std::vector<int32_t>{6, 7, 8, 9, 10, 11});
  Rng rng(3);
  const data::TokenBatch r = data::sample_lm_windows(stream, rng, 3, 6, none);  // the only window starts at 1
  CHECK(r.x.to_vector() == std::vector<int32_t>{5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10});
  CHECK_THROWS_WITH_AS(data::sample_lm_windows(stream, rng, 1, 7, none), doctest::Contains("without a first token"),
                       Error);
}

TEST_CASE("prose: punctuation split off the words, a sentence per line, documents in name order") {
  const auto s = data::prose_sentences("Call me Ishmael. Some years ago\xE2\x80\x94never mind how long--precisely, I thought;\n"
                                       "\"Why?\" he asked!\n\nA new paragraph (without an end)\n\n\n");
  REQUIRE(s.size() == 4);
  CHECK(s[0] == "Call me Ishmael .");
  CHECK(s[1] == "Some years ago -- never mind how long -- precisely , I thought ; \" Why ? \"");
  CHECK(s[2] == "he asked !");
  CHECK(s[3] == "A new paragraph ( without an end )");
  CHECK(data::prose_sentences("3.5 percent of 1,000. Next") == std::vector<std::string>{"3.5 percent of 1,000 .", "Next"});
  CHECK(data::prose_sentences("  \n\n ").empty());

  const fs::path dir = fs::temp_directory_path() / ("sinklab_prose_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "b.txt") << "Second document. Two sentences.";
  std::ofstream(dir / "a.txt") << "First one.";
  std::ofstream(dir / "notes.md") << "Not a document.";
  const auto docs = data::load_prose_documents(dir);
  REQUIRE(docs.size() == 2);
  CHECK(docs[0] == std::vector<std::string>{"First one ."});
  CHECK(docs[1].size() == 2);
  fs::remove_all(dir);
  CHECK_THROWS_WITH_AS(data::load_prose_documents(dir), doctest::Contains("is not a folder"), Error);
}
