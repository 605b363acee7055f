// CPU kernels of the fused normalisation nodes (RMSNorm with optional pre-scale, LayerNorm,
// DyT): forward and hand-written backward over the rows of a contiguous [rows, n] buffer,
// vectorised with xsimd and parallel over rows. Forward passes save only per-row statistics
// (rstd, and the mean for LayerNorm); backward passes recompute x̂ from x.
//
// Parameter gradients are sums over rows. Each parallel chunk of rows accumulates into its own
// scratch row, and the scratch rows are added into the gradient at the end, so results do not
// depend on thread timing.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/rows.hpp"

namespace sinklab::kernels::cpu {

// RMSNorm: z = x ⊙ pre (pre may be null: z = x), rstd = 1/√(mean(z²) + eps), y = z · rstd ⊙ gain.
template <class T>
void rms_forward(const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows, int64_t n, T eps) {
  parallel_for(0, rows, detail::row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      T ss;
      if (pre) {
        ss = simd::sum_of<T>(n, [&](auto v, int64_t i) {
          using V = decltype(v);
          const V z = simd::load<V>(xr + i) * simd::load<V>(pre + i);
          return z * z;
        });
      } else {
        ss = simd::dot(xr, xr, n);
      }
      const T rs = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
      rstd[r] = rs;
      simd::loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        V z = simd::load<V>(xr + i);
        if (pre) z = z * simd::load<V>(pre + i);
        simd::store(yr + i, z * V(rs) * simd::load<V>(gain + i));
      });
    }
  });
}

// RMSNorm backward. With h = gy ⊙ gain, x̂ = z·rstd:
//   gz = rstd · (h − x̂ · mean(h ⊙ x̂)),   ggain += Σ_rows gy ⊙ x̂,
//   gx = gz ⊙ pre (or gz),                 gpre += Σ_rows gz ⊙ x.
// gx = gx_prior + the above (gx_prior null: gx is written; it may equal gx); gx, ggain or gpre
// may be null when not needed.
template <class T>
void rms_backward(const T* x, const T* pre, const T* gain, const T* rstd, const T* gy, T* gx, const T* gx_prior,
                  T* ggain, T* gpre, int64_t rows, int64_t n) {
  const int64_t width = 2 * n;  // scratch: [ggain | gpre]
  std::vector<T> sums(static_cast<std::size_t>(width), T(0));
  const T inv_n = T(1) / static_cast<T>(n);
  detail::rows_with_sums<T>(rows, n, width, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gain = acc;
    T* acc_pre = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T rs = rstd[r];
      // s = Σ h ⊙ z; then gz = rs·h − z·(rs³ · s / n).
      const T s = simd::sum_of<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        V z = simd::load<V>(xr + i);
        if (pre) z = z * simd::load<V>(pre + i);
        return simd::load<V>(gr + i) * simd::load<V>(gain + i) * z;
      });
      const T k = rs * rs * rs * s * inv_n;
      simd::loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        const V xv = simd::load<V>(xr + i);
        const V g = simd::load<V>(gr + i);
        const V z = pre ? xv * simd::load<V>(pre + i) : xv;
        if (ggain) simd::store(acc_gain + i, simd::load<V>(acc_gain + i) + g * z * V(rs));
        const V gz = V(rs) * g * simd::load<V>(gain + i) - z * V(k);
        if (pre && gpre) simd::store(acc_pre + i, simd::load<V>(acc_pre + i) + gz * xv);
        if (gx) {
          const V out = pre ? gz * simd::load<V>(pre + i) : gz;
          simd::store(gx + r * n + i, gx_prior ? simd::load<V>(gx_prior + r * n + i) + out : out);
        }
      });
    }
  });
  if (ggain) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(ggain + i, simd::load<V>(ggain + i) + simd::load<V>(sums.data() + i));
  });
  if (gpre) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(gpre + i, simd::load<V>(gpre + i) + simd::load<V>(sums.data() + n + i));
  });
}

// LayerNorm: μ = mean(x), rstd = 1/√(mean((x−μ)²) + eps), y = (x−μ)·rstd ⊙ gain + bias.
template <class T>
void layer_norm_forward(const T* x, const T* gain, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                        T eps) {
  parallel_for(0, rows, detail::row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T mu = simd::sum(xr, n) / static_cast<T>(n);
      const T var = simd::sum_of<T>(n, [&](auto v, int64_t i) {
                      using V = decltype(v);
                      const V c = simd::load<V>(xr + i) - V(mu);
                      return c * c;
                    }) / static_cast<T>(n);
      const T rs = T(1) / std::sqrt(var + eps);
      mean[r] = mu;
      rstd[r] = rs;
      simd::loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        simd::store(yr + i, (simd::load<V>(xr + i) - V(mu)) * V(rs) * simd::load<V>(gain + i) + simd::load<V>(bias + i));
      });
    }
  });
}

// LayerNorm backward. With h = gy ⊙ gain, x̂ = (x−μ)·rstd:
//   gx = rstd · (h − mean(h) − x̂ · mean(h ⊙ x̂)),  ggain += Σ gy ⊙ x̂,  gbias += Σ gy.
template <class T>
void layer_norm_backward(const T* x, const T* gain, const T* mean, const T* rstd, const T* gy, T* gx, T* ggain,
                         T* gbias, int64_t rows, int64_t n) {
  std::vector<T> sums(static_cast<std::size_t>(2 * n), T(0));
  const T inv_n = T(1) / static_cast<T>(n);
  detail::rows_with_sums<T>(rows, n, 2 * n, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gain = acc;
    T* acc_bias = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T mu = mean[r], rs = rstd[r];
      const T mean_h = simd::sum_of<T>(n, [&](auto v, int64_t i) {
                         using V = decltype(v);
                         return simd::load<V>(gr + i) * simd::load<V>(gain + i);
                       }) * inv_n;
      const T mean_hx = simd::sum_of<T>(n, [&](auto v, int64_t i) {
                          using V = decltype(v);
                          return simd::load<V>(gr + i) * simd::load<V>(gain + i) * (simd::load<V>(xr + i) - V(mu));
                        }) * rs * inv_n;
      simd::loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        const V g = simd::load<V>(gr + i);
        const V xh = (simd::load<V>(xr + i) - V(mu)) * V(rs);
        if (ggain) simd::store(acc_gain + i, simd::load<V>(acc_gain + i) + g * xh);
        if (gbias) simd::store(acc_bias + i, simd::load<V>(acc_bias + i) + g);
        if (gx) simd::store(gx + r * n + i, V(rs) * (g * simd::load<V>(gain + i) - V(mean_h) - xh * V(mean_hx)));
      });
    }
  });
  if (ggain) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(ggain + i, simd::load<V>(ggain + i) + simd::load<V>(sums.data() + i));
  });
  if (gbias) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(gbias + i, simd::load<V>(gbias + i) + simd::load<V>(sums.data() + n + i));
  });
}

// DyT: y = gamma ⊙ tanh(alpha · x) + beta, alpha a scalar.
template <class T>
void dyt_forward(const T* x, T alpha, const T* gamma, const T* beta, T* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, detail::row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      simd::loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        using std::tanh;
        using xsimd::tanh;
        simd::store(yr + i, simd::load<V>(gamma + i) * tanh(V(alpha) * simd::load<V>(xr + i)) + simd::load<V>(beta + i));
      });
    }
  });
}

// DyT backward, t = tanh(alpha·x), u = gy ⊙ gamma ⊙ (1 − t²):
//   gx = alpha·u,  galpha += Σ u ⊙ x,  ggamma += Σ_rows gy ⊙ t,  gbeta += Σ_rows gy.
template <class T>
void dyt_backward(const T* x, T alpha, const T* gamma, const T* gy, T* gx, T* galpha, T* ggamma, T* gbeta,
                  int64_t rows, int64_t n) {
  const int64_t width = 2 * n + 1;  // scratch: [ggamma | gbeta | galpha]
  std::vector<T> sums(static_cast<std::size_t>(width), T(0));
  detail::rows_with_sums<T>(rows, n, width, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gamma = acc;
    T* acc_beta = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T ga = simd::sum_of<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        using std::tanh;
        using xsimd::tanh;
        const V xv = simd::load<V>(xr + i);
        const V g = simd::load<V>(gr + i);
        const V t = tanh(V(alpha) * xv);
        const V u = g * simd::load<V>(gamma + i) * (V(1) - t * t);
        if (ggamma) simd::store(acc_gamma + i, simd::load<V>(acc_gamma + i) + g * t);
        if (gbeta) simd::store(acc_beta + i, simd::load<V>(acc_beta + i) + g);
        if (gx) simd::store(gx + r * n + i, V(alpha) * u);
        return u * xv;
      });
      acc[2 * n] += ga;
    }
  });
  if (ggamma) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(ggamma + i, simd::load<V>(ggamma + i) + simd::load<V>(sums.data() + i));
  });
  if (gbeta) simd::loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    simd::store(gbeta + i, simd::load<V>(gbeta + i) + simd::load<V>(sums.data() + n + i));
  });
  if (galpha) *galpha += sums[2 * n];
}

}  // namespace sinklab::kernels::cpu
