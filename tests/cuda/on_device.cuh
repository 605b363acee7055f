// A host vector as a device tensor (memory<cuda>), for the GPU tests.
#pragma once
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/cuda/memory.cuh"

namespace sinklab_test {

template <class T>
sinklab::Tensor<T, sinklab::cuda> on_device(const std::vector<T>& host) {
  return sinklab::Tensor<T, sinklab::cuda>::from({static_cast<int64_t>(host.size())}, host);
}

}  // namespace sinklab_test
