// The byte and word tokenizers: bytes round-trip exactly; a word vocabulary built from the first
// half of the input encodes the second half to ids inside it, and decodes them to words of it.
#include "fuzz_target.hpp"
#include "sinklab/data/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  const std::string_view text = sinklab_fuzz::as_text(data, size);
  data::ByteTokenizer bytes;
  sinklab_fuzz::require(bytes.decode(bytes.encode(text)) == text, "bytes round-trip");

  const std::string_view corpus = text.substr(0, size / 2), other = text.substr(size / 2);
  const int64_t max_size = size > 0 ? data[0] % 8 : 0;
  sinklab_fuzz::refused_is_fine([&] {
    data::WordTokenizer words(corpus, {.min_count = 1 + (size > 1 ? data[1] % 3 : 0), .max_size = max_size});
    sinklab_fuzz::require(max_size == 0 || words.vocab_size() <= max_size, "vocabulary within max_size");
    const std::vector<int32_t> ids = words.encode(other);
    sinklab_fuzz::require(ids.size() == data::split_words(other).size(), "one id per word");
    for (int32_t id : ids) sinklab_fuzz::require(id >= 0 && id < words.vocab_size(), "ids inside the vocabulary");
    (void)words.decode(ids);
  });
  return 0;
}
