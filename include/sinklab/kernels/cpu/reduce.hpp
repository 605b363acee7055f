// Reductions over one axis of a contiguous tensor, seen as [outer, n, inner].
#pragma once
#include <cstdint>
#include <limits>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::kernels::cpu {

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisView axis_view(const Shape& s, int axis) {
  axis = s.normalize(axis);
  AxisView v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  v.n = s[axis];
  for (int i = axis + 1; i < s.rank(); ++i) v.inner *= s[i];
  return v;
}

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

}  // namespace sinklab::kernels::cpu
