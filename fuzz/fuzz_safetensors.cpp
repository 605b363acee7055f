// io::SafetensorsFile::parse on arbitrary bytes, then every tensor it accepted read as float
// and as int64 (the conversions index the data buffer by the header's offsets).
#include <cstdio>

#include "fuzz_target.hpp"
#include "sinklab/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  sinklab_fuzz::refused_is_fine([&] {
    const auto f = io::SafetensorsFile::parse(std::vector<uint8_t>(data, data + size), "fuzz");
    for (const io::TensorEntry& e : f.entries()) {
      sinklab_fuzz::require(e.begin <= e.end && e.end + 8 <= size, "an accepted entry lies inside the file");
      sinklab_fuzz::refused_is_fine([&] { (void)f.get<float>(e.name); });
      sinklab_fuzz::refused_is_fine([&] { (void)f.get<int64_t>(e.name); });
    }
  });
  return 0;
}
