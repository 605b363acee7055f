// Moving between the token-major layout of projections [B, T, columns] and the head-major
// layout of attention [B, heads, T, d_head], as differentiable copies.
#pragma once
#include <cstring>

#include "sinklab/autodiff/autodiff.hpp"

namespace sinklab::nn {

// Columns [col0, col0 + heads·d) of x [B, T, N] as [B, heads, T, d].
template <class T>
autodiff::Var<T> split_heads(autodiff::Var<T> x, int64_t col0, int64_t heads, int64_t d) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() == 3 && col0 >= 0 && col0 + heads * d <= xv.size(2), "split_heads: input ", xv.shape(),
                " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), L = xv.size(1), N = xv.size(2);
  Tensor<T> y = Tensor<T>::empty({B, heads, L, d});
  parallel_for(0, B * heads, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / heads, h = r % heads;
      for (int64_t t = 0; t < L; ++t)
        std::memcpy(y.data() + (r * L + t) * d, xv.data() + (b * L + t) * N + col0 + h * d, sizeof(T) * d);
    }
  });
  return x.tape->record(y, {x}, [x, col0, heads, d, B, L, N](autodiff::Tape<T>& t, const Tensor<T>& g) {
    T* gx = t.grad_buffer(x).data();
    parallel_for(0, B * heads, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / heads, h = r % heads;
        for (int64_t tt = 0; tt < L; ++tt) {
          T* dst = gx + (b * L + tt) * N + col0 + h * d;
          const T* src = g.data() + (r * L + tt) * d;
          for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
        }
      }
    });
  });
}

// x [B, H, T, d] → [B, T, H·d].
template <class T>
autodiff::Var<T> merge_heads(autodiff::Var<T> x) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() == 4, "merge_heads: input must be [B, H, T, d], got ", xv.shape());
  const int64_t B = xv.size(0), H = xv.size(1), L = xv.size(2), d = xv.size(3);
  Tensor<T> y = Tensor<T>::empty({B, L, H * d});
  parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < L; ++t)
        std::memcpy(y.data() + (b * L + t) * H * d + h * d, xv.data() + (r * L + t) * d, sizeof(T) * d);
    }
  });
  return x.tape->record(y, {x}, [x, B, H, L, d](autodiff::Tape<T>& t, const Tensor<T>& g) {
    T* gx = t.grad_buffer(x).data();
    parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        for (int64_t tt = 0; tt < L; ++tt) {
          T* dst = gx + (r * L + tt) * d;
          const T* src = g.data() + (b * L + tt) * H * d + h * d;
          for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
        }
      }
    });
  });
}

}  // namespace sinklab::nn
