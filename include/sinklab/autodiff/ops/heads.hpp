// Moving between the token-major layout of projections [B, T, columns] and the head-major
// layout of attention [B, heads, T, d_head], as differentiable copies.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

// Columns [col0, col0 + heads·d) of x [B, T, N] as [B, heads, T, d].
template <class T, class D>
Var<T, D> split_heads(Var<T, D> x, int64_t col0, int64_t heads, int64_t d) {
  const Tensor<T, D> xv = x.value().contiguous();
  SINKLAB_CHECK(xv.rank() == 3 && col0 >= 0 && col0 + heads * d <= xv.size(2), "split_heads: input ", xv.shape(),
                " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), L = xv.size(1), N = xv.size(2);
  Tensor<T, D> y = Tensor<T, D>::empty({B, heads, L, d});
  backend<D>::split_heads(xv.data(), B, L, N, col0, heads, d, y.data());
  return x.tape->record(y, {x}, [x, col0, heads, d, B, L, N](Tape<T, D>& t, const Tensor<T, D>& g) {
    bool fresh = false;
    T* gx = t.grad_buffer(x, fresh).data();
    backend<D>::split_heads_grad(g.data(), gx, fresh, B, L, N, col0, heads, d);
  });
}

// x [B, H, T, d] → [B, T, H·d].
template <class T, class D>
Var<T, D> merge_heads(Var<T, D> x) {
  const Tensor<T, D>& xv = x.value();
  SINKLAB_CHECK(xv.rank() == 4, "merge_heads: input must be [B, H, T, d], got ", xv.shape());
  const int64_t B = xv.size(0), H = xv.size(1), L = xv.size(2), d = xv.size(3);
  Tensor<T, D> y = Tensor<T, D>::empty({B, L, H * d});
  backend<D>::merge_heads(xv.data(), y.data(), B, H, L, d);
  return x.tape->record(y, {x}, [x, B, H, L, d](Tape<T, D>& t, const Tensor<T, D>& g) {
    bool fresh = false;
    T* gx = t.grad_buffer(x, fresh).data();
    backend<D>::merge_heads_grad(g.data(), gx, fresh, B, H, L, d);
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> split_heads(Var<float>, int64_t, int64_t, int64_t))
SINKLAB_EXTERN_TEMPLATE(Var<float> merge_heads(Var<float>))

}  // namespace sinklab::autodiff
