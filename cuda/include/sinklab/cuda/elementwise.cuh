// Host launchers of the CUDA backend's elementwise kernels and reductions
// (kernels/cuda/elementwise.hpp, reduce.hpp): the same names and signatures as kernels::cpu's
// (kernels/cpu/elementwise.hpp, reduce.hpp), on device pointers and Tensor<T, cuda>, so
// kernels::backend<cuda> forwards to them as backend<cpu> forwards to the CPU's. Every kernel
// runs on the default stream, as memory<cuda> assumes. Four of them wait for the device: sum_all
// and sum_of_squares(_over) (they return their sums to the host), first_non_finite (its index) and
// embedding_forward (it checks the ids, which live on the device, and throws the CPU's message
// for a bad one). No kernel uses atomics: each result is
// the same run to run, and equal to the CPU's bit for bit where the sums run in the CPU's
// order (see sum_axis and kChunkedThreads for those that do not).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/broadcast.hpp"  // broadcast_shape: the shape check and message of every device
#include "sinklab/kernels/cuda/elementwise.hpp"
#include "sinklab/kernels/cuda/reduce.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {

template <class F, class T>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::unary<F>(ctx, x, y, n);
}
template <class F, class T>
__global__ void unary_grad_kernel(const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::unary_grad<F>(ctx, x, y, gy, gx, n);
}
template <class T, class F>
__global__ void binary_kernel(const T* a, const T* b, T* y, int64_t n, F f) {
  simt::Cuda ctx;
  kernels::cuda::binary(ctx, a, b, y, n, f);
}
template <class T, class F>
__global__ void binary_scalar_kernel(const T* a, T s, T* y, int64_t n, F f) {
  simt::Cuda ctx;
  kernels::cuda::binary_scalar(ctx, a, s, y, n, f);
}
template <class T>
__global__ void add_inplace_kernel(T* y, const T* x, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::add_inplace(ctx, y, x, n);
}
template <class T, class F>
__global__ void broadcast_binary_kernel(const T* a, const T* b, T* y, kernels::cuda::BroadcastLayout l, F f) {
  simt::Cuda ctx;
  kernels::cuda::broadcast_binary(ctx, a, b, y, l, f);
}
template <class T>
__global__ void sum_to_kernel(const T* g, T* y, kernels::cuda::SumToLayout l) {
  simt::Cuda ctx;
  kernels::cuda::sum_to(ctx, g, y, l);
}
template <class T>
__global__ void add_into_kernel(T* dst, const T* src, kernels::cuda::StridedLayout l) {
  simt::Cuda ctx;
  kernels::cuda::add_into(ctx, dst, src, l);
}
template <class Id>  // a template, as a kernel in a header must be (always int32_t)
__global__ void embedding_first_bad_kernel(const Id* ids, int64_t n, int64_t V, int64_t* first) {
  simt::Cuda ctx;
  kernels::cuda::embedding_first_bad(ctx, ids, n, V, first);
}
template <class T>
__global__ void embedding_forward_kernel(const T* table, int64_t V, int64_t D, const int32_t* ids, int64_t n, T* y) {
  simt::Cuda ctx;
  kernels::cuda::embedding_forward(ctx, table, V, D, ids, n, y);
}
template <class T>
__global__ void embedding_backward_kernel(const T* g, const int32_t* ids, int64_t n, int64_t D, T* gtable,
                                          int32_t buckets) {
  simt::Cuda ctx;
  kernels::cuda::embedding_backward(ctx, g, ids, n, D, gtable, buckets);
}
template <class T>
__global__ void repeat_kernel(const T* x, int64_t per, int64_t times, T* y) {
  simt::Cuda ctx;
  kernels::cuda::repeat(ctx, x, per, times, y);
}
template <class T>
__global__ void repeat_backward_kernel(const T* g, int64_t per, int64_t times, T* gx) {
  simt::Cuda ctx;
  kernels::cuda::repeat_backward(ctx, g, per, times, gx);
}
template <class T>
__global__ void pow_forward_kernel(const T* x, T p, T* y, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::pow_forward(ctx, x, p, y, n);
}
template <class T>
__global__ void pow_backward_kernel(const T* x, T p, const T* gy, T* gx, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::pow_backward(ctx, x, p, gy, gx, n);
}
template <class T>
__global__ void sum_axis_kernel(const T* x, T* out, kernels::AxisView v) {
  simt::Cuda ctx;
  kernels::cuda::sum_axis(ctx, x, out, v);
}
template <class T>
__global__ void sum_rows_kernel(const T* x, T* out, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::sum_rows(ctx, x, out, rows, n);
}
template <class T>
__global__ void sum_axis_chunks_kernel(const T* x, T* partial, kernels::AxisView v, int64_t chunk) {
  simt::Cuda ctx;
  kernels::cuda::sum_axis_chunks(ctx, x, partial, v, chunk);
}
template <class T>
__global__ void sum_partials_kernel(const T* x, int64_t n, T* out) {
  simt::Cuda ctx;
  kernels::cuda::sum_partials(ctx, x, n, out);
}
template <class T>
__global__ void squares_partials_kernel(const T* x, int64_t n, double* out) {
  simt::Cuda ctx;
  kernels::cuda::sum_partials(ctx, x, n, out, kernels::cuda::SquareInDouble{});
}
template <class T>
__global__ void first_non_finite_kernel(const T* x, int64_t n, int64_t* out) {
  simt::Cuda ctx;
  kernels::cuda::first_non_finite_partials(ctx, x, n, out);
}
template <class T>
__global__ void max_axis_kernel(const T* x, T* out, int64_t* arg, kernels::AxisView v) {
  simt::Cuda ctx;
  kernels::cuda::max_axis(ctx, x, out, arg, v);
}
template <class T>
__global__ void broadcast_axis_add_kernel(const T* g, T* gx, kernels::AxisView v, T scale) {
  simt::Cuda ctx;
  kernels::cuda::broadcast_axis_add(ctx, g, gx, v, scale);
}
template <class T>
__global__ void max_axis_backward_kernel(const T* g, const int64_t* arg, T* gx, kernels::AxisView v) {
  simt::Cuda ctx;
  kernels::cuda::max_axis_backward(ctx, g, arg, gx, v);
}

// Blocks for a grid-stride kernel over n items.
inline int grid_for(int64_t n) { return blocks_for(static_cast<std::size_t>(n)); }

}  // namespace detail

// How sum_axis (and sum_to, which is sum_axis for a trailing target) divides its work: rows
// (inner == 1) at least kBlockPerRowFrom long, kBlockPerRowRows of them or more, are summed a
// block per row (sum_rows); other sums with fewer outputs than kChunkedThreads are split in
// chunks of at least kMinChunk k, at most kMaxChunks of them, so that about kChunkedThreads
// threads read the input. On an H200: a bias gradient of [32768, 1024] took 14 ms a thread per
// output (1024 threads in all), 0.05-0.07 ms in chunks; 8 rows of 4M took 6.2 ms a block per
// row, 0.6 ms in chunks, and the two are even at 256 rows, the block per row ahead beyond.
inline constexpr int64_t kBlockPerRowFrom = kThreads, kBlockPerRowRows = 256;
inline constexpr int64_t kChunkedThreads = int64_t{1} << 17;
inline constexpr int64_t kMinChunk = 16, kMaxChunks = 1024;
// Threads of embedding_backward: D columns times a power of two of buckets of ids, at most
// kEmbeddingBuckets (see kernels/cuda/elementwise.hpp).
inline constexpr int64_t kEmbeddingThreads = int64_t{1} << 16;
inline constexpr int32_t kEmbeddingBuckets = 1 << 10;
// Blocks of sum_all's first pass (its second sums their partial sums in one block).
inline constexpr int kSumAllBlocks = 1024;

namespace detail {

// *out = Σ x[0, n) on the device (n > 0): each block's grid-stride share, then one block over
// the blocks' sums. The pool's buffer may go back before the kernels run: one stream.
template <class T>
void sum_on_device(const T* x, int64_t n, T* out) {
  const int blocks = std::min(grid_for(n), kSumAllBlocks);
  const std::size_t shared = simt::block_sum_shared_bytes<T>(kThreads);
  if (blocks == 1) {
    sum_partials_kernel<T><<<1, kThreads, shared>>>(x, n, out);
    check(cudaGetLastError(), "sum kernel launch");
    return;
  }
  auto partial = memory<sinklab::cuda>::allocate<T>(static_cast<std::size_t>(blocks));
  sum_partials_kernel<T><<<blocks, kThreads, shared>>>(x, n, partial.get());
  check(cudaGetLastError(), "sum kernel launch");
  sum_partials_kernel<T><<<1, kThreads, shared>>>(partial.get(), blocks, out);
  check(cudaGetLastError(), "sum kernel launch (second pass)");
}

// How many chunks of k a sum over [outer, n, inner] is split into (1: not split).
inline int64_t sum_chunks(int64_t outputs, int64_t n) {
  const int64_t want = (kChunkedThreads + outputs - 1) / outputs;
  return std::max<int64_t>(1, std::min({want, kMaxChunks, n / kMinChunk}));
}

}  // namespace detail

// ---- elementwise --------------------------------------------------------------------------

template <class F, class T>
void unary(const T* x, T* y, int64_t n) {
  if (n <= 0) return;
  detail::unary_kernel<F, T><<<detail::grid_for(n), kThreads>>>(x, y, n);
  check(cudaGetLastError(), "unary kernel launch");
}
template <class F, class T>
void unary_grad(const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  if (n <= 0) return;
  detail::unary_grad_kernel<F, T><<<detail::grid_for(n), kThreads>>>(x, y, gy, gx, n);
  check(cudaGetLastError(), "unary_grad kernel launch");
}
template <class T, class F>
void binary(const T* a, const T* b, T* y, int64_t n, F f) {
  if (n <= 0) return;
  detail::binary_kernel<T, F><<<detail::grid_for(n), kThreads>>>(a, b, y, n, f);
  check(cudaGetLastError(), "binary kernel launch");
}
template <class T, class F>
void binary_scalar(const T* a, T s, T* y, int64_t n, F f) {
  if (n <= 0) return;
  detail::binary_scalar_kernel<T, F><<<detail::grid_for(n), kThreads>>>(a, s, y, n, f);
  check(cudaGetLastError(), "binary_scalar kernel launch");
}
template <class T>
void add_inplace(T* y, const T* x, int64_t n) {
  if (n <= 0) return;
  detail::add_inplace_kernel<T><<<detail::grid_for(n), kThreads>>>(y, x, n);
  check(cudaGetLastError(), "add_inplace kernel launch");
}

// out = f(a, b) with numpy broadcasting (the CPU's shape check and message).
template <class T, class F>
Tensor<T, sinklab::cuda> broadcast_binary(const Tensor<T, sinklab::cuda>& a_in, const Tensor<T, sinklab::cuda>& b_in, F f,
                                          const char* op) {
  const Tensor<T, sinklab::cuda> a = a_in.contiguous(), b = b_in.contiguous();
  if (a.shape() == b.shape()) {
    Tensor<T, sinklab::cuda> out = Tensor<T, sinklab::cuda>::empty(a.shape());
    binary(a.data(), b.data(), out.data(), a.numel(), f);
    return out;
  }
  const Shape os = kernels::broadcast_shape(a.shape(), b.shape(), op);
  Tensor<T, sinklab::cuda> out = Tensor<T, sinklab::cuda>::empty(os);
  if (os.numel() == 0) return out;
  const auto l = kernels::cuda::broadcast_layout(a.shape(), b.shape(), os);
  detail::broadcast_binary_kernel<T, F><<<detail::grid_for(os.numel()), kThreads>>>(a.data(), b.data(), out.data(), l, f);
  check(cudaGetLastError(), "broadcast_binary kernel launch");
  return out;
}

template <class T>
void sum_axis(const T* x, T* out, kernels::AxisView v);

// Sums a gradient of the broadcast shape back to `target` (the reverse of broadcasting). A
// trailing target (a bias) is sum_axis over the leading axes; any other, a thread per target
// element walking its broadcast positions.
template <class T>
Tensor<T, sinklab::cuda> sum_to(const Tensor<T, sinklab::cuda>& g_in, const Shape& target) {
  if (g_in.shape() == target) return g_in;
  const Tensor<T, sinklab::cuda> g = g_in.contiguous();
  Tensor<T, sinklab::cuda> out = Tensor<T, sinklab::cuda>::empty(target);
  if (target.numel() == 0) return out;
  if (kernels::is_trailing(target, g.shape())) {
    const int64_t inner = target.numel();
    sum_axis(g.data(), out.data(), kernels::AxisView{1, g.numel() / inner, inner});
    return out;
  }
  const auto l = kernels::cuda::sum_to_layout(g.shape(), target);
  detail::sum_to_kernel<T><<<detail::grid_for(target.numel()), kThreads>>>(g.data(), out.data(), l);
  check(cudaGetLastError(), "sum_to kernel launch");
  return out;
}

// dst (any strides) += src (same shape, contiguous or not).
template <class T>
void add_into(Tensor<T, sinklab::cuda> dst, const Tensor<T, sinklab::cuda>& src) {
  const Tensor<T, sinklab::cuda> s = src.contiguous();
  const auto l = kernels::cuda::StridedLayout::of(dst.shape().begin(), dst.strides().data(), dst.rank());
  if (l.numel() == 0) return;
  detail::add_into_kernel<T><<<detail::grid_for(l.numel()), kThreads>>>(dst.data(), s.data(), l);
  check(cudaGetLastError(), "add_into kernel launch");
}

// y[i] = table[ids[i]] for rows of width D; throws (the CPU's message) on an id outside [0, V).
template <class T>
void embedding_forward(const T* table, int64_t V, int64_t D, const int32_t* ids, int64_t n, T* y) {
  if (n <= 0) return;
  auto first = memory<sinklab::cuda>::allocate<int64_t>(1);
  detail::embedding_first_bad_kernel<int32_t><<<1, kThreads, kernels::cuda::embedding_first_bad_shared_bytes(kThreads)>>>(
      ids, n, V, first.get());
  check(cudaGetLastError(), "embedding id check kernel launch");
  if (n * D > 0) {
    detail::embedding_forward_kernel<T><<<detail::grid_for(n * D), kThreads>>>(table, V, D, ids, n, y);
    check(cudaGetLastError(), "embedding_forward kernel launch");
  }
  int64_t bad = n;
  memory<sinklab::cuda>::to_host(&bad, first.get(), 1);
  int32_t id = 0;
  if (bad < n) memory<sinklab::cuda>::to_host(&id, ids + bad, 1);
  SINKLAB_CHECK(bad >= n, "embedding: id ", id, " at position ", bad, " is outside [0, ", V,
                ") for a table of shape [", V, ", ", D, "]");
}
// gtable[ids[i]] += g[i] (repeated ids add up in order, as on the CPU). The table's rows are not
// known here, so the buckets of ids are sized by D alone (a bucket may hold no id: its threads
// only read the ids). 8192 ids of 1024 columns on an H200: 2.6 ms in one bucket, 0.75 ms in 64
// (the best of 16-512: every thread reads every id, so more buckets cost more than they hide).
template <class T>
void embedding_backward(const T* g, const int32_t* ids, int64_t n, int64_t D, T* gtable) {
  if (n <= 0 || D <= 0) return;
  int32_t buckets = 1;
  while (buckets < kEmbeddingBuckets && D * buckets * 2 <= kEmbeddingThreads) buckets *= 2;
  detail::embedding_backward_kernel<T><<<detail::grid_for(D * buckets), kThreads>>>(g, ids, n, D, gtable, buckets);
  check(cudaGetLastError(), "embedding_backward kernel launch");
}

template <class T>
void repeat(const T* x, int64_t per, int64_t times, T* y) {
  if (per * times <= 0) return;
  detail::repeat_kernel<T><<<detail::grid_for(per * times), kThreads>>>(x, per, times, y);
  check(cudaGetLastError(), "repeat kernel launch");
}
template <class T>
void repeat_backward(const T* g, int64_t per, int64_t times, T* gx) {
  if (per <= 0 || times <= 0) return;
  detail::repeat_backward_kernel<T><<<detail::grid_for(per), kThreads>>>(g, per, times, gx);
  check(cudaGetLastError(), "repeat_backward kernel launch");
}

template <class T>
void pow_forward(const T* x, T p, T* y, int64_t n) {
  if (n <= 0) return;
  detail::pow_forward_kernel<T><<<detail::grid_for(n), kThreads>>>(x, p, y, n);
  check(cudaGetLastError(), "pow_forward kernel launch");
}
template <class T>
void pow_backward(const T* x, T p, const T* gy, T* gx, int64_t n) {
  if (n <= 0) return;
  detail::pow_backward_kernel<T><<<detail::grid_for(n), kThreads>>>(x, p, gy, gx, n);
  check(cudaGetLastError(), "pow_backward kernel launch");
}

// ---- reductions ---------------------------------------------------------------------------

// out[o, i] = Σ_k x[o, k, i]; in the CPU's order, bit for bit, where a thread per output is
// enough (inner > 1 and many outputs), else in chunks or a block per row (see kChunkedThreads).
template <class T>
void sum_axis(const T* x, T* out, kernels::AxisView v) {
  const int64_t outputs = v.outer * v.inner;
  if (outputs <= 0) return;
  if (outputs == 1 && v.n >= kBlockPerRowFrom) {
    detail::sum_on_device(x, v.n, out);
    return;
  }
  if (v.inner == 1 && v.n >= kBlockPerRowFrom && v.outer >= kBlockPerRowRows) {
    const int blocks = static_cast<int>(std::min<int64_t>(v.outer, 65535));
    detail::sum_rows_kernel<T><<<blocks, kThreads, simt::block_sum_shared_bytes<T>(kThreads)>>>(x, out, v.outer, v.n);
    check(cudaGetLastError(), "sum_axis kernel launch");
    return;
  }
  const int64_t chunks = detail::sum_chunks(outputs, v.n);
  if (chunks == 1) {
    detail::sum_axis_kernel<T><<<detail::grid_for(outputs), kThreads>>>(x, out, v);
    check(cudaGetLastError(), "sum_axis kernel launch");
    return;
  }
  const int64_t chunk = (v.n + chunks - 1) / chunks, used = (v.n + chunk - 1) / chunk;
  auto partial = memory<sinklab::cuda>::allocate<T>(static_cast<std::size_t>(used * outputs));
  detail::sum_axis_chunks_kernel<T><<<detail::grid_for(used * outputs), kThreads>>>(x, partial.get(), v, chunk);
  check(cudaGetLastError(), "sum_axis kernel launch (chunks)");
  detail::sum_axis_kernel<T><<<detail::grid_for(outputs), kThreads>>>(partial.get(), out, kernels::AxisView{1, used, outputs});
  check(cudaGetLastError(), "sum_axis kernel launch (the chunks' sums)");
}

// out[o, i] = max_k x[o, k, i], arg[o, i] = the first k attaining it.
template <class T>
void max_axis(const T* x, T* out, int64_t* arg, kernels::AxisView v) {
  if (v.outer * v.inner <= 0) return;
  detail::max_axis_kernel<T><<<detail::grid_for(v.outer * v.inner), kThreads>>>(x, out, arg, v);
  check(cudaGetLastError(), "max_axis kernel launch");
}

// gx[o, k, i] += scale · g[o, i] for every k.
template <class T>
void broadcast_axis_add(const T* g, T* gx, kernels::AxisView v, T scale) {
  const int64_t n = v.outer * v.n * v.inner;
  if (n <= 0) return;
  detail::broadcast_axis_add_kernel<T><<<detail::grid_for(n), kThreads>>>(g, gx, v, scale);
  check(cudaGetLastError(), "broadcast_axis_add kernel launch");
}

// gx[o, arg[o, i], i] += g[o, i].
template <class T>
void max_axis_backward(const T* g, const int64_t* arg, T* gx, kernels::AxisView v) {
  if (v.outer * v.inner <= 0) return;
  detail::max_axis_backward_kernel<T><<<detail::grid_for(v.outer * v.inner), kThreads>>>(g, arg, gx, v);
  check(cudaGetLastError(), "max_axis_backward kernel launch");
}

// Σ x over n contiguous elements, returned to the host (waits for the device).
template <class T>
T sum_all(const T* x, int64_t n) {
  if (n <= 0) return T(0);
  auto total = memory<sinklab::cuda>::allocate<T>(1);
  detail::sum_on_device(x, n, total.get());
  T v = T(0);
  memory<sinklab::cuda>::to_host(&v, total.get(), 1);
  return v;
}

// Σ x² over `count` buffers (xs[i]: ns[i] contiguous elements) in double (the gradient clipping's
// norm, summed in double as the CPU sums it): per-block partials of each buffer's squares
// (squares_partials_kernel: a double per block, not per element) side by side in one array, then
// sum_all's reduction of them all; returned to the host, so the device is waited for once for
// the whole list (a call per parameter would wait once each).
template <class T>
double sum_of_squares_over(int64_t count, const T* const* xs, const int64_t* ns) {
  std::vector<int> blocks(static_cast<std::size_t>(std::max<int64_t>(count, 0)), 0);
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i)
    if (ns[i] > 0) total += blocks[static_cast<std::size_t>(i)] = std::min(detail::grid_for(ns[i]), kSumAllBlocks);
  if (total == 0) return 0.0;
  auto partial = memory<sinklab::cuda>::allocate<double>(static_cast<std::size_t>(total));
  for (int64_t i = 0, at = 0; i < count; at += blocks[static_cast<std::size_t>(i)], ++i) {
    if (blocks[static_cast<std::size_t>(i)] == 0) continue;
    detail::squares_partials_kernel<T>
        <<<blocks[static_cast<std::size_t>(i)], kThreads, simt::block_sum_shared_bytes<double>(kThreads)>>>(
            xs[i], ns[i], partial.get() + at);
    check(cudaGetLastError(), "squares_partials_kernel launch");
  }
  return sum_all(static_cast<const double*>(partial.get()), total);
}

// Σ x² over n contiguous elements in double (Newton–Schulz's normalisation): the list form on one
// buffer (waits for the device).
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  return sum_of_squares_over(int64_t{1}, &x, &n);
}

// Index of the first NaN or ±Inf of n contiguous elements, or -1 (the tape's non-finite guard):
// each block's first (first_non_finite_partials), the smallest taken on the host (waits for the
// device; only the blocks' indices come back).
template <class T>
int64_t first_non_finite(const T* x, int64_t n) {
  if (n <= 0) return -1;
  const int blocks = std::min(detail::grid_for(n), kSumAllBlocks);
  auto partial = memory<sinklab::cuda>::allocate<int64_t>(static_cast<std::size_t>(blocks));
  detail::first_non_finite_kernel<T>
      <<<blocks, kThreads, simt::block_fold_shared_bytes<int64_t>(kThreads)>>>(x, n, partial.get());
  check(cudaGetLastError(), "first_non_finite kernel launch");
  std::vector<int64_t> firsts(static_cast<std::size_t>(blocks));
  memory<sinklab::cuda>::to_host(firsts.data(), partial.get(), firsts.size());
  const int64_t first = *std::min_element(firsts.begin(), firsts.end());
  return first < n ? first : -1;
}

}  // namespace sinklab::kernels::cuda::host
