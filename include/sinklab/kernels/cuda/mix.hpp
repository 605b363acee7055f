// The anchor-mixing node ŝ = l1·γ₁·a + l2·γ₂·s (autodiff/ops/mix.hpp) for the CUDA backend,
// written against a SIMT context (kernels/simt.hpp); the semantics are kernels/cpu/mix.hpp's
// (MixPair: [B, H, L, C] operands, coefficients from h·head_stride, optional γ [B, L, K]).
//
// Layout: the element outputs (y, da, ds) a thread per element. The two reductions are a block
// per output, its threads striding over the output's terms and summing through simt::block_sum
// (fixed order, so deterministic, no atomics): the coefficient partials pl1, pl2 [B, ncoef] (one
// per batch row, as the CPU leaves them for the op to sum over b) over (h,) t (, c), and the γ
// gradient [B, L, K] over (h, c). A thread per output there would serialise H·L·C terms for a
// scalar coefficient. Shared memory: simt::block_sum_shared_bytes.
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// Coefficients per batch row of pl1 / pl2: one, one per head, or one per head channel.
template <class T>
SINKLAB_HD int64_t mix_coefficients(const MixPair<T>& m) {
  return m.head_stride == 0 ? 1 : m.head_stride == 1 ? m.H : m.H * m.C;
}

// y [B, H, L, C].
template <class Ctx, class T>
SINKLAB_HD void mix_pair_forward(Ctx& ctx, const MixPair<T>& m, T* y) {
  const int64_t H = m.H, L = m.L, C = m.C;
  detail::for_each_element(ctx, m.B * H * L * C, [&](int64_t k) {
    const int64_t c = k % C, row = k / C, t = row % L, bh = row / L, b = bh / H, h = bh % H;
    const int64_t at = m.coef_row(h) + (m.per_channel ? c : 0);
    const T u1 = m.scale(b, t, m.col1) * m.l1[at];
    y[k] = m.s ? u1 * m.a[k] + m.scale(b, t, m.col2) * m.l2[at] * m.s[k] : u1 * m.a[k];
  });
}

// da, ds [B, H, L, C] written (either may be null; ds is unused without s).
template <class Ctx, class T>
SINKLAB_HD void mix_pair_backward_inputs(Ctx& ctx, const MixPair<T>& m, const T* dy, T* da, T* ds) {
  const int64_t H = m.H, L = m.L, C = m.C;
  detail::for_each_element(ctx, m.B * H * L * C, [&](int64_t k) {
    const int64_t c = k % C, row = k / C, t = row % L, bh = row / L, b = bh / H, h = bh % H;
    const int64_t at = m.coef_row(h) + (m.per_channel ? c : 0);
    if (da) da[k] = dy[k] * m.l1[at] * m.scale(b, t, m.col1);
    if (m.s && ds) ds[k] = dy[k] * m.l2[at] * m.scale(b, t, m.col2);
  });
}

// pl1 (and pl2 with s) [B, ncoef] += each batch row's coefficient gradients
// Σ dy ⊙ a · γ₁ (Σ dy ⊙ s · γ₂) over the elements a coefficient multiplies; a block per output.
template <class Ctx, class T>
SINKLAB_HD void mix_pair_backward_coefficients(Ctx& ctx, const MixPair<T>& m, const T* dy, T* pl1, T* pl2) {
  T* scratch = ctx.template shared<T>();
  const int64_t H = m.H, L = m.L, C = m.C, ncoef = mix_coefficients(m);
  // The terms of output j: per channel, t for the fixed (h, c) = j; per head, (t, c) of head j;
  // scalar, (h, t, c).
  const int64_t cs = m.per_channel ? 1 : C, hs = m.per_channel || m.head_stride == 1 ? 1 : H;
  const int64_t terms = hs * L * cs;
  for (int64_t o = ctx.block(); o < m.B * ncoef; o += ctx.blocks()) {
    const int64_t b = o / ncoef, j = o % ncoef;
    T s1 = T(0), s2 = T(0);
    for (int64_t e = ctx.thread(); e < terms; e += ctx.threads()) {
      const int64_t t = (e / cs) % L;
      const int64_t h = m.per_channel ? j / C : m.head_stride == 1 ? j : e / (cs * L);
      const int64_t c = m.per_channel ? j % C : e % cs;
      const int64_t k = ((b * H + h) * L + t) * C + c;
      s1 += dy[k] * m.a[k] * m.scale(b, t, m.col1);
      if (m.s) s2 += dy[k] * m.s[k] * m.scale(b, t, m.col2);
    }
    s1 = simt::block_sum(ctx, s1, scratch);
    if (m.s) s2 = simt::block_sum(ctx, s2, scratch);  // m.s is the block's alike: every thread calls it
    if (ctx.thread() == 0) {
      pl1[o] += s1;
      if (m.s && pl2) pl2[o] += s2;
    }
  }
}

// dgamma [B, L, K] += Σ_(h, c) dy ⊙ a · l1 at column col1 (and dy ⊙ s · l2 at col2 with s);
// a block per token row (b, t).
template <class Ctx, class T>
SINKLAB_HD void mix_pair_backward_gamma(Ctx& ctx, const MixPair<T>& m, const T* dy, T* dgamma) {
  T* scratch = ctx.template shared<T>();
  const int64_t H = m.H, L = m.L, C = m.C;
  for (int64_t r = ctx.block(); r < m.B * L; r += ctx.blocks()) {
    const int64_t b = r / L, t = r % L;
    T s1 = T(0), s2 = T(0);
    for (int64_t e = ctx.thread(); e < H * C; e += ctx.threads()) {
      const int64_t h = e / C, c = e % C;
      const int64_t k = ((b * H + h) * L + t) * C + c, at = m.coef_row(h) + (m.per_channel ? c : 0);
      s1 += dy[k] * m.a[k] * m.l1[at];
      if (m.s) s2 += dy[k] * m.s[k] * m.l2[at];
    }
    s1 = simt::block_sum(ctx, s1, scratch);
    if (m.s) s2 = simt::block_sum(ctx, s2, scratch);
    if (ctx.thread() == 0) {
      dgamma[r * m.K + m.col1] += s1;
      if (m.s) dgamma[r * m.K + m.col2] += s2;  // after col1's: the same thread, so col1 == col2 adds both
    }
  }
}

}  // namespace sinklab::kernels::cuda
