// The IDX (Fashion-MNIST) parser on arbitrary bytes, at any rank and at the ranks the image and
// label readers ask for.
#include "fuzz_target.hpp"
#include "sinklab/data/fashion_mnist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  const std::vector<uint8_t> bytes(data, data + size);
  for (int rank : {-1, 1, 3}) {
    sinklab_fuzz::refused_is_fine([&] {
      const data::IdxArray a = data::parse_idx(bytes, "fuzz", rank);
      std::size_t n = 1;
      for (int64_t d : a.dims) n *= static_cast<std::size_t>(d);
      sinklab_fuzz::require(a.values.size() == n, "values match the dimensions");
      sinklab_fuzz::require(rank < 0 || a.dims.size() == static_cast<std::size_t>(rank), "the rank asked for");
    });
  }
  return 0;
}
