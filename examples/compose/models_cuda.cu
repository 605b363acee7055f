// examples/compose on a GPU (--device cuda; built when the CUDA backend is): the variants of
// models.hpp as Module<float, cuda>, one process, every op through kernels::backend<cuda>.
#include <cuda_runtime.h>

#include <cstdio>

#include "models.hpp"
#include "sinklab/cuda/backend.cuh"

namespace {
using namespace sinklab;

struct OneGpu {
  explicit OneGpu(const std::vector<autodiff::Parameter<float, cuda>*>&) {}
  data::TokenBatch shard(const data::TokenBatch& b) { return b; }
  double backward(autodiff::Tape<float, cuda>& tape, autodiff::Var<float, cuda> loss) {
    tape.backward(loss);
    return loss.item();
  }
};
}  // namespace

std::vector<compose::Result> compose::train_variants_cuda(const Setup& s, const std::vector<std::string>& only) {
  const char* why = nullptr;
  SINKLAB_CHECK(kernels::cuda::host::device_count(&why) > 0, "--device cuda: no usable CUDA device (", why ? why : "?",
                "); run on a machine with a GPU, or with --device cpu");
  cudaDeviceProp prop{};
  kernels::cuda::host::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("compose: training on %s\n", prop.name);
  return train_selected<cuda, OneGpu>(s, only);
}
