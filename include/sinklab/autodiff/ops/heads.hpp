// Moving between the token-major layout of projections [B, T, columns] and the head-major
// layout of attention [B, heads, T, d_head], as differentiable copies.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/heads.hpp"

namespace sinklab::autodiff {

// The backward of a gather: g [B, heads, T, d] into x's gradient (kernels::cpu::scatter_heads).
template <class T, class Row>
void scatter_heads_grad(Tape<T>& tape, Var<T> x, const T* g, int64_t B, int64_t L, int64_t N, int64_t col0,
                        int64_t heads, int64_t d, Row&& row) {
  bool fresh = false;
  T* gx = tape.grad_buffer(x, fresh).data();
  kernels::cpu::scatter_heads(g, gx, fresh, B, L, N, col0, heads, d, row);
}

// Columns [col0, col0 + heads·d) of x [B, T, N] as [B, heads, T, d].
template <class T>
Var<T> split_heads(Var<T> x, int64_t col0, int64_t heads, int64_t d) {
  const Tensor<T> xv = x.value().contiguous();
  SINKLAB_CHECK(xv.rank() == 3 && col0 >= 0 && col0 + heads * d <= xv.size(2), "split_heads: input ", xv.shape(),
                " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), L = xv.size(1), N = xv.size(2);
  Tensor<T> y = Tensor<T>::empty({B, heads, L, d});
  kernels::cpu::gather_heads(xv.data(), B, L, N, col0, heads, d, y.data(),
               [d](const T* src, T* dst, int64_t) { simd::copy(src, dst, d); });
  return x.tape->record(y, {x}, [x, col0, heads, d, B, L, N](Tape<T>& t, const Tensor<T>& g) {
    scatter_heads_grad(t, x, g.data(), B, L, N, col0, heads, d, [d](const T* src, T* dst, int64_t, bool add) {
      if (add)
        for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
      else
        simd::copy(src, dst, d);
    });
  });
}

// x [B, H, T, d] → [B, T, H·d].
template <class T>
Var<T> merge_heads(Var<T> x) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() == 4, "merge_heads: input must be [B, H, T, d], got ", xv.shape());
  const int64_t B = xv.size(0), H = xv.size(1), L = xv.size(2), d = xv.size(3);
  Tensor<T> y = Tensor<T>::empty({B, L, H * d});
  kernels::cpu::merge_heads(xv.data(), y.data(), B, H, L, d);
  return x.tape->record(y, {x}, [x, B, H, L, d](Tape<T>& t, const Tensor<T>& g) {
    bool fresh = false;
    T* gx = t.grad_buffer(x, fresh).data();
    kernels::cpu::merge_heads_grad(g.data(), gx, fresh, B, H, L, d);
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> split_heads(Var<float>, int64_t, int64_t, int64_t))
SINKLAB_EXTERN_TEMPLATE(Var<float> merge_heads(Var<float>))

}  // namespace sinklab::autodiff
