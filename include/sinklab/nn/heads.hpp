// Moving between the token-major layout of projections [B, T, columns] and the head-major
// layout of attention [B, heads, T, d_head], as differentiable copies.
#pragma once
#include <algorithm>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::nn {

// Rows of heads between a projection's layout x [B, T, N] (heads in columns [col0, col0 + heads·d))
// and the head-major layout y [B, heads, T, d]. Both loops run over token rows (one x row holds
// every head of a token) and call row(src, dst, t) per head.
template <class T, class Row>
void gather_heads(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, T* y, Row&& row) {
  parallel_for(0, B * L, std::max<int64_t>(1, 4096 / std::max<int64_t>(heads * d, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / L, t = r % L;
      const T* src = x + r * N + col0;
      for (int64_t h = 0; h < heads; ++h) row(src + h * d, y + ((b * heads + h) * L + t) * d, t);
    }
  });
}
// The backward: g [B, heads, T, d] into x's gradient. Its first contribution writes (row(src,
// dst, t, false)) and zeroes the columns outside the heads, instead of zero-filling the whole
// buffer and adding; later ones add (row(..., true)).
template <class T, class Row>
void scatter_heads_grad(autodiff::Tape<T>& tape, autodiff::Var<T> x, const T* g, int64_t B, int64_t L, int64_t N,
                        int64_t col0, int64_t heads, int64_t d, Row&& row) {
  bool fresh = false;
  T* gx = tape.grad_buffer(x, fresh).data();
  const int64_t end = col0 + heads * d;
  parallel_for(0, B * L, std::max<int64_t>(1, 4096 / std::max<int64_t>(heads * d, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / L, t = r % L;
      T* dst = gx + r * N;
      if (fresh) {
        std::fill(dst, dst + col0, T(0));
        std::fill(dst + end, dst + N, T(0));
      }
      for (int64_t h = 0; h < heads; ++h) row(g + ((b * heads + h) * L + t) * d, dst + col0 + h * d, t, !fresh);
    }
  });
}

// Columns [col0, col0 + heads·d) of x [B, T, N] as [B, heads, T, d].
template <class T>
autodiff::Var<T> split_heads(autodiff::Var<T> x, int64_t col0, int64_t heads, int64_t d) {
  const Tensor<T> xv = x.value().contiguous();
  SINKLAB_CHECK(xv.rank() == 3 && col0 >= 0 && col0 + heads * d <= xv.size(2), "split_heads: input ", xv.shape(),
                " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), L = xv.size(1), N = xv.size(2);
  Tensor<T> y = Tensor<T>::empty({B, heads, L, d});
  gather_heads(xv.data(), B, L, N, col0, heads, d, y.data(),
               [d](const T* src, T* dst, int64_t) { simd::copy(src, dst, d); });
  return x.tape->record(y, {x}, [x, col0, heads, d, B, L, N](autodiff::Tape<T>& t, const Tensor<T>& g) {
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
autodiff::Var<T> merge_heads(autodiff::Var<T> x) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() == 4, "merge_heads: input must be [B, H, T, d], got ", xv.shape());
  const int64_t B = xv.size(0), H = xv.size(1), L = xv.size(2), d = xv.size(3);
  Tensor<T> y = Tensor<T>::empty({B, L, H * d});
  parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < L; ++t)
        simd::copy(xv.data() + (r * L + t) * d, y.data() + (b * L + t) * H * d + h * d, d);
    }
  });
  return x.tape->record(y, {x}, [x, B, H, L, d](autodiff::Tape<T>& t, const Tensor<T>& g) {
    bool fresh = false;
    T* gx = t.grad_buffer(x, fresh).data();
    parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        for (int64_t tt = 0; tt < L; ++tt) {
          T* dst = gx + (r * L + tt) * d;
          const T* src = g.data() + (b * L + tt) * H * d + h * d;
          if (fresh)
            simd::copy(src, dst, d);
          else
            for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
        }
      }
    });
  });
}

}  // namespace sinklab::nn
