// Loops between the token-major layout of projections [B, T, columns] and the head-major layout
// of attention [B, heads, T, d_head] (autodiff/ops/heads.hpp and the RoPE split use them).
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::kernels::cpu {

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
// The backward of gather_heads: g [B, heads, T, d] into gx [B, T, N]. A fresh gx (its first
// contribution) is written (row(src, dst, t, false)) with the columns outside the heads zeroed,
// instead of zero-filling the whole buffer and adding; otherwise row(..., true) adds.
template <class T, class Row>
void scatter_heads(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                   int64_t d, Row&& row) {
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

// x [B, H, T, d] → y [B, T, H·d].
template <class T>
void merge_heads(const T* x, T* y, int64_t B, int64_t H, int64_t L, int64_t d) {
  parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < L; ++t) simd::copy(x + (r * L + t) * d, y + (b * L + t) * H * d + h * d, d);
    }
  });
}
// Its backward: g [B, T, H·d] into gx [B, H, T, d], written when fresh, else added.
template <class T>
void merge_heads_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t H, int64_t L, int64_t d) {
  parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t tt = 0; tt < L; ++tt) {
        T* dst = gx + (r * L + tt) * d;
        const T* src = g + (b * L + tt) * H * d + h * d;
        if (fresh)
          simd::copy(src, dst, d);
        else
          for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
      }
    }
  });
}

// Columns [col0, col0 + heads·d) of x [B, L, N] → y [B, heads, L, d].
template <class T>
void split_heads(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, T* y) {
  gather_heads(x, B, L, N, col0, heads, d, y, [d](const T* src, T* dst, int64_t) { simd::copy(src, dst, d); });
}
// Its backward: g [B, heads, L, d] into those columns of gx (written when fresh, added otherwise).
template <class T>
void split_heads_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                      int64_t d) {
  scatter_heads(g, gx, fresh, B, L, N, col0, heads, d, [d](const T* src, T* dst, int64_t, bool add) {
    if (add)
      simd::apply(dst, src, dst, d, [](auto a, auto b) { return a + b; });
    else
      simd::copy(src, dst, d);
  });
}

}  // namespace sinklab::kernels::cpu
