// Fused attention forward for the CUDA backend, written once against a SIMT context
// (kernels/simt.hpp) and instantiated from the same score:: / mask:: policies as the CPU kernels:
// the policy element math (OnlineRow, weight, row constants, a logits transform) is the code the
// CPU runs. FlashAttention-2's loop: a block holds `threads` query rows of one (batch, head), one
// row per thread; key/value tiles of block_k rows are loaded into shared memory by the whole block
// and every thread updates its row from them with the score family's row update
// (policy/row_update.hpp: softmax's online normaliser, clipped softmax's two passes, the
// point-wise row constants), so the loop never asks which family runs.
//
// Shapes as the CPU kernels': q, out [B, H, T, d], k, v [B, H_kv, S, d] contiguous, lse [B, H, T];
// kv_lengths [B] (may be null) valid keys per batch entry. Shared memory per block:
// attention_forward_shared_bytes<T>(threads, block_k, d) — K and V tiles, and each thread's query
// row, accumulator row and scores of the current tile. A thread's own rows are interleaved with
// the other threads' (detail::LaneRow), so a warp touching element c of its rows hits 32 banks
// instead of one; the tiles are read by every thread at the same address (a broadcast). The grid
// is blocks over (batch, head, query block), grid-stride. Gates and value transforms run around
// the core as separate kernels (attention_transforms.hpp), as on the CPU. Not here: tensor-core
// tiles (the arithmetic is float or double on the CUDA cores).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/online_row.hpp"
#include "sinklab/policy/row_update.hpp"
#include "sinklab/policy/score.hpp"

namespace sinklab::kernels::cuda {

struct AttentionShape {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, d = 0;
  double scale = 0.0;                  // multiplies q·k (any sign, as the CPU's); 0: 1/√d
  int64_t block_k = 32;                // keys per shared-memory tile
  const int64_t* kv_lengths = nullptr;  // [B] or null (all S)
};

template <class T>
SINKLAB_HD std::size_t attention_forward_shared_bytes(int64_t threads, int64_t block_k, int64_t d) {
  return static_cast<std::size_t>(2 * block_k * d + 2 * threads * d + threads * block_k) * sizeof(T);
}

namespace detail {

// One thread's row in shared memory, interleaved with the rows of the block's other threads:
// element c at base[c · threads].
template <class T>
struct LaneRow {
  T* base;
  int64_t stride;
  SINKLAB_HD T& operator[](int64_t c) const { return base[c * stride]; }
};
// Thread tid's row among the block's interleaved rows that start at `at`.
template <class T>
SINKLAB_HD LaneRow<T> lane_row(T* at, int64_t tid, int64_t threads) {
  return {at + tid, threads};
}

template <class A, class T>
SINKLAB_HD T dot(const A& a, const T* b, int64_t d) {
  T s = T(0);
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}
// Copies a global row into a thread's lane row.
template <class T>
SINKLAB_HD void load_row(const LaneRow<T>& dst, const T* src, int64_t d) {
  for (int64_t c = 0; c < d; ++c) dst[c] = src[c];
}

// The four dot products a·b_m, b_m = b0 + m·d (m < 4): each element of a is read once, and the
// four sums are independent chains.
template <class A, class T>
SINKLAB_HD void dot4(const A& a, const T* b0, int64_t d, T out[4]) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
  for (int64_t c = 0; c < d; ++c) {
    const T x = a[c];
    s0 += x * b0[c];
    s1 += x * b0[d + c];
    s2 += x * b0[2 * d + c];
    s3 += x * b0[3 * d + c];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}
// acc += Σ_m w[m] · b_m, b_m = b0 + m·d (m < 4): the accumulator row is read and written once.
template <class T>
SINKLAB_HD void axpy4(const LaneRow<T>& acc, const T w[4], const T* b0, int64_t d) {
  for (int64_t c = 0; c < d; ++c) acc[c] += w[0] * b0[c] + w[1] * b0[d + c] + w[2] * b0[2 * d + c] + w[3] * b0[3 * d + c];
}

// s[j] = scale · q·k_j for the first n keys of the tile kt [·, d], four keys at a time.
template <class T>
SINKLAB_HD void tile_scores(const LaneRow<T>& s, const LaneRow<T>& q, const T* kt, int64_t n, int64_t d, T scale) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    T r[4];
    dot4(q, kt + j * d, d, r);
    for (int m = 0; m < 4; ++m) s[j + m] = r[m] * scale;
  }
  for (; j < n; ++j) s[j] = dot(q, kt + j * d, d) * scale;
}

// acc += Σ_j w[j] · v_j over the first n values of the tile vt [·, d], four at a time.
template <class T>
SINKLAB_HD void tile_accumulate(const LaneRow<T>& acc, const LaneRow<T>& w, const T* vt, int64_t n, int64_t d) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const T wj[4] = {w[j], w[j + 1], w[j + 2], w[j + 3]};
    axpy4(acc, wj, vt + j * d, d);
  }
  for (; j < n; ++j) {
    const T wj = w[j];
    for (int64_t c = 0; c < d; ++c) acc[c] += wj * vt[j * d + c];
  }
}

// A thread's n visible scores of the tile, as a row update sees them (policy/row_update.hpp);
// the kernels aggregate only these n.
template <class T>
struct TileRow {
  LaneRow<T> s;
  int64_t n;
  SINKLAB_HD T max() const {
    T mx = T(-std::numeric_limits<double>::infinity());
    for (int64_t j = 0; j < n; ++j) mx = mx < s[j] ? s[j] : mx;
    return mx;
  }
  template <class F>
  SINKLAB_HD T map_sum(F&& f) {
    T sum = T(0);
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = static_cast<T>(f(s[j])));
    return sum;
  }
  template <class F>
  SINKLAB_HD void map(F&& f) {
    for (int64_t j = 0; j < n; ++j) s[j] = static_cast<T>(f(s[j]));
  }
};

// The factor on q·k: AttentionShape::scale, or 1/√d.
template <class T>
SINKLAB_HD T attention_scale(const AttentionShape& sh) {
  using std::sqrt;
  return static_cast<T>(sh.scale != 0.0 ? sh.scale : 1.0 / sqrt(static_cast<double>(sh.d)));
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
  const int64_t d = sh.d, Bk = sh.block_k, threads = ctx.threads(), tid = ctx.thread();
  const int64_t query_blocks = (sh.T + threads - 1) / threads, group = sh.H / sh.Hkv;
  const T scale = detail::attention_scale<T>(sh);
  T* kt = ctx.template shared<T>();  // [Bk, d]
  T* vt = kt + Bk * d;               // [Bk, d]
  const detail::LaneRow<T> qi = detail::lane_row(vt + Bk * d, tid, threads);                 // query row [d]
  const detail::LaneRow<T> acc = detail::lane_row(vt + Bk * d + threads * d, tid, threads);  // output row [d]
  const detail::LaneRow<T> s = detail::lane_row(vt + Bk * d + 2 * threads * d, tid, threads);  // scores of the tile [Bk]

  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks;
    const int64_t b = bh / sh.H, h = bh % sh.H, hk = h / group;
    const int64_t i = qb * threads + tid;
    const bool active = i < sh.T;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    const int64_t e = active ? Mask::key_end(i, sh.T, sh.S, kvlen) : 0;
    const int64_t kend = detail::block_key_end<Mask>(qb, threads, sh.T, sh.S, kvlen);
    detail::load_row(qi, q + (bh * sh.T + (active ? i : 0)) * d, d);
    const T* kb = k + (b * sh.Hkv + hk) * sh.S * d;
    const T* vb = v + (b * sh.Hkv + hk) * sh.S * d;
    for (int64_t c = 0; c < d; ++c) acc[c] = T(0);

    // One sweep over the key tiles; `visit(n)` sees this thread's n visible scores of the tile in
    // s[0..n) and the tile's values in vt, and may overwrite s with weights for tile_accumulate.
    auto sweep = [&](auto&& visit) {
      for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
        const int64_t cols = kend - j0 < Bk ? kend - j0 : Bk;
        detail::load_kv_tile(ctx, kt, vt, kb, vb, j0, cols, d);
        ctx.sync();
        const int64_t n = e > j0 ? (e - j0 < cols ? e - j0 : cols) : 0;
        detail::tile_scores(s, qi, kt, n, d, scale);
        if constexpr (score::HasLogitsTransform<Score>)
          for (int64_t j = 0; j < n; ++j) s[j] = static_cast<T>(score.logits(s[j]));
        visit(n);
        ctx.sync();
      }
    };

    using U = score::row_update_t<Score, T>;
    U u(score, args, h, e, kvlen);
    for (int pass = 0; pass < U::passes; ++pass) {
      const bool accumulate = U::accumulates(pass);
      sweep([&](int64_t n) {
        if (n == 0) return;
        detail::TileRow<T> tile{s, n};
        const T alpha = u.block(score, pass, tile);
        if (!accumulate) return;
        if (alpha != T(1))
          for (int64_t c = 0; c < d; ++c) acc[c] *= alpha;
        detail::tile_accumulate(acc, s, vt, n, d);
      });
      u.end_pass(pass);
    }
    if (active) {
      const T f = u.out_scale();
      for (int64_t c = 0; c < d; ++c) out[(bh * sh.T + i) * d + c] = acc[c] * f;
      if constexpr (U::saves_lse) lse[bh * sh.T + i] = u.lse();
    }
  }
}

}  // namespace sinklab::kernels::cuda
