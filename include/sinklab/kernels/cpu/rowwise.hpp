// Row-wise kernels over the last axis: softmax, log-softmax and their backward passes.
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::kernels::cpu {

// y = softmax(x) per row of length n.
template <class T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = simd::max(xr, n);
      simd::apply(xr, yr, n, [m](auto v) {
        using std::exp; using xsimd::exp;
        return exp(v - decltype(v)(m));
      });
      const T inv = T(1) / simd::sum(yr, n);
      simd::apply(yr, yr, n, [inv](auto v) { return v * decltype(v)(inv); });
    }
  });
}

// y = log_softmax(x) per row.
template <class T>
void log_softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = simd::max(xr, n);
      simd::apply(xr, yr, n, [m](auto v) {
        using std::exp; using xsimd::exp;
        return exp(v - decltype(v)(m));
      });
      const T lse = m + std::log(simd::sum(yr, n));
      simd::apply(xr, yr, n, [lse](auto v) { return v - decltype(v)(lse); });
    }
  });
}

// gx += y ⊙ (gy − ⟨gy, y⟩) per row (softmax backward, accumulating).
template <class T>
void softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * n;
      const T* gr = gy + r * n;
      T* out = gx + r * n;
      const T d = simd::dot(yr, gr, n);
      simd::apply(yr, gr, out, out, n, [d](auto yv, auto gv, auto ov) { return ov + yv * (gv - decltype(yv)(d)); });
    }
  });
}

// gx += gy − softmax(x) · Σ gy per row (log-softmax backward, accumulating), with y = log_softmax(x).
template <class T>
void log_softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * n;
      const T* gr = gy + r * n;
      T* out = gx + r * n;
      const T s = simd::sum(gr, n);
      simd::apply(yr, gr, out, out, n, [s](auto yv, auto gv, auto ov) {
        using std::exp; using xsimd::exp;
        return ov + gv - exp(yv) * decltype(yv)(s);
      });
    }
  });
}

}  // namespace sinklab::kernels::cpu
