// Host launcher of the in-place update (kernels/cuda/update.hpp): kernels::cpu::apply_update's
// signature on device pointers. The optimisers' steps and the gradient clipping run through it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/cuda/update.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {
template <class F, class... P>
__global__ void apply_update_kernel(int64_t n, F f, P*... buffers) {
  simt::Cuda ctx;
  kernels::cuda::apply_update(ctx, n, f, buffers...);
}
}  // namespace detail

template <class F, class... P>
void apply_update(int64_t n, const F& f, P*... buffers) {
  if (n <= 0) return;
  detail::apply_update_kernel<F, P...><<<blocks_for(static_cast<std::size_t>(n)), kThreads>>>(n, f, buffers...);
  check(cudaGetLastError(), "apply_update kernel launch");
}

}  // namespace sinklab::kernels::cuda::host
