// LayerNorm and DyT for the CUDA backend, forward and backward, written against a SIMT context
// (kernels/simt.hpp) like RMSNorm's bodies (kernels/cuda/rms_norm.hpp). The math is
// kernels/cpu/norm.hpp's:
//
//   LayerNorm  μ = mean(x),  rstd = 1/√(mean((x−μ)²) + eps),  x̂ = (x−μ)·rstd,  y = x̂ ⊙ gain + bias
//              h = gy ⊙ gain:  gx = rstd·(h − mean(h) − x̂·mean(h ⊙ x̂)),
//              ggain += Σ_rows gy ⊙ x̂,  gbias += Σ_rows gy
//   DyT        t = tanh(α·x),  y = gamma ⊙ t + beta
//              u = gy ⊙ gamma ⊙ (1 − t²):  gx = α·u,  galpha += Σ u ⊙ x,
//              ggamma += Σ_rows gy ⊙ t,  gbeta += Σ_rows gy
//
// Layout as RMSNorm's: a block per row for what needs row sums (shared memory: at least
// rms_shared_bytes), then a thread per column summing the parameter gradients over the rows in
// order (deterministic, no atomics). DyT's α gradient is a per-row partial (row_alpha) that one more
// thread of the parameter kernel sums in row order.
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/cuda/rms_norm.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// x, y [rows, n]; gain, bias [n]; mean, rstd [rows].
template <class Ctx, class T>
SINKLAB_HD void layer_norm_forward(Ctx& ctx, const T* x, const T* gain, const T* bias, T* y, T* mean, T* rstd,
                                   int64_t rows, int64_t n, T eps) {
  using std::sqrt;
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* xr = x + r * n;
    T s = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) s += xr[i];
    const T mu = simt::block_sum(ctx, s, scratch) / static_cast<T>(n);
    T ss = T(0);  // a second pass about μ, as the CPU: no cancellation in E[x²] − μ²
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T c = xr[i] - mu;
      ss += c * c;
    }
    const T rs = T(1) / sqrt(simt::block_sum(ctx, ss, scratch) / static_cast<T>(n) + eps);
    if (ctx.thread() == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) y[r * n + i] = (xr[i] - mu) * rs * gain[i] + bias[i];
  }
}

// gx [rows, n] = the input gradient (overwritten).
template <class Ctx, class T>
SINKLAB_HD void layer_norm_backward_input(Ctx& ctx, const T* x, const T* gain, const T* mean, const T* rstd,
                                          const T* gy, T* gx, int64_t rows, int64_t n) {
  T* scratch = ctx.template shared<T>();
  const T inv_n = T(1) / static_cast<T>(n);
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    const T* xr = x + r * n;
    const T* gr = gy + r * n;
    const T mu = mean[r], rs = rstd[r];
    T sh = T(0), shx = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T h = gr[i] * gain[i];
      sh += h;
      shx += h * (xr[i] - mu);
    }
    const T mean_h = simt::block_sum(ctx, sh, scratch) * inv_n;
    const T mean_hx = simt::block_sum(ctx, shx, scratch) * rs * inv_n;
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T xh = (xr[i] - mu) * rs;
      gx[r * n + i] = rs * (gr[i] * gain[i] - mean_h - xh * mean_hx);
    }
  }
}

// ggain [n] += Σ_rows gy ⊙ x̂, gbias [n] += Σ_rows gy; a thread per column (grid-stride over all
// the grid's threads); either output may be null.
template <class Ctx, class T>
SINKLAB_HD void layer_norm_backward_params(Ctx& ctx, const T* x, const T* mean, const T* rstd, const T* gy,
                                           T* ggain, T* gbias, int64_t rows, int64_t n) {
  for (int64_t j = ctx.block() * ctx.threads() + ctx.thread(); j < n; j += ctx.blocks() * ctx.threads()) {
    T acc_gain = T(0), acc_bias = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T g = gy[r * n + j];
      acc_gain += g * ((x[r * n + j] - mean[r]) * rstd[r]);
      acc_bias += g;
    }
    if (ggain) ggain[j] += acc_gain;
    if (gbias) gbias[j] += acc_bias;
  }
}

// y [rows, n] = gamma ⊙ tanh(α·x) + beta: elementwise, a thread per element over the whole grid.
template <class Ctx, class T>
SINKLAB_HD void dyt_forward(Ctx& ctx, const T* x, T alpha, const T* gamma, const T* beta, T* y, int64_t rows,
                            int64_t n) {
  using std::tanh;
  const int64_t total = rows * n;
  for (int64_t e = ctx.block() * ctx.threads() + ctx.thread(); e < total; e += ctx.blocks() * ctx.threads()) {
    const int64_t i = e % n;
    y[e] = gamma[i] * tanh(alpha * x[e]) + beta[i];
  }
}

// gx [rows, n] = α·u (overwritten; may be null) and row_alpha [rows] = Σ_row u ⊙ x (may be null),
// the partials dyt_backward_params sums into galpha.
template <class Ctx, class T>
SINKLAB_HD void dyt_backward_input(Ctx& ctx, const T* x, T alpha, const T* gamma, const T* gy, T* gx, T* row_alpha,
                                   int64_t rows, int64_t n) {
  using std::tanh;
  T* scratch = ctx.template shared<T>();
  for (int64_t r = ctx.block(); r < rows; r += ctx.blocks()) {
    T ga = T(0);
    for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) {
      const T xv = x[r * n + i];
      const T t = tanh(alpha * xv);
      const T u = gy[r * n + i] * gamma[i] * (T(1) - t * t);
      if (gx) gx[r * n + i] = alpha * u;
      ga += u * xv;
    }
    if (row_alpha) {  // the same for the whole block
      ga = simt::block_sum(ctx, ga, scratch);
      if (ctx.thread() == 0) row_alpha[r] = ga;
    }
  }
}

// ggamma [n] += Σ_rows gy ⊙ t and gbeta [n] += Σ_rows gy, a thread per column j < n; the thread
// j = n adds Σ_rows row_alpha (in row order) to *galpha. Any output may be null (row_alpha only
// read with galpha). Grid-stride over n + 1 threads.
template <class Ctx, class T>
SINKLAB_HD void dyt_backward_params(Ctx& ctx, const T* x, T alpha, const T* gy, const T* row_alpha, T* galpha,
                                    T* ggamma, T* gbeta, int64_t rows, int64_t n) {
  using std::tanh;
  for (int64_t j = ctx.block() * ctx.threads() + ctx.thread(); j <= n; j += ctx.blocks() * ctx.threads()) {
    if (j == n) {
      if (!galpha) continue;
      T acc = T(0);
      for (int64_t r = 0; r < rows; ++r) acc += row_alpha[r];
      *galpha += acc;
      continue;
    }
    T acc_gamma = T(0), acc_beta = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T g = gy[r * n + j];
      if (ggamma) acc_gamma += g * tanh(alpha * x[r * n + j]);
      acc_beta += g;
    }
    if (ggamma) ggamma[j] += acc_gamma;
    if (gbeta) gbeta[j] += acc_beta;
  }
}

}  // namespace sinklab::kernels::cuda
