// Reductions over one axis of a contiguous tensor, seen as [outer, n, inner].
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
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
      for (int64_t i = 0; i < v.inner; ++i)
        out[o * v.inner + i] = max_along(x + o * v.n * v.inner + i, v.n, v.inner, arg[o * v.inner + i]);
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

// Index of the first of n contiguous elements that is NaN or ±Inf, or -1 (the tape's non-finite
// guard). The common case (none) is one pass of integer tests on the exponent bits (all ones for
// NaN and Inf), which vectorises; a float comparison reduction would not without -ffast-math.
template <class T>
int64_t first_non_finite(const T* x, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  constexpr Bits exponent = sizeof(T) == 8 ? Bits(0x7ff0000000000000ull) : Bits(0x7f800000u);
  Bits bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= Bits((std::bit_cast<Bits>(x[i]) & exponent) == exponent);
  if (!bad) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

// Σ x² over n contiguous elements in double, over fixed blocks, so the result does not depend on
// the thread count (a term of the gradient clipping's norm; Newton–Schulz's normalisation).
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

// Σ x² over `count` buffers (xs[i], ns[i] elements), each summed by sum_of_squares and added in
// order: a parameter list's gradient norm in one call, so that a device's backend can bring one
// value to the host for the whole list (the GPU's waits once, not once per parameter).
template <class T>
double sum_of_squares_over(int64_t count, const T* const* xs, const int64_t* ns) {
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += sum_of_squares(xs[i], ns[i]);
  return s;
}

}  // namespace sinklab::kernels::cpu
