// The reductions of the CUDA backend (kernels/cpu/reduce.hpp's) over one axis of a contiguous
// tensor seen as [outer, n, inner], and over a whole buffer, written against a SIMT context
// (kernels/simt.hpp) so the same bodies run on a GPU and on the CPU emulator.
//
// Layout: a thread per (outer, inner) output walking k in order, for sum_axis, max_axis and
// max_axis_backward (no atomics: each output, and each gradient element written, has one
// thread); the sums equal the CPU's bit for bit where inner > 1 (the CPU adds rows in the same
// order). Two other shapes of sum, for the launcher to pick by size, deterministic but not in
// the CPU's order (they agree to rounding): a long axis into few outputs (a bias gradient) in
// chunks of k, then the chunks' sums in order (sum_axis_chunks, then sum_axis); and a long row
// (inner == 1) a block per row through simt::block_sum (sum_rows; the CPU sums rows in SIMD
// lanes, so no order is its own there). broadcast_axis_add is a thread per gradient element.
// sum_all is two passes of sum_partials: each block's sum of a grid-stride share, then one block
// over those sums; the order depends on n only, so results repeat run to run.
#pragma once
#include <cstddef>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/backend.hpp"  // AxisView
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// out[o, i] = Σ_k x[o, k, i], a thread per output, k in order.
template <class Ctx, class T>
SINKLAB_HD void sum_axis(Ctx& ctx, const T* x, T* out, AxisView v) {
  detail::for_each_element(ctx, v.outer * v.inner, [&](int64_t r) {
    const int64_t o = r / v.inner, i = r % v.inner;
    const T* p = x + o * v.n * v.inner + i;
    T acc = T(0);
    for (int64_t k = 0; k < v.n; ++k) acc += p[k * v.inner];
    out[r] = acc;
  });
}

// partial[c, o, i] = Σ_k x[o, k, i] over chunk c of k (`chunk` consecutive k, in order), a thread
// per (c, o, i): the first pass of a sum over a long axis into few outputs, which a thread per
// output would leave to a handful of threads. The second pass is sum_axis over the partials seen
// as [1, chunks, outer·inner].
template <class Ctx, class T>
SINKLAB_HD void sum_axis_chunks(Ctx& ctx, const T* x, T* partial, AxisView v, int64_t chunk) {
  const int64_t outputs = v.outer * v.inner, chunks = (v.n + chunk - 1) / chunk;
  detail::for_each_element(ctx, chunks * outputs, [&](int64_t q) {
    const int64_t c = q / outputs, r = q % outputs, o = r / v.inner, i = r % v.inner;
    const int64_t k0 = c * chunk, k1 = k0 + chunk < v.n ? k0 + chunk : v.n;
    const T* p = x + o * v.n * v.inner + i;
    T acc = T(0);
    for (int64_t k = k0; k < k1; ++k) acc += p[k * v.inner];
    partial[q] = acc;
  });
}

// out[r] = Σ_k x[r, k] over rows of n (sum_axis with inner == 1): a block per row (grid-stride
// over rows), its threads striding over the row, then simt::block_sum.
template <class Ctx, class T>
SINKLAB_HD void sum_rows(Ctx& ctx, const T* x, T* out, int64_t rows, int64_t n) {
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    T acc = T(0);
    for (int64_t k = ctx.thread(); k < n; k += ctx.threads()) acc += x[r * n + k];
    acc = simt::block_sum(ctx, acc, scratch);
    if (ctx.thread() == 0) out[r] = acc;
  }
}

struct Identity {
  template <class T>
  SINKLAB_HD T operator()(T x) const {
    return x;
  }
};
// x² in double whatever x's type: the gradient norm's terms, summed in double as the CPU's
// clipping sums them.
struct SquareInDouble {
  template <class T>
  SINKLAB_HD double operator()(T x) const {
    return static_cast<double>(x) * static_cast<double>(x);
  }
};

// out[b] = Σ f(x[k]) over block b's grid-stride share of x[0, n), summed in out's type: with one
// block, out[0] = Σ f(x).
template <class Ctx, class T, class Acc, class F = Identity>
SINKLAB_HD void sum_partials(Ctx& ctx, const T* x, int64_t n, Acc* out, F f = {}) {
  Acc acc = Acc(0);
  for (int64_t k = ctx.block() * ctx.threads() + ctx.thread(); k < n; k += ctx.blocks() * ctx.threads()) acc += f(x[k]);
  acc = simt::block_sum(ctx, acc, ctx.template shared<Acc>());
  if (ctx.thread() == 0) out[ctx.block()] = acc;
}

// out[b] = the first k of block b's grid-stride share of x[0, n) that holds NaN or ±Inf, or n
// (the tape's non-finite guard; the smallest over the blocks is the first of x). x − x is 0 for
// every finite x and NaN otherwise, exactly, without --use_fast_math.
template <class Ctx, class T>
SINKLAB_HD void first_non_finite_partials(Ctx& ctx, const T* x, int64_t n, int64_t* out) {
  int64_t first = n;  // a thread's k ascend, so its first hit is its smallest
  for (int64_t k = ctx.block() * ctx.threads() + ctx.thread(); k < n && first == n; k += ctx.blocks() * ctx.threads()) {
    const T d = x[k] - x[k];
    if (d != d) first = k;
  }
  first = simt::block_fold(ctx, first, ctx.template shared<int64_t>(), simt::MinOp{});
  if (ctx.thread() == 0) out[ctx.block()] = first;
}

// out[o, i] = max_k x[o, k, i] and arg[o, i] = the first k attaining it (max_along, the CPU's
// line), a thread per (o, i).
template <class Ctx, class T>
SINKLAB_HD void max_axis(Ctx& ctx, const T* x, T* out, int64_t* arg, AxisView v) {
  detail::for_each_element(ctx, v.outer * v.inner, [&](int64_t r) {
    const int64_t o = r / v.inner, i = r % v.inner;
    out[r] = max_along(x + o * v.n * v.inner + i, v.n, v.inner, arg[r]);
  });
}

// gx[o, k, i] += scale · g[o, i] for every k, a thread per element of gx.
template <class Ctx, class T>
SINKLAB_HD void broadcast_axis_add(Ctx& ctx, const T* g, T* gx, AxisView v, T scale) {
  detail::for_each_element(ctx, v.outer * v.n * v.inner, [&](int64_t k) {
    const int64_t o = k / (v.n * v.inner), i = k % v.inner;
    gx[k] = gx[k] + scale * g[o * v.inner + i];
  });
}

// gx[o, arg[o, i], i] += g[o, i], a thread per (o, i): each writes its own element of gx.
template <class Ctx, class T>
SINKLAB_HD void max_axis_backward(Ctx& ctx, const T* g, const int64_t* arg, T* gx, AxisView v) {
  detail::for_each_element(ctx, v.outer * v.inner, [&](int64_t r) {
    const int64_t o = r / v.inner, i = r % v.inner;
    T& dst = gx[(o * v.n + arg[r]) * v.inner + i];
    dst = dst + g[r];
  });
}

}  // namespace sinklab::kernels::cuda
