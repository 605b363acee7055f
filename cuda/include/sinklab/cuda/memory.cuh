// memory<cuda>: device buffers for Tensor<T, cuda> (core/device.hpp's interface, which
// memory<cpu> in core/storage.hpp implements for the host).
//
// Allocation goes through the same size-keyed BlockCache as the host's, in front of cudaMalloc:
// a training loop that allocates the same shapes every step calls cudaMalloc only in its first
// step, and a freed block is reused as soon as its tensor dies. That is safe because every
// kernel of the backend runs on one stream (the default): a block handed out again is only
// touched by work queued after the work that used it. Copies are cudaMemcpy; fills, gathers and
// scatters are the SIMT kernels of kernels/cuda/strided.hpp (tested on the CPU emulator).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

#include "sinklab/core/device.hpp"
#include "sinklab/core/storage.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/strided.hpp"

namespace sinklab {

namespace kernels::cuda::host {

// Device blocks: 512-byte granules (cudaMalloc's own alignment is 256), whole 2 MiB from 1 MiB on
// so that sizes that differ a little share blocks.
struct DeviceBlocks {
  static constexpr std::size_t kDefaultLimit = std::size_t{8} << 30;
  static std::size_t round_up(std::size_t b) {
    const std::size_t unit = b >= (std::size_t{1} << 20) ? (std::size_t{2} << 20) : 512;
    return b == 0 ? unit : (b + unit - 1) / unit * unit;
  }
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  static void deallocate(void* p, std::size_t) { cudaFree(p); }
};
using DevicePool = BlockCache<DeviceBlocks>;

constexpr int kThreads = 256;
inline int blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, T v) {
  simt::Cuda ctx;
  kernels::cuda::fill(ctx, dst, n, v);
}
template <class T>
__global__ void gather_kernel(T* dst, const T* src, kernels::cuda::StridedLayout l) {
  simt::Cuda ctx;
  kernels::cuda::gather(ctx, dst, src, l);
}
template <class T>
__global__ void scatter_kernel(T* dst, const T* src, kernels::cuda::StridedLayout l) {
  simt::Cuda ctx;
  kernels::cuda::scatter(ctx, dst, src, l);
}

}  // namespace kernels::cuda::host

template <>
struct memory<cuda> {
  template <class T>
  static std::shared_ptr<T[]> allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    T* p = static_cast<T*>(kernels::cuda::host::DevicePool::instance().acquire(bytes));
    return std::shared_ptr<T[]>(p, [bytes](T* q) { kernels::cuda::host::DevicePool::instance().release(q, bytes); });
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t n) {
    kernels::cuda::host::check(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice), "cudaMemcpy (device to device)");
  }
  template <class T>
  static void fill(T* dst, std::size_t n, T v) {
    if (n == 0) return;
    kernels::cuda::host::fill_kernel<T><<<kernels::cuda::host::blocks_for(n), kernels::cuda::host::kThreads>>>(dst, static_cast<int64_t>(n), v);
    kernels::cuda::host::check(cudaGetLastError(), "fill kernel launch");
  }
  template <class T>
  static void to_host(T* host, const T* src, std::size_t n) {
    kernels::cuda::host::check(cudaMemcpy(host, src, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
  }
  template <class T>
  static void from_host(T* dst, const T* host, std::size_t n) {
    kernels::cuda::host::check(cudaMemcpy(dst, host, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
  }
  template <class T>
  static void gather(T* dst, const T* src, const int64_t* shape, const int64_t* strides, int rank) {
    const auto l = kernels::cuda::StridedLayout::of(shape, strides, rank);
    kernels::cuda::host::gather_kernel<T><<<kernels::cuda::host::blocks_for(l.numel()), kernels::cuda::host::kThreads>>>(dst, src, l);
    kernels::cuda::host::check(cudaGetLastError(), "gather kernel launch");
  }
  template <class T>
  static void scatter(T* dst, const T* src, const int64_t* shape, const int64_t* strides, int rank) {
    const auto l = kernels::cuda::StridedLayout::of(shape, strides, rank);
    kernels::cuda::host::scatter_kernel<T><<<kernels::cuda::host::blocks_for(l.numel()), kernels::cuda::host::kThreads>>>(dst, src, l);
    kernels::cuda::host::check(cudaGetLastError(), "scatter kernel launch");
  }
};

}  // namespace sinklab
