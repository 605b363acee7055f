// Head layouts and rotary embeddings for the CUDA backend, written against a SIMT context
// (kernels/simt.hpp): the same bodies run as CUDA kernels and, in tests, on the CPU emulator.
// The semantics are kernels/cpu/heads.hpp's and rope.hpp's: projections are token-major
// [B, L, N] (a head in columns [col0 + h·d, col0 + (h+1)·d)), attention is head-major
// [B, heads, L, d]; RoPE is rotate-half (channel i pairs with i + d/2), tables [positions, d/2],
// sign −1 the inverse rotation that the backward applies.
//
// A thread per OUTPUT element (grid-stride over all the grid's threads): every element has one
// writer, so accumulation (`fresh` false) needs no atomics, and consecutive threads write
// consecutive addresses. A rotated element reads its pair partner from the input, so the output
// must not overlap the input (the CPU's in-row order does not carry over to threads).
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

namespace detail {

// Element c of the row x rotated by (cos_p, sign·sin_p), as kernels::cpu::rope_row computes it.
// Channels from 2·half on (an odd d) are not rotated by the CPU either: callers skip them.
template <class T>
SINKLAB_HD T rope_element(const T* x, int64_t c, int64_t half, const T* cos_p, const T* sin_p, T sign) {
  const bool first = c < half;
  const int64_t i = first ? c : c - half;
  const T a = x[i], b = x[i + half], co = cos_p[i], s = sin_p[i] * sign;
  return first ? a * co - b * s : b * co + a * s;
}

// The token-major side of a head scatter: visits the elements of gx [B, L, N] that the heads
// g [B, heads, L, d] land in (columns [col0, col0 + heads·d)). When fresh every element of gx is
// visited and the columns outside the heads are zeroed (kernels::cpu::scatter_heads does the
// same, instead of a fill and an add); otherwise only the heads' columns, so a gx shared by
// several splits (q, k, v of one projection) is touched only where this one contributes.
// put(dst, g_row, c, t, add) writes or adds head channel c of g's row at token t.
template <class Ctx, class T, class Put>
SINKLAB_HD void scatter_heads(Ctx& ctx, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0,
                              int64_t heads, int64_t d, Put&& put) {
  const int64_t width = heads * d, cols = fresh ? N : width;
  for_each_element(ctx, B * L * cols, [&](int64_t k) {
    const int64_t r = k / cols, col = fresh ? k % cols : col0 + k % cols, j = col - col0;
    T* dst = gx + r * N + col;
    if (j < 0 || j >= width) {
      *dst = T(0);
      return;
    }
    const int64_t b = r / L, t = r % L, h = j / d;
    put(dst, ((b * heads + h) * L + t) * d, j % d, t, !fresh);
  });
}

}  // namespace detail

// Columns [col0, col0 + heads·d) of x [B, L, N] → y [B, heads, L, d].
template <class Ctx, class T>
SINKLAB_HD void split_heads(Ctx& ctx, const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                            int64_t d, T* y) {
  detail::for_each_element(ctx, B * heads * L * d, [&](int64_t k) {
    const int64_t c = k % d, row = k / d, t = row % L, bh = row / L;
    y[k] = x[((bh / heads) * L + t) * N + col0 + (bh % heads) * d + c];
  });
}

// Its backward: g [B, heads, L, d] into those columns of gx [B, L, N] (written when fresh, with
// the other columns zeroed; added otherwise).
template <class Ctx, class T>
SINKLAB_HD void split_heads_grad(Ctx& ctx, const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N,
                                 int64_t col0, int64_t heads, int64_t d) {
  detail::scatter_heads(ctx, gx, fresh, B, L, N, col0, heads, d, [&](T* dst, int64_t row, int64_t c, int64_t, bool add) {
    *dst = add ? *dst + g[row + c] : g[row + c];
  });
}

// x [B, H, L, d] → y [B, L, H·d].
template <class Ctx, class T>
SINKLAB_HD void merge_heads(Ctx& ctx, const T* x, T* y, int64_t B, int64_t H, int64_t L, int64_t d) {
  detail::for_each_element(ctx, B * L * H * d, [&](int64_t k) {
    const int64_t c = k % d, h = (k / d) % H, bt = k / (d * H), b = bt / L, t = bt % L;
    y[k] = x[((b * H + h) * L + t) * d + c];
  });
}

// Its backward: g [B, L, H·d] into gx [B, H, L, d], written when fresh, else added.
template <class Ctx, class T>
SINKLAB_HD void merge_heads_grad(Ctx& ctx, const T* g, T* gx, bool fresh, int64_t B, int64_t H, int64_t L,
                                 int64_t d) {
  detail::for_each_element(ctx, B * H * L * d, [&](int64_t k) {
    const int64_t c = k % d, t = (k / d) % L, bh = k / (d * L), b = bh / H, h = bh % H;
    const T v = g[(b * L + t) * H * d + h * d + c];
    gx[k] = fresh ? v : gx[k] + v;
  });
}

// Every row of x [outer, tlen, d] rotated to positions offset..offset+tlen−1 (sign +1) or back
// (sign −1) into y (not overlapping x).
template <class Ctx, class T>
SINKLAB_HD void rope_rotate(Ctx& ctx, const T* x, T* y, const T* cos, const T* sin, int64_t outer, int64_t tlen,
                            int64_t d, int64_t offset, T sign) {
  const int64_t half = d / 2;
  detail::for_each_element(ctx, outer * tlen * d, [&](int64_t k) {
    const int64_t c = k % d, r = k / d;
    if (c >= 2 * half) return;
    const int64_t p = offset + r % tlen;
    y[k] = detail::rope_element(x + r * d, c, half, cos + p * half, sin + p * half, sign);
  });
}

// Columns [col0, col0 + heads·d) of x [B, L, N] as heads y [B, heads, L, d], rotated to
// positions offset + t: the split and RoPE in one pass.
template <class Ctx, class T>
SINKLAB_HD void rope_gather(Ctx& ctx, const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                            int64_t d, const T* cos, const T* sin, int64_t offset, T* y) {
  const int64_t half = d / 2;
  detail::for_each_element(ctx, B * heads * L * d, [&](int64_t k) {
    const int64_t c = k % d, row = k / d, t = row % L, bh = row / L;
    if (c >= 2 * half) return;
    const int64_t p = offset + t;
    const T* src = x + ((bh / heads) * L + t) * N + col0 + (bh % heads) * d;
    y[k] = detail::rope_element(src, c, half, cos + p * half, sin + p * half, T(1));
  });
}

// The backward of rope_gather: g [B, heads, L, d] rotated back (sign −1) into columns
// [col0, col0 + heads·d) of gx [B, L, N] (written when fresh, other columns zeroed; added otherwise).
template <class Ctx, class T>
SINKLAB_HD void rope_gather_grad(Ctx& ctx, const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N,
                                 int64_t col0, int64_t heads, int64_t d, const T* cos, const T* sin, int64_t offset) {
  const int64_t half = d / 2;
  detail::scatter_heads(ctx, gx, fresh, B, L, N, col0, heads, d, [&](T* dst, int64_t row, int64_t c, int64_t t, bool add) {
    if (c >= 2 * half) return;
    const int64_t p = offset + t;
    const T v = detail::rope_element(g + row, c, half, cos + p * half, sin + p * half, T(-1));
    *dst = add ? v + *dst : v;
  });
}

// The gradient of a projection qkv [B, L, (H + 2·H_kv)·d] from dq [B, H, L, d] and dk, dv
// [B, H_kv, L, d] (GQA: H_kv ≤ H), every element written once: dq and dk rotated back from
// positions 0..L−1 when the tables are given (cos null: no RoPE), dv copied.
template <class Ctx, class T>
SINKLAB_HD void heads_grad_to_projection(Ctx& ctx, const T* dq, const T* dk, const T* dv, int64_t B, int64_t L,
                                         int64_t H, int64_t Hkv, int64_t d, const T* cos, const T* sin, T* gx) {
  const int64_t N = (H + 2 * Hkv) * d, half = d / 2;
  detail::for_each_element(ctx, B * L * N, [&](int64_t k) {
    const int64_t col = k % N, r = k / N, b = r / L, t = r % L, head = col / d, c = col % d;
    const bool is_q = head < H, is_k = !is_q && head < H + Hkv;
    const T* src = is_q ? dq : is_k ? dk : dv;
    const int64_t n = is_q ? H : Hkv, h = is_q ? head : is_k ? head - H : head - H - Hkv;
    const T* from = src + ((b * n + h) * L + t) * d;
    if (cos && (is_q || is_k)) {
      if (c >= 2 * half) return;
      gx[k] = detail::rope_element(from, c, half, cos + t * half, sin + t * half, T(-1));
    } else {
      gx[k] = from[c];
    }
  });
}

}  // namespace sinklab::kernels::cuda
