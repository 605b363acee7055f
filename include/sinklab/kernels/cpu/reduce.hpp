// Reductions over one axis of a contiguous tensor, seen as [outer, n, inner].
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/backend.hpp"

namespace sinklab::kernels::cpu {

using kernels::AxisView;
using kernels::axis_view;

// out[o, i] = Σ_k x[o, k, i]
template <class T>
void sum_axis(const T* x, T* out, AxisView v) {
  parallel_for(0, v.outer, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* xo = x + o * v.n * v.inner;
      T* yo = out + o * v.inner;
      if (v.inner == 1) {
        yo[0] = simd::sum(xo, v.n);
        continue;
      }
      std::fill(yo, yo + v.inner, T(0));
      for (int64_t k = 0; k < v.n; ++k) simd::apply(yo, xo + k * v.inner, yo, v.inner, [](auto a, auto b) { return a + b; });
    }
  });
}

// out[o, i] = max_k x[o, k, i], arg[o, i] = the first k attaining it.
template <class T>
void max_axis(const T* x, T* out, int64_t* arg, AxisView v) {
  parallel_for(0, v.outer, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        const T* p = x + o * v.n * v.inner + i;
        T m = p[0];
        int64_t a = 0;
        for (int64_t k = 1; k < v.n; ++k)
          if (p[k * v.inner] > m) {
            m = p[k * v.inner];
            a = k;
          }
        out[o * v.inner + i] = m;
        arg[o * v.inner + i] = a;
      }
  });
}

// gx[o, k, i] += scale · g[o, i] for every k (the backward of sum / mean over an axis).
template <class T>
void broadcast_axis_add(const T* g, T* gx, AxisView v, T scale) {
  parallel_for(0, v.outer, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t k = 0; k < v.n; ++k)
        simd::apply(gx + (o * v.n + k) * v.inner, g + o * v.inner, gx + (o * v.n + k) * v.inner, v.inner,
                    [scale](auto a, auto b) { return a + decltype(a)(scale) * b; });
  });
}

// gx[o, arg[o, i], i] += g[o, i] (the backward of max_axis).
template <class T>
void max_axis_backward(const T* g, const int64_t* arg, T* gx, AxisView v) {
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t r = o * v.inner + i;
      gx[(o * v.n + arg[r]) * v.inner + i] += g[r];
    }
}

// Σ x over n contiguous elements.
template <class T>
T sum_all(const T* x, int64_t n) {
  return simd::sum(x, n);
}

// Σ x² over n contiguous elements in double, over fixed blocks, so the result does not depend on
// the thread count (the gradient clipping's norm).
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
  parallel_for(0, blocks, 8, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      double s = 0;
      for (int64_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      partial[static_cast<std::size_t>(b)] = s;
    }
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

}  // namespace sinklab::kernels::cpu
