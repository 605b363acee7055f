// Fused attention forward for the CUDA backend, written once against a SIMT context
// (kernels/simt.hpp) and instantiated from the same score:: / mask:: policies as the CPU kernels:
// the policy element math (OnlineRow, weight, row constants, a logits transform) is the code the
// CPU runs. FlashAttention-2's loop: a block holds `threads` query rows of one (batch, head), one
// row per thread; key/value tiles of block_k rows are loaded into shared memory by the whole block
// and every thread updates its row from them:
//
//   softmax family  one pass, online normaliser (score::OnlineRow; a sink starts the row), the
//                   partial output rescaled when the max grows; out = acc / l, saves lse
//   clipped softmax two passes: the first finds lse, the second aggregates clip(weight(p)) · v
//   point-wise      one pass, a = c_i · h(s + b_i) with the score's row constants; lse untouched
//
// Shapes as the CPU kernels': q, out [B, H, T, d], k, v [B, H_kv, S, d] contiguous, lse [B, H, T];
// kv_lengths [B] (may be null) valid keys per batch entry. Shared memory per block:
// attention_forward_shared_bytes<T>(threads, block_k, d) — K and V tiles, each thread's
// accumulator row and its scores of the current tile. The grid is blocks over (batch, head,
// query block), grid-stride. Not yet here: gates and value transforms around the core (the CPU
// applies them as separate elementwise kernels), the backward, tensor-core tiles.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/online_row.hpp"
#include "sinklab/policy/score.hpp"

namespace sinklab::kernels::cuda {

struct AttentionShape {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, d = 0;
  double scale = 0.0;                  // multiplies q·k; 0: 1/√d
  int64_t block_k = 32;                // keys per shared-memory tile
  const int64_t* kv_lengths = nullptr;  // [B] or null (all S)
};

template <class T>
SINKLAB_HD std::size_t attention_forward_shared_bytes(int64_t threads, int64_t block_k, int64_t d) {
  return static_cast<std::size_t>(2 * block_k * d + threads * d + threads * block_k) * sizeof(T);
}

namespace detail {
template <class T>
SINKLAB_HD T dot(const T* a, const T* b, int64_t d) {
  T s = T(0);
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// The factor on q·k: AttentionShape::scale, or 1/√d.
template <class T>
SINKLAB_HD T attention_scale(const AttentionShape& sh) {
  using std::sqrt;
  return static_cast<T>(sh.scale > 0 ? sh.scale : 1.0 / sqrt(static_cast<double>(sh.d)));
}

// The end of the keys any row of query block qb (rows qb·threads ...) sees: the same on every
// thread of the block, so loops over key tiles up to it keep the block's barriers together.
template <class Mask>
SINKLAB_HD int64_t block_key_end(int64_t qb, int64_t threads, int64_t T, int64_t S, int64_t kvlen) {
  int64_t end = 0;
  for (int64_t r = qb * threads; r < qb * threads + threads && r < T; ++r) {
    const int64_t e = Mask::key_end(r, T, S, kvlen);
    end = e > end ? e : end;
  }
  return end;
}
// The block loads keys and values [j0, j0 + cols) of one head into the shared tiles.
template <class Ctx, class T>
SINKLAB_HD void load_kv_tile(Ctx& ctx, T* kt, T* vt, const T* kb, const T* vb, int64_t j0, int64_t cols, int64_t d) {
  for (int64_t x = ctx.thread(); x < cols * d; x += ctx.threads()) {
    kt[x] = kb[j0 * d + x];
    vt[x] = vb[j0 * d + x];
  }
}
}  // namespace detail

// Blocks of `threads` rows that cover the queries of every (batch, head).
SINKLAB_HD inline int64_t attention_forward_blocks(const AttentionShape& sh, int64_t threads) {
  return sh.B * sh.H * ((sh.T + threads - 1) / threads);
}

template <class Ctx, class Score, class Mask, class T>
SINKLAB_HD void attention_forward(Ctx& ctx, const Score& score, const typename Score::template Args<T>& args,
                                  const T* q, const T* k, const T* v, T* out, T* lse, const AttentionShape& sh) {
  using std::exp;
  using std::max;
  constexpr bool normalised = Score::family == score::Family::Normalised;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t d = sh.d, Bk = sh.block_k, threads = ctx.threads(), tid = ctx.thread();
  const int64_t query_blocks = (sh.T + threads - 1) / threads, group = sh.H / sh.Hkv;
  const T scale = detail::attention_scale<T>(sh);
  T* kt = ctx.template shared<T>();  // [Bk, d]
  T* vt = kt + Bk * d;               // [Bk, d]
  T* acc = vt + Bk * d + tid * d;    // this thread's output row [d]
  T* s = vt + Bk * d + threads * d + tid * Bk;  // this thread's scores of the tile [Bk]

  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks;
    const int64_t b = bh / sh.H, h = bh % sh.H, hk = h / group;
    const int64_t i = qb * threads + tid;
    const bool active = i < sh.T;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    const int64_t e = active ? Mask::key_end(i, sh.T, sh.S, kvlen) : 0;
    const int64_t kend = detail::block_key_end<Mask>(qb, threads, sh.T, sh.S, kvlen);
    const T* qi = q + (bh * sh.T + (active ? i : 0)) * d;
    const T* kb = k + (b * sh.Hkv + hk) * sh.S * d;
    const T* vb = v + (b * sh.Hkv + hk) * sh.S * d;
    for (int64_t c = 0; c < d; ++c) acc[c] = T(0);

    // One sweep over the key tiles; `visit(n)` sees this thread's n visible scores of the tile in
    // s[0..n) and the tile's values in vt.
    auto sweep = [&](auto&& visit) {
      for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
        const int64_t cols = kend - j0 < Bk ? kend - j0 : Bk;
        detail::load_kv_tile(ctx, kt, vt, kb, vb, j0, cols, d);
        ctx.sync();
        const int64_t n = e > j0 ? (e - j0 < cols ? e - j0 : cols) : 0;
        for (int64_t j = 0; j < n; ++j) {
          s[j] = detail::dot(qi, kt + j * d, d) * scale;
          if constexpr (score::HasLogitsTransform<Score>) s[j] = static_cast<T>(score.logits(s[j]));
        }
        visit(n);
        ctx.sync();
      }
    };
    auto aggregate = [&](int64_t j, T a) {
      for (int64_t c = 0; c < d; ++c) acc[c] += a * vt[j * d + c];
    };

    if constexpr (normalised) {
      score::OnlineRow<T> row = score.template start<T>(args, h);
      if constexpr (!Score::clipped) {
        sweep([&](int64_t n) {
          if (n == 0) return;
          T mx = ninf;
          for (int64_t j = 0; j < n; ++j) mx = max(mx, s[j]);
          const T alpha = row.rescale(mx);
          for (int64_t c = 0; c < d; ++c) acc[c] *= alpha;
          T sum = T(0);
          for (int64_t j = 0; j < n; ++j) {
            const T p = exp(s[j] - row.shift());
            sum += p;
            aggregate(j, p);
          }
          row.add(sum);
        });
        const T l = row.sum();
        if (active)
          for (int64_t c = 0; c < d; ++c) out[(bh * sh.T + i) * d + c] = l > T(0) ? acc[c] / l : T(0);
      } else {
        sweep([&](int64_t n) {
          if (n == 0) return;
          T mx = ninf;
          for (int64_t j = 0; j < n; ++j) mx = max(mx, s[j]);
          row.rescale(mx);
          T sum = T(0);
          for (int64_t j = 0; j < n; ++j) sum += exp(s[j] - row.shift());
          row.add(sum);
        });
        const T lr = row.lse();
        sweep([&](int64_t n) {
          if (lr == ninf) return;
          for (int64_t j = 0; j < n; ++j) aggregate(j, static_cast<T>(score.weight(exp(s[j] - lr))));
        });
        if (active)
          for (int64_t c = 0; c < d; ++c) out[(bh * sh.T + i) * d + c] = acc[c];
      }
      if (active) lse[bh * sh.T + i] = row.lse();
    } else {
      const score::RowConstants rc = score.row(e, kvlen);
      const T rs = static_cast<T>(rc.scale), rb = static_cast<T>(rc.bias);
      sweep([&](int64_t n) {
        for (int64_t j = 0; j < n; ++j) aggregate(j, static_cast<T>(score.weight(s[j], rs, rb)));
      });
      if (active)
        for (int64_t c = 0; c < d; ++c) out[(bh * sh.T + i) * d + c] = acc[c];
    }
  }
}

}  // namespace sinklab::kernels::cuda
