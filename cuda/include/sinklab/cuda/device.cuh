// Runtime helpers of the CUDA backend: error checks and device discovery.
#pragma once
#include <cuda_runtime.h>

#include "sinklab/core/error.hpp"

namespace sinklab::cuda_backend {

inline void check(cudaError_t e, const char* what) {
  SINKLAB_CHECK(e == cudaSuccess, "CUDA: ", what, " failed: ", cudaGetErrorString(e));
}

// Number of usable CUDA devices; 0 when there is no GPU or no driver.
inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error left by a missing driver
    return 0;
  }
  return n;
}

}  // namespace sinklab::cuda_backend
