// The Brown corpus reader's text path (tag stripping, sentence splitting) on arbitrary text.
#include "fuzz_target.hpp"
#include "sinklab/data/brown.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  const std::string_view text = sinklab_fuzz::as_text(data, size);
  for (const std::string& s : data::brown_sentences_of(text)) {
    sinklab_fuzz::require(!s.empty(), "no empty sentence is returned");
    sinklab_fuzz::require(s.find('\n') == std::string::npos, "a sentence holds no newline");
    sinklab_fuzz::require(s.size() <= size, "a sentence is no longer than its file");
  }
  return 0;
}
