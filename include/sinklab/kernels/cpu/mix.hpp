// CPU loops of the anchor-mixing node ŝ = l1·γ₁·a + l2·γ₂·s (autodiff/ops/mix.hpp), over
// [B, H, T, C] rows; coefficients per head start at h·head_stride (0 scalar, 1 per head, C per
// element), per-token scales γ [B, T, K] are optional.
#pragma once
#include <cstdint>
#include <type_traits>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/backend.hpp"

namespace sinklab::kernels::cpu {

using kernels::MixPair;

// y [B, H, L, C].
template <class T>
void mix_pair_forward(const MixPair<T>& m, T* y) {
  const int64_t B = m.B, H = m.H, L = m.L, C = m.C;
  const bool has_s = m.s != nullptr, per_channel = m.per_channel;
  auto coef_row = [&m](int64_t h) { return m.coef_row(h); };
  auto scale = [&m](int64_t b, int64_t t, int64_t col) { return m.scale(b, t, col); };
  const int64_t col1 = m.col1, col2 = m.col2;
  parallel_for(0, B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      const T* k1 = m.l1 + coef_row(h);
      const T* k2 = has_s ? m.l2 + coef_row(h) : nullptr;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = (r * L + t) * C;
        const T* ar = m.a + row;
        const T* sr = has_s ? m.s + row : nullptr;
        T* yr = y + row;
        const T g1 = scale(b, t, col1), g2 = has_s ? scale(b, t, col2) : T(0);
        if (per_channel) {
          if (sr)
            for (int64_t c = 0; c < C; ++c) yr[c] = g1 * k1[c] * ar[c] + g2 * k2[c] * sr[c];
          else
            for (int64_t c = 0; c < C; ++c) yr[c] = g1 * k1[c] * ar[c];
        } else {
          const T u1 = g1 * k1[0], u2 = sr ? g2 * k2[0] : T(0);
          if (sr)
            for (int64_t c = 0; c < C; ++c) yr[c] = u1 * ar[c] + u2 * sr[c];
          else
            for (int64_t c = 0; c < C; ++c) yr[c] = u1 * ar[c];
        }
      }
    }
  });
}

// da, ds [B, H, L, C] written; pl1, pl2 [B, ncoef] zeroed by the caller, each batch row's
// coefficient gradients (summed over b by the caller); dgamma [B, L, K] accumulated, may be null.
template <class T>
void mix_pair_backward(const MixPair<T>& m, const T* dy, T* da, T* ds, T* pl1, T* pl2, T* dgamma) {
  const int64_t H = m.H, L = m.L, C = m.C, K = m.K, col1 = m.col1, col2 = m.col2;
  const int64_t ncoef = m.head_stride == 0 ? 1 : m.head_stride == 1 ? H : H * C;
  const bool has_s = m.s != nullptr, per_channel = m.per_channel;
  auto coef_row = [&m](int64_t h) { return m.coef_row(h); };
  auto scale = [&m](int64_t b, int64_t t, int64_t col) { return m.scale(b, t, col); };
  T* dg = dgamma;
  auto rows = [&](auto per_channel_c, auto has_s_c, int64_t b) {
    constexpr bool PC = decltype(per_channel_c)::value, HS = decltype(has_s_c)::value;
    T* q1 = pl1 + b * ncoef;
    T* q2 = HS ? pl2 + b * ncoef : nullptr;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = coef_row(h);
      const T* k1 = m.l1 + off;
      const T* k2 = HS ? m.l2 + off : nullptr;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = ((b * H + h) * L + t) * C;
        const T* g = dy + row;
        const T* ar = m.a + row;
        T* dar = da + row;
        const T g1 = scale(b, t, col1);
        T sg1 = 0, dl1 = 0;
        for (int64_t c = 0; c < C; ++c) {
          const T k = PC ? k1[c] : k1[0];
          const T ga = g[c] * ar[c];
          sg1 += ga * k;
          if constexpr (PC)
            q1[off + c] += ga * g1;
          else
            dl1 += ga;
          dar[c] = g[c] * k * g1;
        }
        if constexpr (!PC) q1[off] += dl1 * g1;
        if (dg) dg[(b * L + t) * K + col1] += sg1;
        if constexpr (HS) {
          const T* sr = m.s + row;
          T* dsr = ds + row;
          const T g2 = scale(b, t, col2);
          T sg2 = 0, dl2 = 0;
          for (int64_t c = 0; c < C; ++c) {
            const T k = PC ? k2[c] : k2[0];
            const T gs = g[c] * sr[c];
            sg2 += gs * k;
            if constexpr (PC)
              q2[off + c] += gs * g2;
            else
              dl2 += gs;
            dsr[c] = g[c] * k * g2;
          }
          if constexpr (!PC) q2[off] += dl2 * g2;
          if (dg) dg[(b * L + t) * K + col2] += sg2;
        }
      }
    }
  };
  parallel_for(0, m.B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      using yes = std::true_type;
      using no = std::false_type;
      if (per_channel && has_s)
        rows(yes{}, yes{}, b);
      else if (per_channel)
        rows(yes{}, no{}, b);
      else if (has_s)
        rows(no{}, yes{}, b);
      else
        rows(no{}, no{}, b);
    }
  });
}

}  // namespace sinklab::kernels::cpu
