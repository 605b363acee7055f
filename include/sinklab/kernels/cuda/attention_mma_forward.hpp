// Fused attention forward on the tensor cores (FlashAttention-2's loop), written against a SIMT
// context (kernels/simt.hpp, simt_mma.hpp) and instantiated from the same score:: / mask::
// policies as every other attention kernel: the policy's element math (OnlineRow, weight, the
// row constants, a logits transform) is applied to the accumulator fragments' elements.
//
// A block of four warps holds 64 query rows of one (batch, head), 16 per warp; key and value
// tiles of 64 rows stream through shared memory, double-buffered with cp.async (the next tile is
// in flight while the warps work on this one). Per tile and warp: S = Q·Kᵀ (16 × 64, mma.m16n8k16
// on E = bf16 or fp16 codes, float sums), the scores scaled and masked, the row update of the
// score family, then O += W·V with W packed from S's registers (attention_mma.hpp):
//
//   softmax family  one pass, the online normaliser of each row (score::OnlineRow, a sink starts
//                   the row) kept identical on the four lanes that hold the row; out = O / l, lse
//   clipped softmax two passes: the first finds lse, the second aggregates clip(weight(p)) · v
//   point-wise      one pass, w = c_i · h(s + b_i) with the score's row constants; lse untouched
//
// The row update is the only place the families differ (the score family's, policy/row_update.hpp,
// with simt::FastExp, seeing each of a thread's two rows through mma::FragmentRow); the loop never
// asks.
// Shapes: q [B, H, T, D], k, v [B, H_kv, S, D] as dense codes of E; out [B, H, T, D] and lse
// [B, H, T] float; kv_lengths as AttentionShape says. D is 32, 64 or 128. The weights are
// rounded to E before W·V, as FlashAttention-2 rounds P; the scores and the normaliser stay float.
// fp16 keeps 3 more mantissa bits than bf16 but only values below 65504: a point-wise weight
// beyond that (a polynomial score of large logits) becomes infinity in fp16, not in bf16.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/kernels/cuda/attention_forward.hpp"
#include "sinklab/kernels/cuda/attention_mma.hpp"

namespace sinklab::kernels::cuda {

template <int D>
SINKLAB_HD constexpr std::size_t attention_mma_forward_shared_bytes() {
  return static_cast<std::size_t>(5 * mma::Tile<D>::kElems) * sizeof(uint16_t);  // Q, K ×2, V ×2
}
SINKLAB_HD inline int64_t attention_mma_forward_blocks(const AttentionShape& sh) {
  return sh.B * sh.H * ((sh.T + mma::kRows - 1) / mma::kRows);
}

namespace mma {

// Row h (0 or 1: g or g + 8 of its warp's 16) of a thread's score fragment as a row update sees
// it (policy/row_update.hpp): elements 2h and 2h + 1 of every n-tile, the rest of the row on the
// other three lanes of the quad (reductions go through the quad), `seen[n][x]` whether element x
// is a visible key. Selects, not branches: every element takes the same few instructions (a
// branch per element around a full-precision exp made this loop most of the kernel's
// instructions).
template <class Ctx, int N>
struct FragmentRow {
  Ctx& ctx;
  float (&s)[N][4];
  const bool (&seen)[N][4];
  int h;

  SINKLAB_HD float max() {
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    float mx = kNone;
    for (int n = 0; n < N; ++n)
      for (int x = 2 * h; x < 2 * h + 2; ++x) {
        const float v = seen[n][x] ? s[n][x] : kNone;
        mx = mx < v ? v : mx;
      }
    return quad_max(ctx, mx);
  }
  template <class F>
  SINKLAB_HD void map(F&& f) {
    for (int n = 0; n < N; ++n)
      for (int x = 2 * h; x < 2 * h + 2; ++x) {
        const float w = static_cast<float>(f(s[n][x]));
        s[n][x] = seen[n][x] ? w : 0.f;
      }
  }
  template <class F>
  SINKLAB_HD float map_sum(F&& f) {
    map(f);
    float sum = 0.f;
    for (int n = 0; n < N; ++n)
      for (int x = 2 * h; x < 2 * h + 2; ++x) sum += s[n][x];
    return quad_sum(ctx, sum);
  }
};

}  // namespace mma

template <class E, int D, class Ctx, class Score, class Mask>
SINKLAB_HD void attention_mma_forward(Ctx& ctx, const Score& score, const typename Score::template Args<float>& args,
                                      const uint16_t* q, const uint16_t* k, const uint16_t* v, float* out, float* lse,
                                      const AttentionShape& sh) {
  using mma::kRows;
  constexpr int N = kRows / 8;  // n-tiles of a score tile
  const int tid = static_cast<int>(ctx.thread()), warp = tid / simt::kWarp, lane = ctx.lane();
  const int g = lane / 4, t = lane % 4;
  const int64_t query_blocks = (sh.T + kRows - 1) / kRows, group = sh.H / sh.Hkv;
  const float scale = detail::attention_scale<float>(sh);
  uint16_t* qs = ctx.template shared<uint16_t>();
  uint16_t* ks = qs + mma::Tile<D>::kElems;  // two buffers
  uint16_t* vs = ks + 2 * mma::Tile<D>::kElems;

  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks;
    const int64_t b = bh / sh.H, h = bh % sh.H, hk = h / group, q0 = qb * kRows;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    const int64_t rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int64_t e[2] = {rows[0] < sh.T ? Mask::key_end(rows[0], sh.T, sh.S, kvlen) : 0,
                          rows[1] < sh.T ? Mask::key_end(rows[1], sh.T, sh.S, kvlen) : 0};
    const int64_t kend = detail::block_key_end<Mask>(qb, kRows, sh.T, sh.S, kvlen);
    const uint16_t* kb = k + (b * sh.Hkv + hk) * sh.S * D;
    const uint16_t* vb = v + (b * sh.Hkv + hk) * sh.S * D;
    const int64_t tiles = (kend + kRows - 1) / kRows;
    float o[D / 8][4];
    mma::zero(o);

    using U = score::row_update_t<Score, float, simt::FastExp>;
    U update[2] = {U(score, args, h, e[0], kvlen), U(score, args, h, e[1], kvlen)};

    // One sweep over the key tiles: the row update turns each tile's scores into weights, which
    // multiply V in the passes that aggregate (not clipped softmax's first, which finds lse).
    auto sweep = [&](int pass) {
      const bool accumulate = U::accumulates(pass);
      mma::load_tile<D>(ctx, qs, q + (bh * sh.T + q0) * D, sh.T - q0);
      for (int64_t j = 0; j < tiles; ++j) {
        const int buf = static_cast<int>(j % 2);
        if (j == 0) {
          mma::load_tile<D>(ctx, ks, kb, kend);
          mma::load_tile<D>(ctx, vs, vb, kend);
          simt::cp_async_commit(ctx);
        }
        mma::next_kv_tile<D>(ctx, ks, vs, kb, vb, j, tiles, kend);
        // A warp none of whose rows sees this tile skips it (the condition is the warp's own).
        if (mma::sees_from<Mask>(q0 + warp * 16, 16, sh.T, sh.T, sh.S, kvlen, j * kRows)) {
          float s[N][4];
          bool seen[N][4];
          mma::zero(s);
          mma::mma_abt<E, D, kRows>(ctx, s, qs, warp * 16, ks + buf * mma::Tile<D>::kElems, 0);
          const int lim[2] = {mma::visible_in_tile(e[0], j * kRows), mma::visible_in_tile(e[1], j * kRows)};
          for (int n = 0; n < N; ++n)
            for (int x = 0; x < 4; ++x) {
              seen[n][x] = 8 * n + 2 * t + x % 2 < lim[x / 2];
              float sv = s[n][x] * scale;
              if constexpr (score::HasLogitsTransform<Score>) sv = static_cast<float>(score.logits(sv));
              s[n][x] = sv;
            }
          float alpha[2];
          for (int hh = 0; hh < 2; ++hh) {
            mma::FragmentRow<Ctx, N> row{ctx, s, seen, hh};
            alpha[hh] = update[hh].block(score, pass, row);
          }
          if (accumulate) {
            for (int n = 0; n < D / 8; ++n)
              for (int x = 0; x < 4; ++x) o[n][x] *= alpha[x / 2];
            uint32_t w[kRows / 16][4];
            mma::pack_a<E, kRows>(s, w);
            mma::mma_pb<E, D, kRows>(ctx, o, w, vs + buf * mma::Tile<D>::kElems, 0);
          }
        }
        ctx.sync();  // every warp is done with this buffer before it is refilled
      }
      if (tiles == 0) {  // nothing to sweep: complete the query tile's copies all the same
        simt::cp_async_commit(ctx);
        simt::cp_async_wait<0>(ctx);
        ctx.sync();
      }
      for (int hh = 0; hh < 2; ++hh) update[hh].end_pass(pass);
    };
    for (int pass = 0; pass < U::passes; ++pass) sweep(pass);

    for (int hh = 0; hh < 2; ++hh) {
      if (rows[hh] >= sh.T) continue;
      const float f = update[hh].out_scale();
      float* dst = out + (bh * sh.T + rows[hh]) * D + 2 * t;
      for (int n = 0; n < D / 8; ++n) {
        dst[8 * n] = o[n][2 * hh] * f;
        dst[8 * n + 1] = o[n][2 * hh + 1] * f;
      }
      if constexpr (U::saves_lse)
        if (t == 0) lse[bh * sh.T + rows[hh]] = update[hh].lse();
    }
  }
}

}  // namespace sinklab::kernels::cuda
