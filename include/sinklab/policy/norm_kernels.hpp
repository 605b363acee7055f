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

namespace sinklab::norm::kernels {

namespace detail {

template <class V, class T>
inline V vload(const T* p) {
  if constexpr (simd::is_batch<V>::value) return V::load_unaligned(p);
  else return *p;
}
template <class V, class T>
inline void vstore(T* p, const V& v) {
  if constexpr (simd::is_batch<V>::value) v.store_unaligned(p);
  else *p = v;
}
// Calls f(V{}, i) over [0, n): V is a batch on the vector body, T on the scalar tail.
template <class T, class F>
inline void loop(int64_t n, F&& f) {
  using B = simd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  int64_t i = 0;
  for (; i + W <= n; i += W) f(B{}, i);
  for (; i < n; ++i) f(T{}, i);
}
// Σ_i f(V{}, i), with vector accumulators.
template <class T, class F>
inline T sum_of(int64_t n, F&& f) {
  using B = simd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc += f(B{}, i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += f(T{}, i);
  return s;
}

inline int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)); }

// Runs f(r0, r1, scratch) over chunks of [0, rows); each chunk gets its own zeroed scratch of
// `width` elements, and the scratches are summed into `out` (accumulating). With one chunk
// f writes into a zeroed scratch too, so f may always assume a private, zeroed buffer.
template <class T, class F>
void rows_with_sums(int64_t rows, int64_t n, int64_t width, T* out, F&& f) {
  const int64_t per_chunk = std::max<int64_t>(row_grain(n), 1);
  int64_t chunks = std::min<int64_t>(std::max(1, num_threads()) * 2, (rows + per_chunk - 1) / per_chunk);
  if (in_parallel_region()) chunks = 1;
  chunks = std::max<int64_t>(chunks, 1);
  std::vector<T> scratch(static_cast<std::size_t>(chunks * width), T(0));
  const int64_t step = (rows + chunks - 1) / chunks;
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * step, r1 = std::min(rows, r0 + step);
      if (r0 < r1) f(r0, r1, scratch.data() + c * width);
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    const T* s = scratch.data() + c * width;
    loop<T>(width, [&](auto v, int64_t i) {
      using V = decltype(v);
      vstore(out + i, vload<V>(out + i) + vload<V>(s + i));
    });
  }
}

}  // namespace detail

// RMSNorm: z = x ⊙ pre (pre may be null: z = x), rstd = 1/√(mean(z²) + eps), y = z · rstd ⊙ gain.
template <class T>
void rms_forward(const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows, int64_t n, T eps) {
  using namespace detail;
  parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      T ss;
      if (pre) {
        ss = sum_of<T>(n, [&](auto v, int64_t i) {
          using V = decltype(v);
          const V z = vload<V>(xr + i) * vload<V>(pre + i);
          return z * z;
        });
      } else {
        ss = simd::dot(xr, xr, n);
      }
      const T rs = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
      rstd[r] = rs;
      loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        V z = vload<V>(xr + i);
        if (pre) z = z * vload<V>(pre + i);
        vstore(yr + i, z * V(rs) * vload<V>(gain + i));
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
  using namespace detail;
  const int64_t width = 2 * n;  // scratch: [ggain | gpre]
  std::vector<T> sums(static_cast<std::size_t>(width), T(0));
  const T inv_n = T(1) / static_cast<T>(n);
  rows_with_sums<T>(rows, n, width, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gain = acc;
    T* acc_pre = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T rs = rstd[r];
      // s = Σ h ⊙ z; then gz = rs·h − z·(rs³ · s / n).
      const T s = sum_of<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        V z = vload<V>(xr + i);
        if (pre) z = z * vload<V>(pre + i);
        return vload<V>(gr + i) * vload<V>(gain + i) * z;
      });
      const T k = rs * rs * rs * s * inv_n;
      loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        const V xv = vload<V>(xr + i);
        const V g = vload<V>(gr + i);
        const V z = pre ? xv * vload<V>(pre + i) : xv;
        if (ggain) vstore(acc_gain + i, vload<V>(acc_gain + i) + g * z * V(rs));
        const V gz = V(rs) * g * vload<V>(gain + i) - z * V(k);
        if (pre && gpre) vstore(acc_pre + i, vload<V>(acc_pre + i) + gz * xv);
        if (gx) {
          const V out = pre ? gz * vload<V>(pre + i) : gz;
          vstore(gx + r * n + i, gx_prior ? vload<V>(gx_prior + r * n + i) + out : out);
        }
      });
    }
  });
  if (ggain) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(ggain + i, vload<V>(ggain + i) + vload<V>(sums.data() + i));
  });
  if (gpre) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(gpre + i, vload<V>(gpre + i) + vload<V>(sums.data() + n + i));
  });
}

// LayerNorm: μ = mean(x), rstd = 1/√(mean((x−μ)²) + eps), y = (x−μ)·rstd ⊙ gain + bias.
template <class T>
void layer_norm_forward(const T* x, const T* gain, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                        T eps) {
  using namespace detail;
  parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T mu = simd::sum(xr, n) / static_cast<T>(n);
      const T var = sum_of<T>(n, [&](auto v, int64_t i) {
                      using V = decltype(v);
                      const V c = vload<V>(xr + i) - V(mu);
                      return c * c;
                    }) / static_cast<T>(n);
      const T rs = T(1) / std::sqrt(var + eps);
      mean[r] = mu;
      rstd[r] = rs;
      loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        vstore(yr + i, (vload<V>(xr + i) - V(mu)) * V(rs) * vload<V>(gain + i) + vload<V>(bias + i));
      });
    }
  });
}

// LayerNorm backward. With h = gy ⊙ gain, x̂ = (x−μ)·rstd:
//   gx = rstd · (h − mean(h) − x̂ · mean(h ⊙ x̂)),  ggain += Σ gy ⊙ x̂,  gbias += Σ gy.
template <class T>
void layer_norm_backward(const T* x, const T* gain, const T* mean, const T* rstd, const T* gy, T* gx, T* ggain,
                         T* gbias, int64_t rows, int64_t n) {
  using namespace detail;
  std::vector<T> sums(static_cast<std::size_t>(2 * n), T(0));
  const T inv_n = T(1) / static_cast<T>(n);
  rows_with_sums<T>(rows, n, 2 * n, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gain = acc;
    T* acc_bias = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T mu = mean[r], rs = rstd[r];
      const T mean_h = sum_of<T>(n, [&](auto v, int64_t i) {
                         using V = decltype(v);
                         return vload<V>(gr + i) * vload<V>(gain + i);
                       }) * inv_n;
      const T mean_hx = sum_of<T>(n, [&](auto v, int64_t i) {
                          using V = decltype(v);
                          return vload<V>(gr + i) * vload<V>(gain + i) * (vload<V>(xr + i) - V(mu));
                        }) * rs * inv_n;
      loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        const V g = vload<V>(gr + i);
        const V xh = (vload<V>(xr + i) - V(mu)) * V(rs);
        if (ggain) vstore(acc_gain + i, vload<V>(acc_gain + i) + g * xh);
        if (gbias) vstore(acc_bias + i, vload<V>(acc_bias + i) + g);
        if (gx) vstore(gx + r * n + i, V(rs) * (g * vload<V>(gain + i) - V(mean_h) - xh * V(mean_hx)));
      });
    }
  });
  if (ggain) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(ggain + i, vload<V>(ggain + i) + vload<V>(sums.data() + i));
  });
  if (gbias) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(gbias + i, vload<V>(gbias + i) + vload<V>(sums.data() + n + i));
  });
}

// DyT: y = gamma ⊙ tanh(alpha · x) + beta, alpha a scalar.
template <class T>
void dyt_forward(const T* x, T alpha, const T* gamma, const T* beta, T* y, int64_t rows, int64_t n) {
  using namespace detail;
  parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      loop<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        using std::tanh;
        using xsimd::tanh;
        vstore(yr + i, vload<V>(gamma + i) * tanh(V(alpha) * vload<V>(xr + i)) + vload<V>(beta + i));
      });
    }
  });
}

// DyT backward, t = tanh(alpha·x), u = gy ⊙ gamma ⊙ (1 − t²):
//   gx = alpha·u,  galpha += Σ u ⊙ x,  ggamma += Σ_rows gy ⊙ t,  gbeta += Σ_rows gy.
template <class T>
void dyt_backward(const T* x, T alpha, const T* gamma, const T* gy, T* gx, T* galpha, T* ggamma, T* gbeta,
                  int64_t rows, int64_t n) {
  using namespace detail;
  const int64_t width = 2 * n + 1;  // scratch: [ggamma | gbeta | galpha]
  std::vector<T> sums(static_cast<std::size_t>(width), T(0));
  rows_with_sums<T>(rows, n, width, sums.data(), [&](int64_t r0, int64_t r1, T* acc) {
    T* acc_gamma = acc;
    T* acc_beta = acc + n;
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      const T* gr = gy + r * n;
      const T ga = sum_of<T>(n, [&](auto v, int64_t i) {
        using V = decltype(v);
        using std::tanh;
        using xsimd::tanh;
        const V xv = vload<V>(xr + i);
        const V g = vload<V>(gr + i);
        const V t = tanh(V(alpha) * xv);
        const V u = g * vload<V>(gamma + i) * (V(1) - t * t);
        if (ggamma) vstore(acc_gamma + i, vload<V>(acc_gamma + i) + g * t);
        if (gbeta) vstore(acc_beta + i, vload<V>(acc_beta + i) + g);
        if (gx) vstore(gx + r * n + i, V(alpha) * u);
        return u * xv;
      });
      acc[2 * n] += ga;
    }
  });
  if (ggamma) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(ggamma + i, vload<V>(ggamma + i) + vload<V>(sums.data() + i));
  });
  if (gbeta) loop<T>(n, [&](auto v, int64_t i) {
    using V = decltype(v);
    vstore(gbeta + i, vload<V>(gbeta + i) + vload<V>(sums.data() + n + i));
  });
  if (galpha) *galpha += sums[2 * n];
}

}  // namespace sinklab::norm::kernels
