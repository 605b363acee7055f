// Host launchers of the row-wise kernels (kernels/cuda/rowwise.hpp): softmax, log-softmax, their
// backward passes and cross-entropy, with kernels::cpu's signatures (kernels/cpu/rowwise.hpp)
// on device pointers. The two that return a value to the host (cross_entropy_count,
// cross_entropy_forward, whose total is elementwise.cuh's sum_all over the rows' losses) reduce
// on the device and copy one result back, which waits for the queued work. Everything runs on
// the default stream, so scratch from memory<cuda> may be released as soon as the launches are
// queued (memory.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sinklab/core/error.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/elementwise.cuh"  // sum_all
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/cuda/rowwise.hpp"

namespace sinklab::kernels::cuda::host {

// A block per row (grid-stride past 65535 rows) of 256 threads, or, for rows shorter than that,
// the fewest whole warps that cover one. The threads depend on n only, so a shape's sums are the
// same bits on every run.
struct RowLaunch {
  unsigned grid = 1;
  int threads = kThreads;
};
inline RowLaunch row_launch(int64_t rows, int64_t n) {
  const int64_t warps = (n + simt::kWarp - 1) / simt::kWarp;
  const int64_t threads = n >= kThreads ? kThreads : (warps > 0 ? warps : 1) * simt::kWarp;
  return {static_cast<unsigned>(rows < 65535 ? (rows > 0 ? rows : 1) : 65535), static_cast<int>(threads)};
}

namespace detail {

template <class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::softmax_rows(ctx, x, y, rows, n);
}
template <class T>
__global__ void log_softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::log_softmax_rows(ctx, x, y, rows, n);
}
template <class T>
__global__ void softmax_rows_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::softmax_rows_backward(ctx, y, gy, gx, rows, n);
}
template <class T>
__global__ void log_softmax_rows_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::log_softmax_rows_backward(ctx, y, gy, gx, rows, n);
}
template <class Target>  // int32_t; a template so that every translation unit may define it
__global__ void cross_entropy_count_kernel(const Target* targets, int64_t N, int64_t V, Target ignore_index,
                                           int64_t* out) {
  simt::Cuda ctx;
  kernels::cuda::cross_entropy_count(ctx, targets, N, V, ignore_index, out);
}
template <class T>
__global__ void cross_entropy_rows_kernel(const T* x, const int32_t* targets, int64_t N, int64_t V,
                                          int32_t ignore_index, T* lse, T* row_loss) {
  simt::Cuda ctx;
  kernels::cuda::cross_entropy_rows(ctx, x, targets, N, V, ignore_index, lse, row_loss);
}
template <class T>
__global__ void cross_entropy_backward_kernel(const T* x, const int32_t* targets, const T* lse, int64_t N, int64_t V,
                                              int32_t ignore_index, T scale, T* gx) {
  simt::Cuda ctx;
  kernels::cuda::cross_entropy_backward(ctx, x, targets, lse, N, V, ignore_index, scale, gx);
}

}  // namespace detail

// y = softmax(x) per row of length n.
template <class T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::softmax_rows_kernel<T><<<l.grid, l.threads, kernels::cuda::row_shared_bytes<T>(l.threads)>>>(x, y, rows, n);
  check(cudaGetLastError(), "softmax_rows kernel launch");
}

// y = log_softmax(x) per row.
template <class T>
void log_softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::log_softmax_rows_kernel<T><<<l.grid, l.threads, kernels::cuda::row_shared_bytes<T>(l.threads)>>>(x, y, rows,
                                                                                                          n);
  check(cudaGetLastError(), "log_softmax_rows kernel launch");
}

// gx += y ⊙ (gy − ⟨gy, y⟩) per row.
template <class T>
void softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::softmax_rows_backward_kernel<T><<<l.grid, l.threads, kernels::cuda::row_shared_bytes<T>(l.threads)>>>(
      y, gy, gx, rows, n);
  check(cudaGetLastError(), "softmax_rows_backward kernel launch");
}

// gx += gy − softmax(x) · Σ gy per row, with y = log_softmax(x).
template <class T>
void log_softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::log_softmax_rows_backward_kernel<T><<<l.grid, l.threads, kernels::cuda::row_shared_bytes<T>(l.threads)>>>(
      y, gy, gx, rows, n);
  check(cudaGetLastError(), "log_softmax_rows_backward kernel launch");
}

// Targets of N rows over V classes that count (not ignore_index); throws on one outside [0, V),
// naming the first such row as the CPU does.
inline int64_t cross_entropy_count(const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index) {
  if (N <= 0) return 0;
  const auto out = memory<sinklab::cuda>::allocate<int64_t>(2);
  detail::cross_entropy_count_kernel<int32_t><<<1, kThreads, kernels::cuda::row_shared_bytes<int64_t>(kThreads)>>>(
      targets, N, V, ignore_index, out.get());
  check(cudaGetLastError(), "cross_entropy_count kernel launch");
  int64_t host[2] = {0, 0};
  memory<sinklab::cuda>::to_host(host, out.get(), 2);
  if (host[1] < N) {
    int32_t target = 0;
    memory<sinklab::cuda>::to_host(&target, targets + host[1], 1);
    SINKLAB_CHECK(false, "cross_entropy: target ", target, " at row ", host[1], " is outside [0, ", V,
                  ") (ignore_index is ", ignore_index, ")");
  }
  return host[0];
}

// Σ over counted rows of lse_r − x[r, target_r], with lse_r saved for the backward; ignored rows
// contribute 0 and leave lse_r unset.
template <class T>
T cross_entropy_forward(const T* x, const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index, T* lse) {
  if (N <= 0) return T(0);
  const auto row_loss = memory<sinklab::cuda>::allocate<T>(static_cast<std::size_t>(N));
  const RowLaunch l = row_launch(N, V);
  detail::cross_entropy_rows_kernel<T><<<l.grid, l.threads, kernels::cuda::row_shared_bytes<T>(l.threads)>>>(
      x, targets, N, V, ignore_index, lse, row_loss.get());
  check(cudaGetLastError(), "cross_entropy_rows kernel launch");
  return sum_all(row_loss.get(), N);
}

// gx[r] += scale · (softmax(x[r]) − onehot(target_r)) for counted rows, the softmax recomputed
// from the saved lse.
template <class T>
void cross_entropy_backward(const T* x, const int32_t* targets, const T* lse, int64_t N, int64_t V,
                            int32_t ignore_index, T scale, T* gx) {
  if (N <= 0 || V <= 0) return;
  const RowLaunch l = row_launch(N, V);
  detail::cross_entropy_backward_kernel<T><<<l.grid, l.threads>>>(x, targets, lse, N, V, ignore_index, scale, gx);
  check(cudaGetLastError(), "cross_entropy_backward kernel launch");
}

}  // namespace sinklab::kernels::cuda::host
