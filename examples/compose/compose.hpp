// examples/compose: what the translation units share. models.hpp holds the architectures and the
// training loop, and is the file to edit (models.cpp builds it for the cpu, models_cuda.cu for a
// GPU); main.cpp holds the command line, the text and the table, and does not recompile when an
// architecture changes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace compose {

struct Setup {
  int64_t d_model = 64, layers = 2, heads = 4;  // every variant: QK-norm, byte vocabulary
  int steps = 300;
  uint64_t seed = 0;
  int64_t seq_len = 64, batch = 16;
  double lr = 3e-3;
  int log_every = 50;
  std::vector<int32_t> train, val;
};

struct Result {
  std::string name;
  int64_t params = 0;
  double first = 0, last = 0, val = 0, ms_per_step = 0;
};

// The variants' keys, in the order they run.
inline const std::vector<std::string> kVariants = {"vanilla", "gated", "vga", "exo"};

// Trains every variant whose key is in `only` (all when empty) on the same batches: on the cpu
// (models.cpp), or on the first GPU (models_cuda.cu, in builds with the CUDA backend: main.cpp
// sees SINKLAB_EXAMPLE_CUDA); the latter fails with the runtime's reason where no GPU is usable.
std::vector<Result> train_variants(const Setup& s, const std::vector<std::string>& only);
std::vector<Result> train_variants_cuda(const Setup& s, const std::vector<std::string>& only);

}  // namespace compose
