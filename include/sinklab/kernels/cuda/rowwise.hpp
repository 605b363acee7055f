// Row-wise kernels of the CUDA backend (softmax, log-softmax, their backward passes,
// cross-entropy), written against a SIMT context (kernels/simt.hpp): the same bodies run as CUDA
// kernels and, in tests, on the CPU emulator. The math is kernels/cpu/rowwise.hpp's, per row:
//
//   softmax         m = max x,  y = e^{x−m} · (1 / Σ e^{x−m})
//   log-softmax     lse = m + log Σ e^{x−m},  y = x − lse
//   backward        softmax: gx += y ⊙ (gy − ⟨gy, y⟩);  log-softmax: gx += gy − e^y · Σ gy
//   cross-entropy   loss_r = lse_r − x[r, t_r] for t_r ≠ ignore_index (lse_r saved, else left as is),
//                   gx[r] += scale · e^{x[r] − lse_r}, then gx[r, t_r] −= scale
//
// Layout: a block per row (grid-stride over rows), its threads striding over the row; the row
// max through block_max, sums through simt::block_sum (shared memory: row_shared_bytes). The
// cross-entropy total is the launcher's: sum_all (reduce.hpp's sum_partials) over the per-row
// losses, the same bits run to run, though not in the CPU's row order.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// Shared memory of a row kernel with `threads` threads: block_max keeps one value per thread.
template <class T>
SINKLAB_HD std::size_t row_shared_bytes(int64_t threads) {
  return simt::block_fold_shared_bytes<T>(threads);
}

using simt::block_fold;
using simt::MaxOp;
using simt::MinOp;

template <class Ctx, class T>
SINKLAB_HD T block_max(Ctx& ctx, T v, T* scratch) {
  return block_fold(ctx, v, scratch, MaxOp{});
}

// max of xr[0, n) over the block (−∞ for n = 0).
template <class Ctx, class T>
SINKLAB_HD T row_max(Ctx& ctx, const T* xr, int64_t n, T* scratch) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) m = MaxOp{}(m, xr[i]);
  return block_max(ctx, m, scratch);
}

// log Σ_j e^{xr_j} over the block, shifted by the row max.
template <class Ctx, class T>
SINKLAB_HD T row_logsumexp(Ctx& ctx, const T* xr, int64_t n, T* scratch) {
  using std::exp;
  using std::log;
  const T m = row_max(ctx, xr, n, scratch);
  T s = T(0);
  for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) s += exp(xr[i] - m);
  return m + log(simt::block_sum(ctx, s, scratch));
}

// x, y [rows, n]; y may be x.
template <class Ctx, class T>
SINKLAB_HD void softmax_rows(Ctx& ctx, const T* x, T* y, int64_t rows, int64_t n) {
  using std::exp;
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T m = row_max(ctx, xr, n, scratch);
    T s = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T e = exp(xr[i] - m);
      yr[i] = e;
      s += e;
    }
    const T inv = T(1) / simt::block_sum(ctx, s, scratch);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) yr[i] *= inv;  // this thread's own writes
  }
}

template <class Ctx, class T>
SINKLAB_HD void log_softmax_rows(Ctx& ctx, const T* x, T* y, int64_t rows, int64_t n) {
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T lse = row_logsumexp(ctx, x + r * n, n, scratch);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) y[r * n + i] = x[r * n + i] - lse;
  }
}

// gx += y ⊙ (gy − ⟨gy, y⟩), y = softmax(x).
template <class Ctx, class T>
SINKLAB_HD void softmax_rows_backward(Ctx& ctx, const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* yr = y + r * n;
    const T* gr = gy + r * n;
    T d = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) d += yr[i] * gr[i];
    d = simt::block_sum(ctx, d, scratch);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) gx[r * n + i] += yr[i] * (gr[i] - d);
  }
}

// gx += gy − e^y · Σ gy, y = log_softmax(x).
template <class Ctx, class T>
SINKLAB_HD void log_softmax_rows_backward(Ctx& ctx, const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  using std::exp;
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* gr = gy + r * n;
    T s = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) s += gr[i];
    s = simt::block_sum(ctx, s, scratch);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) gx[r * n + i] += gr[i] - exp(y[r * n + i]) * s;
  }
}

// One block: out[0] = the rows whose target is not ignore_index, out[1] = the first row whose
// target is neither ignore_index nor in [0, V) (N when none), for the host to report.
// Shared memory: row_shared_bytes<int64_t>(threads).
template <class Ctx, class Target>
SINKLAB_HD void cross_entropy_count(Ctx& ctx, const Target* targets, int64_t N, int64_t V, Target ignore_index,
                                    int64_t* out) {
  int64_t* scratch = ctx.template shared<int64_t>();
  int64_t count = 0, first_bad = N;
  for (int64_t r = ctx.thread(); r < N; r += ctx.threads()) {
    const Target t = targets[r];
    if (t == ignore_index) continue;
    if (t >= 0 && t < V) ++count;
    else if (first_bad == N) first_bad = r;  // this thread's rows rise, so its first is its least
  }
  count = simt::block_sum(ctx, count, scratch);
  first_bad = block_fold(ctx, first_bad, scratch, MinOp{});
  if (ctx.thread() == 0) {
    out[0] = count;
    out[1] = first_bad;
  }
}

// row_loss [N] = lse_r − x[r, t_r] with lse [N] written for counted rows; ignored rows get a loss of
// 0 and keep their lse. A target outside [0, V) (cross_entropy_count rejects those first) gives
// a NaN loss rather than a read out of bounds.
template <class Ctx, class T>
SINKLAB_HD void cross_entropy_rows(Ctx& ctx, const T* x, const int32_t* targets, int64_t N, int64_t V,
                                   int32_t ignore_index, T* lse, T* row_loss) {
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < N; r += ctx.blocks()) {
    const int32_t t = targets[r];
    if (t == ignore_index) {  // the same for the whole block: no thread waits at a barrier alone
      if (ctx.thread() == 0) row_loss[r] = T(0);
      continue;
    }
    const T l = row_logsumexp(ctx, x + r * V, V, scratch);
    if (ctx.thread() == 0) {
      lse[r] = l;
      row_loss[r] = t >= 0 && t < V ? l - x[r * V + t] : std::numeric_limits<T>::quiet_NaN();
    }
  }
}

// gx[r] += scale · e^{x[r] − lse_r}, then gx[r, t_r] −= scale, for counted rows (the CPU's order of
// the two terms at the target). No shared memory.
template <class Ctx, class T>
SINKLAB_HD void cross_entropy_backward(Ctx& ctx, const T* x, const int32_t* targets, const T* lse, int64_t N,
                                       int64_t V, int32_t ignore_index, T scale, T* gx) {
  using std::exp;
  for (int64_t r = ctx.block(); r < N; r += ctx.blocks()) {
    const int32_t t = targets[r];
    if (t == ignore_index) continue;
    const T l = lse[r];
    for (int64_t i = ctx.thread(); i < V; i += ctx.threads()) {
      T g = scale * exp(x[r * V + i] - l) + gx[r * V + i];
      if (i == t) g -= scale;
      gx[r * V + i] = g;
    }
  }
}

}  // namespace sinklab::kernels::cuda
