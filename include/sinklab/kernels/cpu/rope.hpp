// CPU rows of rotary position embeddings (the rotate-half convention of autodiff/ops/rope.hpp):
// one row, all rows of a [outer, T, d] tensor, and the head split of a projection fused with it.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/heads.hpp"
#include "sinklab/kernels/cpu/rows.hpp"

namespace sinklab::kernels::cpu {

// One row of RoPE at position p: y = rotate(x) (sign +1) or its inverse, the transpose, used by
// the backward (sign −1); with `add` the result is added to y instead of written.
template <class T>
inline void rope_row(const T* x, T* y, const T* cos_p, const T* sin_p, int64_t half, T sign, bool add) {
  const T* x2 = x + half;
  T* y2 = y + half;
  simd::loop<T>(half, [&](auto v, int64_t i) {
    using V = decltype(v);
    const V a = simd::load<V>(x + i), b = simd::load<V>(x2 + i);
    const V c = simd::load<V>(cos_p + i), s = simd::load<V>(sin_p + i) * V(sign);
    V o1 = a * c - b * s, o2 = b * c + a * s;
    if (add) {
      o1 += simd::load<V>(y + i);
      o2 += simd::load<V>(y2 + i);
    }
    simd::store(y + i, o1);
    simd::store(y2 + i, o2);
  });
}

// Rotates every row of x [outer, T, d] by the angles of positions offset..offset+T−1.
template <class T>
void rope_rotate(const T* x, T* y, const T* cos, const T* sin, int64_t outer, int64_t tlen, int64_t d, int64_t offset,
                 T sign) {
  const int64_t half = d / 2;
  parallel_for(0, outer * tlen, detail::row_grain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t p = offset + r % tlen;
      rope_row(x + r * d, y + r * d, cos + p * half, sin + p * half, half, sign, false);
    }
  });
}
// Columns [col0, col0 + heads·d) of x [B, L, N] as heads y [B, heads, L, d], rotated to
// positions offset + t: the split and RoPE in one pass.
template <class T>
void rope_gather(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, const T* cos,
                 const T* sin, int64_t offset, T* y) {
  const int64_t half = d / 2;
  gather_heads(x, B, L, N, col0, heads, d, y, [&](const T* src, T* dst, int64_t t) {
    const int64_t p = offset + t;
    rope_row(src, dst, cos + p * half, sin + p * half, half, T(1), false);
  });
}
// The gradient of a projection qkv [B, L, (H + 2·H_kv)·d] from the head-major gradients dq
// [B, H, L, d], dk and dv [B, H_kv, L, d], in one token-major pass that writes every element
// once (rows in order, which streams): dq and dk rotated back by the tables when given (RoPE
// was applied at positions 0..L−1), else copied; dv copied.
template <class T>
void heads_grad_to_projection(const T* dq, const T* dk, const T* dv, int64_t B, int64_t L, int64_t H, int64_t Hkv,
                              int64_t d, const T* cos, const T* sin, T* gx) {
  const int64_t N = (H + 2 * Hkv) * d, half = d / 2;
  const bool rope = cos != nullptr;
  parallel_for(0, B * L, std::max<int64_t>(1, 4096 / N), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / L, tt = r % L;
      T* dst = gx + r * N;
      const T* cp = rope ? cos + tt * half : nullptr;
      const T* sp = rope ? sin + tt * half : nullptr;
      auto put = [&](const T* src, int64_t n, int64_t h0, bool rotate) {
        for (int64_t h = 0; h < n; ++h) {
          const T* from = src + ((b * n + h) * L + tt) * d;
          if (rotate) rope_row(from, dst + (h0 + h) * d, cp, sp, half, T(-1), false);
          else simd::copy(from, dst + (h0 + h) * d, d);
        }
      };
      put(dq, H, 0, rope);
      put(dk, Hkv, H, rope);
      put(dv, Hkv, H + Hkv, false);
    }
  });
}

// The backward of rope_gather: g [B, heads, L, d] rotated back (angle −p·θ) into columns
// [col0, col0 + heads·d) of gx [B, L, N] (written when fresh, added otherwise).
template <class T>
void rope_gather_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                      int64_t d, const T* cos, const T* sin, int64_t offset) {
  const int64_t half = d / 2;
  scatter_heads(g, gx, fresh, B, L, N, col0, heads, d, [&](const T* src, T* dst, int64_t t, bool add) {
    const int64_t p = offset + t;
    rope_row(src, dst, cos + p * half, sin + p * half, half, T(-1), add);
  });
}

}  // namespace sinklab::kernels::cpu
