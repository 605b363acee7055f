// Fused attention backward on the tensor cores (FlashAttention-2's), written against a SIMT
// context (kernels/simt.hpp, simt_mma.hpp) from the same score:: / mask:: policies, whose pair
// math (the score family's row gradient, policy/row_update.hpp, with simt::FastExp) it shares
// with the CUDA-core kernels (detail::pair_grad, attention_backward.hpp):
//
//   dA = dO·Vᵀ;  softmax family  dS = P ∘ (w'(P) ∘ dA − D),  P = e^{S − lse}
//                point-wise      dS = c_i h'(S + b_i) ∘ dA
//   dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Wᵀ·dO  (W the forward's weights)
//
// Every output is written by one warp, without atomics, so the gradients are deterministic:
//   attention_mma_backward_rows   a warp per query row: D_i = dO_i·O_i and a sink's row term
//   attention_mma_backward_q      64 query rows per block, 16 per warp; key tiles stream through
//                                 shared memory (cp.async, double-buffered): S = Q·Kᵀ and
//                                 dA = dO·Vᵀ recomputed, dQ += dS·K. With Statistics it computes
//                                 D_i = Σ_j g.delta_term instead (where the row gradient needs a
//                                 sweep: clipped softmax, whose D is not dO·O) and a sink's row term
//   attention_mma_backward_kv     64 keys of a (batch, kv head) per block, 16 per warp; query
//                                 tiles of every head of the group stream through shared memory
//                                 with their lse and D: Sᵀ = K·Qᵀ, dAᵀ = V·dOᵀ, dV += Wᵀ·dO,
//                                 dK += dSᵀ·Q
// and the sink's per-head sum is attention_backward_params (attention_backward.hpp). Operands
// are codes of E (bf16, fp16): q, k, v, dO; out, lse, D and the gradients are float. The
// weights and dS are rounded to E before their products, as FlashAttention-2 rounds them.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/kernels/cuda/attention_backward.hpp"
#include "sinklab/kernels/cuda/attention_mma.hpp"

namespace sinklab::kernels::cuda {

template <int D>
SINKLAB_HD constexpr std::size_t attention_mma_backward_q_shared_bytes() {
  return static_cast<std::size_t>(6 * mma::Tile<D>::kElems) * sizeof(uint16_t);  // Q, dO, K ×2, V ×2
}
template <int D>
SINKLAB_HD constexpr std::size_t attention_mma_backward_kv_shared_bytes() {
  // K, V, Q ×2, dO ×2; per buffered query tile two floats a row (its row gradient: lse and D,
  // or the point-wise row constants) and the row's key end
  return static_cast<std::size_t>(6 * mma::Tile<D>::kElems) * sizeof(uint16_t) +
         2 * mma::kRows * (2 * sizeof(float) + sizeof(int64_t));
}
SINKLAB_HD inline int64_t attention_mma_backward_kv_blocks(const AttentionShape& sh) {
  return sh.B * sh.Hkv * ((sh.S + mma::kRows - 1) / mma::kRows);
}

// D [B, H, T] = Σ_c dO·O per row and, for a score with row parameters (a sink), row_grad.
template <class E, class Ctx, class Score>
SINKLAB_HD void attention_mma_backward_rows(Ctx& ctx, const Score& score,
                                            const typename Score::template Args<float>& args, const float* out,
                                            const float* lse, const uint16_t* dout, float* D, float* row_grad,
                                            const AttentionShape& sh) {
  const int64_t warps = ctx.threads() / simt::kWarp, rows = sh.B * sh.H * sh.T;
  for (int64_t r = ctx.block() * warps + ctx.thread() / simt::kWarp; r < rows; r += ctx.blocks() * warps) {
    float s = 0.f;
    for (int64_t c = ctx.lane(); c < sh.d; c += simt::kWarp) s += E::to_float(dout[r * sh.d + c]) * out[r * sh.d + c];
    s = ctx.warp_sum(s);
    if (ctx.lane() == 0) {
      D[r] = s;
      if constexpr (score::HasRowParamGrad<Score, float>)
        if (row_grad) row_grad[r] = score.row_param_grad(args, (r / sh.T) % sh.H, lse[r], s);
    }
  }
}

// dQ [B, H, T, D] (or, with Statistics, D and row_grad [B, H, T]).
template <class E, int D, bool Statistics, class Ctx, class Score, class Mask>
SINKLAB_HD void attention_mma_backward_q(Ctx& ctx, const Score& score, const typename Score::template Args<float>& args,
                                         const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                                         float* Drow, const uint16_t* dout, float* dq, float* row_grad,
                                         const AttentionShape& sh) {
  using mma::kRows;
  using Tile = mma::Tile<D>;
  constexpr int N = kRows / 8;
  using G = score::row_grad_t<Score, float, simt::FastExp>;
  static_assert(!Statistics || G::delta == score::Delta::FromKeys,
                "attention_mma_backward_q: statistics are for a row gradient whose D needs a sweep");
  const int tid = static_cast<int>(ctx.thread()), warp = tid / simt::kWarp, lane = ctx.lane();
  const int g = lane / 4, t = lane % 4;
  const int64_t query_blocks = (sh.T + kRows - 1) / kRows, group = sh.H / sh.Hkv;
  const float scale = detail::attention_scale<float>(sh);
  uint16_t* qs = ctx.template shared<uint16_t>();
  uint16_t* dos = qs + Tile::kElems;
  uint16_t* ks = dos + Tile::kElems;  // two buffers
  uint16_t* vs = ks + 2 * Tile::kElems;

  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks;
    const int64_t b = bh / sh.H, h = bh % sh.H, hk = h / group, q0 = qb * kRows;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    const int64_t rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    int64_t e[2];
    G rg[2];  // the two rows' gradients
    for (int hh = 0; hh < 2; ++hh) {
      const bool in = rows[hh] < sh.T;
      e[hh] = in ? Mask::key_end(rows[hh], sh.T, sh.S, kvlen) : 0;
      rg[hh] = G(score, e[hh], kvlen, in && lse ? lse[bh * sh.T + rows[hh]] : 0.f,
                 in && !Statistics && Drow ? Drow[bh * sh.T + rows[hh]] : 0.f);
    }
    const int64_t kend = detail::block_key_end<Mask>(qb, kRows, sh.T, sh.S, kvlen);
    const int64_t tiles = (kend + kRows - 1) / kRows;
    const uint16_t* kb = k + (b * sh.Hkv + hk) * sh.S * D;
    const uint16_t* vb = v + (b * sh.Hkv + hk) * sh.S * D;
    float acc[D / 8][4];
    mma::zero(acc);
    float dsum[2] = {0.f, 0.f};

    mma::load_tile<D>(ctx, qs, q + (bh * sh.T + q0) * D, sh.T - q0);
    mma::load_tile<D>(ctx, dos, dout + (bh * sh.T + q0) * D, sh.T - q0);
    if (tiles > 0) {
      mma::load_tile<D>(ctx, ks, kb, kend);
      mma::load_tile<D>(ctx, vs, vb, kend);
    }
    simt::cp_async_commit(ctx);
    for (int64_t j = 0; j < tiles; ++j) {
      const int buf = static_cast<int>(j % 2);
      mma::next_kv_tile<D>(ctx, ks, vs, kb, vb, j, tiles, kend);
      if (mma::sees_from<Mask>(q0 + warp * 16, 16, sh.T, sh.T, sh.S, kvlen, j * kRows)) {
        float s[N][4], da[N][4];
        mma::zero(s);
        mma::zero(da);
        mma::mma_abt<E, D, kRows>(ctx, s, qs, warp * 16, ks + buf * Tile::kElems, 0);
        mma::mma_abt<E, D, kRows>(ctx, da, dos, warp * 16, vs + buf * Tile::kElems, 0);
        const int lim[2] = {mma::visible_in_tile(e[0], j * kRows), mma::visible_in_tile(e[1], j * kRows)};
        for (int n = 0; n < N; ++n)
          for (int x = 0; x < 4; ++x) {
            const int hh = x / 2;
            const bool seen = 8 * n + 2 * t + x % 2 < lim[hh];
            const float raw = s[n][x] * scale;
            // Selects rather than branches around each element's math (see the forward's row update).
            if constexpr (Statistics) {
              float sv = raw;
              if constexpr (score::HasLogitsTransform<Score>) sv = static_cast<float>(score.logits(raw));
              const float term = static_cast<float>(rg[hh].delta_term(score, rg[hh].pre(sv), da[n][x]));
              dsum[hh] += seen ? term : 0.f;
            } else {
              const float ds = scale * detail::pair_grad(score, rg[hh], raw, da[n][x]).ds;
              s[n][x] = seen ? ds : 0.f;
            }
          }
        if constexpr (!Statistics) {
          uint32_t ds[kRows / 16][4];
          mma::pack_a<E, kRows>(s, ds);
          mma::mma_pb<E, D, kRows>(ctx, acc, ds, ks + buf * Tile::kElems, 0);
        }
      }
      ctx.sync();
    }
    if (tiles == 0) {
      simt::cp_async_wait<0>(ctx);
      ctx.sync();
    }
    for (int hh = 0; hh < 2; ++hh) {
      if constexpr (Statistics) {
        const float Di = mma::quad_sum(ctx, dsum[hh]);
        if (t == 0 && rows[hh] < sh.T) {
          Drow[bh * sh.T + rows[hh]] = Di;
          if constexpr (score::HasRowParamGrad<Score, float>)
            if (row_grad) row_grad[bh * sh.T + rows[hh]] = score.row_param_grad(args, h, lse[bh * sh.T + rows[hh]], Di);
        }
      } else if (rows[hh] < sh.T) {
        float* dst = dq + (bh * sh.T + rows[hh]) * D + 2 * t;
        for (int n = 0; n < D / 8; ++n) {
          dst[8 * n] = acc[n][2 * hh];
          dst[8 * n + 1] = acc[n][2 * hh + 1];
        }
      }
    }
  }
}

// dK, dV [B, H_kv, S, D]; D [B, H, T] from the rows (or statistics) kernel for the softmax family.
template <class E, int D, class Ctx, class Score, class Mask>
SINKLAB_HD void attention_mma_backward_kv(Ctx& ctx, const Score& score, const uint16_t* q, const uint16_t* k,
                                          const uint16_t* v, const float* lse, const float* Drow,
                                          const uint16_t* dout, float* dk, float* dv, const AttentionShape& sh) {
  using mma::kRows;
  using Tile = mma::Tile<D>;
  constexpr int NQ = D == 128 ? 32 : 64;  // queries per step: fewer at D = 128 keeps dK, dV in registers
  using G = score::row_grad_t<Score, float, simt::FastExp>;
  const int tid = static_cast<int>(ctx.thread()), warp = tid / simt::kWarp, lane = ctx.lane();
  const int g = lane / 4, t = lane % 4;
  const int64_t key_blocks = (sh.S + kRows - 1) / kRows, group = sh.H / sh.Hkv;
  const int64_t query_tiles = (sh.T + kRows - 1) / kRows, items = group * query_tiles;
  const float scale = detail::attention_scale<float>(sh);
  uint16_t* ks = ctx.template shared<uint16_t>();
  uint16_t* vs = ks + Tile::kElems;
  uint16_t* qs = vs + Tile::kElems;   // two buffers
  uint16_t* dos = qs + 2 * Tile::kElems;  // two buffers
  float* row_a = reinterpret_cast<float*>(dos + 2 * Tile::kElems);  // [2][64]
  float* row_b = row_a + 2 * kRows;                                  // [2][64]
  int64_t* row_e = reinterpret_cast<int64_t*>(row_b + 2 * kRows);    // [2][64]

  for (int64_t blk = ctx.block(); blk < sh.B * sh.Hkv * key_blocks; blk += ctx.blocks()) {
    const int64_t bk = blk / key_blocks, kb = blk % key_blocks, b = bk / sh.Hkv, hk = bk % sh.Hkv;
    const int64_t j0 = kb * kRows, kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    // The (head, query tile) items of the group in order, skipping tiles that see none of these keys.
    auto next = [&](int64_t x) {
      while (x < items && !mma::sees_from<Mask>((x % query_tiles) * kRows, kRows, sh.T, sh.T, sh.S, kvlen, j0)) ++x;
      return x;
    };
    // Issues item x's query tile and dO into buffer `buf` and writes its rows' constants.
    auto load = [&](int64_t x, int buf) {
      const int64_t bh = b * sh.H + hk * group + x / query_tiles, i0 = (x % query_tiles) * kRows;
      mma::load_tile<D>(ctx, qs + buf * Tile::kElems, q + (bh * sh.T + i0) * D, sh.T - i0);
      mma::load_tile<D>(ctx, dos + buf * Tile::kElems, dout + (bh * sh.T + i0) * D, sh.T - i0);
      simt::cp_async_commit(ctx);
      for (int r = tid; r < kRows; r += mma::kThreads) {
        const int64_t i = i0 + r;
        const int64_t e = i < sh.T ? Mask::key_end(i, sh.T, sh.S, kvlen) : 0;
        row_e[buf * kRows + r] = e;
        const G rg(score, e, kvlen, i < sh.T && lse ? lse[bh * sh.T + i] : 0.f,
                   i < sh.T && Drow ? Drow[bh * sh.T + i] : 0.f);
        row_a[buf * kRows + r] = rg.a;
        row_b[buf * kRows + r] = rg.b;
      }
    };

    float dka[D / 8][4], dva[D / 8][4];
    mma::zero(dka);
    mma::zero(dva);
    mma::load_tile<D>(ctx, ks, k + (bk * sh.S + j0) * D, kvlen - j0);
    mma::load_tile<D>(ctx, vs, v + (bk * sh.S + j0) * D, kvlen - j0);
    const int64_t first = next(0);
    int64_t x = first;
    if (x < items) {
      load(x, 0);  // commits K and V with the first query tile
    } else {
      simt::cp_async_commit(ctx);
    }
    for (int it = 0; x < items; ++it) {
      const int buf = it % 2;
      const int64_t x_next = next(x + 1);
      if (x_next < items) {
        load(x_next, 1 - buf);
        simt::cp_async_wait<1>(ctx);
      } else {
        simt::cp_async_wait<0>(ctx);
      }
      ctx.sync();
      const float* ra = row_a + buf * kRows;
      const float* rb = row_b + buf * kRows;
      const int64_t* re = row_e + buf * kRows;
      const int64_t jw = j0 + warp * 16;  // this warp's first key
      const bool any = mma::sees_from<Mask>((x % query_tiles) * kRows, kRows, sh.T, sh.T, sh.S, kvlen, jw);
      for (int c0 = 0; any && c0 < kRows; c0 += NQ) {
        float st[NQ / 8][4], dat[NQ / 8][4];
        mma::zero(st);
        mma::zero(dat);
        mma::mma_abt<E, D, NQ>(ctx, st, ks, warp * 16, qs + buf * Tile::kElems, c0);
        mma::mma_abt<E, D, NQ>(ctx, dat, vs, warp * 16, dos + buf * Tile::kElems, c0);
        for (int n = 0; n < NQ / 8; ++n)
          for (int xx = 0; xx < 4; ++xx) {
            const int64_t j = jw + g + 8 * (xx / 2);
            const int r = c0 + 8 * n + 2 * t + xx % 2;
            const bool seen = j < re[r];
            const detail::PairGrad<float> pg =
                detail::pair_grad(score, G::from(ra[r], rb[r]), st[n][xx] * scale, dat[n][xx]);
            st[n][xx] = seen ? pg.a : 0.f;
            dat[n][xx] = seen ? scale * pg.ds : 0.f;
          }
        uint32_t wa[NQ / 16][4], dsa[NQ / 16][4];
        mma::pack_a<E, NQ>(st, wa);
        mma::pack_a<E, NQ>(dat, dsa);
        mma::mma_pb<E, D, NQ>(ctx, dva, wa, dos + buf * Tile::kElems, c0);
        mma::mma_pb<E, D, NQ>(ctx, dka, dsa, qs + buf * Tile::kElems, c0);
      }
      ctx.sync();
      x = x_next;
    }
    if (first >= items) {  // no query tile: complete the key tile's copies all the same
      simt::cp_async_wait<0>(ctx);
      ctx.sync();
    }
    for (int hh = 0; hh < 2; ++hh) {
      const int64_t j = j0 + warp * 16 + g + 8 * hh;
      if (j >= sh.S) continue;
      float* dkr = dk + (bk * sh.S + j) * D + 2 * t;
      float* dvr = dv + (bk * sh.S + j) * D + 2 * t;
      for (int n = 0; n < D / 8; ++n) {
        dkr[8 * n] = dka[n][2 * hh];
        dkr[8 * n + 1] = dka[n][2 * hh + 1];
        dvr[8 * n] = dva[n][2 * hh];
        dvr[8 * n + 1] = dva[n][2 * hh + 1];
      }
    }
  }
}

}  // namespace sinklab::kernels::cuda
