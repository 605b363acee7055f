// RMSNorm (and the pre-affine form) for the CUDA backend, forward and backward together, written
// against a SIMT context (kernels/simt.hpp): the same bodies run as CUDA kernels and, in tests,
// on the CPU emulator. The math is kernels/cpu/norm.hpp's:
//
//   forward    z = x (⊙ pre),  rstd = 1/√(mean(z²) + eps),  y = z·rstd ⊙ gain
//   backward   s = Σ gy ⊙ gain ⊙ z,  k = rstd³·s/n,  gz = rstd·gy ⊙ gain − z·k,
//              gx = gz (⊙ pre);  ggain += Σ_rows gy ⊙ z·rstd,  gpre += Σ_rows gz ⊙ x
//
// Layout: a block per row (grid-stride over rows), its threads striding over the n columns, the
// row sums through simt::block_sum (shared memory: threads/32 values). The parameter gradients
// are a second kernel with a thread per column summing over the rows in order (deterministic,
// no atomics); it reads each row's k, which the input-gradient kernel leaves in `row_k`.
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// Shared memory the row kernels need for a block of `threads`.
template <class T>
SINKLAB_HD std::size_t rms_shared_bytes(int64_t threads) {
  return simt::block_sum_shared_bytes<T>(threads);
}

// x, y [rows, n]; pre (may be null) and gain [n]; rstd [rows].
template <class Ctx, class T>
SINKLAB_HD void rms_forward(Ctx& ctx, const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows,
                            int64_t n, T eps) {
  using std::sqrt;
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* xr = x + r * n;
    T ss = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T z = pre ? xr[i] * pre[i] : xr[i];
      ss += z * z;
    }
    ss = simt::block_sum(ctx, ss, scratch);
    const T rs = T(1) / sqrt(ss / static_cast<T>(n) + eps);
    if (ctx.thread() == 0) rstd[r] = rs;
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T z = pre ? xr[i] * pre[i] : xr[i];
      y[r * n + i] = z * rs * gain[i];
    }
  }
}

// gx [rows, n] = the input gradient (plus gx_prior when given; gx may equal gx_prior; null: only
// row_k); row_k [rows] (may be null) receives each row's k for rms_backward_params.
template <class Ctx, class T>
SINKLAB_HD void rms_backward_input(Ctx& ctx, const T* x, const T* pre, const T* gain, const T* rstd, const T* gy,
                                   T* gx, const T* gx_prior, T* row_k, int64_t rows, int64_t n) {
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* xr = x + r * n;
    const T* gr = gy + r * n;
    const T rs = rstd[r];
    T s = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) s += gr[i] * gain[i] * (pre ? xr[i] * pre[i] : xr[i]);
    s = simt::block_sum(ctx, s, scratch);
    const T k = rs * rs * rs * s / static_cast<T>(n);
    if (row_k && ctx.thread() == 0) row_k[r] = k;
    for (int64_t i = ctx.thread(); gx && i < n; i += ctx.threads()) {
      const T z = pre ? xr[i] * pre[i] : xr[i];
      const T gz = rs * gr[i] * gain[i] - z * k;
      const T out = pre ? gz * pre[i] : gz;
      gx[r * n + i] = gx_prior ? gx_prior[r * n + i] + out : out;
    }
  }
}

// ggain [n] += Σ_rows gy ⊙ z·rstd and, with pre, gpre [n] += Σ_rows gz ⊙ x, gz from the row_k that
// rms_backward_input wrote; a thread per column (grid-stride over all the grid's threads);
// either output may be null.
template <class Ctx, class T>
SINKLAB_HD void rms_backward_params(Ctx& ctx, const T* x, const T* pre, const T* gain, const T* rstd, const T* row_k,
                                    const T* gy, T* ggain, T* gpre, int64_t rows, int64_t n) {
  for (int64_t j = ctx.block() * ctx.threads() + ctx.thread(); j < n; j += ctx.blocks() * ctx.threads()) {
    T acc_gain = T(0), acc_pre = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T xv = x[r * n + j], g = gy[r * n + j];
      const T z = pre ? xv * pre[j] : xv;
      acc_gain += g * z * rstd[r];
      if (pre && gpre) acc_pre += (rstd[r] * g * gain[j] - z * row_k[r]) * xv;
    }
    if (ggain) ggain[j] += acc_gain;
    if (pre && gpre) gpre[j] += acc_pre;
  }
}

}  // namespace sinklab::kernels::cuda
