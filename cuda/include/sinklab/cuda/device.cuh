// Runtime helpers of the CUDA backend: error checks and device discovery.
#pragma once
#include <cuda_runtime.h>

#include "sinklab/core/error.hpp"

namespace sinklab::kernels::cuda::host {

inline void check(cudaError_t e, const char* what) {
  SINKLAB_CHECK(e == cudaSuccess, "CUDA: ", what, " failed: ", cudaGetErrorString(e));
}

// Number of usable CUDA devices; 0 when there is no GPU or no driver. `why`, when given,
// receives the runtime's reason for 0 (no device, no driver, a driver too old for the toolkit).
inline int device_count(const char** why = nullptr) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky error left by a missing driver
    return 0;
  }
  if (n == 0 && why) *why = "the runtime reports no device";
  return n;
}

}  // namespace sinklab::kernels::cuda::host
