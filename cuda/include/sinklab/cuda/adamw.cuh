// Host launcher of the AdamW step (kernels/cuda/adamw.hpp), kernels::cpu::adamw_step's signature
// on device pointers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/cuda/adamw.hpp"

namespace sinklab::cuda_backend {

namespace detail {
template <class T>
__global__ void adamw_step_kernel(T* p, const T* g, T* m, T* v, int64_t n, policy::AdamWCoefs<T> c) {
  simt::Cuda ctx;
  kernels::cuda::adamw_step(ctx, p, g, m, v, n, c);
}
}  // namespace detail

template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, const policy::AdamWCoefs<T>& c) {
  if (n <= 0) return;
  detail::adamw_step_kernel<T><<<blocks_for(static_cast<std::size_t>(n)), kThreads>>>(p, g, m, v, n, c);
  check(cudaGetLastError(), "adamw_step kernel launch");
}

}  // namespace sinklab::cuda_backend
