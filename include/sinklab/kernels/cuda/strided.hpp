// What memory<cuda> runs on the device besides cudaMemcpy, written against a SIMT context
// (kernels/simt.hpp): a fill, and the strided gather and scatter that views (transposes, slices)
// need to become dense — the same element order as the host's memory<cpu>::gather / scatter
// (row-major over the shape). A thread per element, grid-stride; the layout is passed by value.
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// A view's shape and element strides (rank ≤ kMaxRank), by value for a kernel argument.
struct StridedLayout {
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int rank = 0;

  static StridedLayout of(const int64_t* shape, const int64_t* strides, int rank) {
    StridedLayout l;
    l.rank = rank;
    for (int i = 0; i < rank; ++i) {
      l.shape[i] = shape[i];
      l.strides[i] = strides[i];
    }
    return l;
  }
  SINKLAB_HD int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  // The storage offset of the k-th element in row-major order.
  SINKLAB_HD int64_t offset(int64_t k) const {
    int64_t off = 0;
    for (int i = rank - 1; i >= 0; --i) {
      off += (k % shape[i]) * strides[i];
      k /= shape[i];
    }
    return off;
  }
};

namespace detail {
template <class Ctx, class F>
SINKLAB_HD void for_each_element(Ctx& ctx, int64_t n, F&& f) {
  for (int64_t k = ctx.block() * ctx.threads() + ctx.thread(); k < n; k += ctx.blocks() * ctx.threads()) f(k);
}
}  // namespace detail

template <class Ctx, class T>
SINKLAB_HD void fill(Ctx& ctx, T* dst, int64_t n, T v) {
  detail::for_each_element(ctx, n, [&](int64_t k) { dst[k] = v; });
}

// dst (dense) ← src's elements at the layout's strides.
template <class Ctx, class T>
SINKLAB_HD void gather(Ctx& ctx, T* dst, const T* src, StridedLayout l) {
  detail::for_each_element(ctx, l.numel(), [&](int64_t k) { dst[k] = src[l.offset(k)]; });
}

// dst's elements at the layout's strides ← src (dense); the layout must not map two elements to
// one place (no zero strides), as threads write in parallel.
template <class Ctx, class T>
SINKLAB_HD void scatter(Ctx& ctx, T* dst, const T* src, StridedLayout l) {
  detail::for_each_element(ctx, l.numel(), [&](int64_t k) { dst[l.offset(k)] = src[k]; });
}

}  // namespace sinklab::kernels::cuda
