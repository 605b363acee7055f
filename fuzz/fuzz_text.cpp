// The plain-text language-model path the examples' --text flag takes: non-empty lines, a
// seeded train/validation split, a word vocabulary, token streams and windows over them.
#include "fuzz_target.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/data/word_lm.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  if (size < 1) return 0;
  const int64_t vocab = 3 + data[0] % 64;  // the first byte picks the vocabulary size
  const std::string text(sinklab_fuzz::as_text(data + 1, size - 1));
  sinklab_fuzz::refused_is_fine([&] {
    const auto lines = data::nonempty_lines(text);
    const data::WordLmCorpus c = data::make_word_lm(lines, {.vocab = vocab, .specials = 1});
    sinklab_fuzz::require(c.vocab <= vocab, "the vocabulary stays within its size");
    for (int32_t t : c.train) sinklab_fuzz::require(t >= 0 && t < c.vocab, "train ids lie in [0, vocab)");
    for (int32_t t : c.validation) sinklab_fuzz::require(t >= 0 && t < c.vocab, "validation ids lie in [0, vocab)");
    Rng rng(3);
    const data::TokenBatch b = data::sample_lm_windows(c.train, rng, 2, 4, 0);
    sinklab_fuzz::require(b.x.numel() == 8 && b.y.numel() == 8, "a batch has the requested shape");
  });
  return 0;
}
