// Fused attention backward for the CUDA backend, written against a SIMT context (kernels/simt.hpp)
// from the same score:: / mask:: policies as the CPU kernels; every pair's weight and gradient
// come from the score family's row gradient (policy/row_update.hpp), as on the CPU:
//
//   dA = dO·Vᵀ;  u = g.pre(S), a = g.weight(u), dS = g.dscore(u, dA)
//   (softmax family: u = P = e^{S − lse}, dS = P ∘ (w'(P) ∘ dA − D), D_i = Σ_j P_ij w'(P_ij) dA_ij,
//   which is dO_i·O_i without clipping; point-wise: dS = c_i h'(S + b_i) ∘ dA)
//   a logits transform multiplies dS by its derivative; dQ = scale·dS·K, dK = scale·dSᵀ·Q,
//   dV = Aᵀ·dO; a learnable sink gets Σ_i row_param_grad(lse_i, D_i) per head.
//
// Four kernels, each output written by one thread (deterministic, no atomics), the logits
// recomputed from q, k and the saved lse as FlashAttention-2 does:
//   attention_backward_rows     a thread per query row: D_i (dO_i·O_i, or a sweep over key tiles
//                               where the row gradient needs one) and the row's sink-gradient term
//   attention_backward_kv       a thread per key row of a (batch, kv head): over the query
//                               heads of its group and query tiles in shared memory, dK_j, dV_j
//   attention_backward_q        a thread per query row: over key tiles in shared memory, dQ_i
//   attention_backward_params   a block per head: the row terms summed in a fixed tree
// Shapes as the forward's (attention_forward.hpp); out and lse are the forward's results.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "sinklab/kernels/cuda/attention_forward.hpp"

namespace sinklab::kernels::cuda {

namespace detail {

template <class T>
struct PairGrad {
  T a;   // the weight that multiplied v_j in the forward
  T ds;  // ∂L/∂(raw scaled logit)
};

// One (query i, key j) pair from its raw scaled logit and dA_ij, by the row's gradient g
// (policy/row_update.hpp; its Exp: std, or simt::FastExp in the tensor-core kernels).
template <class Score, class G, class T>
SINKLAB_HD PairGrad<T> pair_grad(const Score& score, const G& g, T raw, T dA) {
  T s = raw, tg = T(1);
  if constexpr (score::HasLogitsTransform<Score>) {
    tg = static_cast<T>(score.logits_grad(raw));
    s = static_cast<T>(score.logits(raw));
  }
  const T u = g.pre(s);
  return {static_cast<T>(g.weight(score, u)), static_cast<T>(g.dscore(score, u, dA)) * tg};
}

}  // namespace detail

template <class T>
SINKLAB_HD std::size_t attention_backward_shared_bytes(int64_t threads, int64_t block_k, int64_t d) {
  // the larger of: K/V tiles + a thread's q, dO and dq rows (rows, q kernels); Q/dO tiles + lse, D
  // + a thread's k, v, dk and dv rows (kv kernel). Thread rows are interleaved (detail::LaneRow).
  const int64_t rows_q = 2 * block_k * d + 3 * threads * d;
  const int64_t kv = 2 * threads * d + 2 * threads + 4 * threads * d;
  return static_cast<std::size_t>(rows_q > kv ? rows_q : kv) * sizeof(T);
}

// D [B, H, T] and, for a score with learnable row parameters (a sink), row_grad [B, H, T].
template <class Ctx, class Score, class Mask, class T>
SINKLAB_HD void attention_backward_rows(Ctx& ctx, const Score& score, const typename Score::template Args<T>& args,
                                        const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout,
                                        T* D, T* row_grad, const AttentionShape& sh) {
  using G = score::row_grad_t<Score, T>;
  static_assert(G::delta != score::Delta::None, "attention_backward_rows: for a row gradient that needs D");
  const int64_t d = sh.d, Bk = sh.block_k, threads = ctx.threads(), tid = ctx.thread();
  const int64_t query_blocks = (sh.T + threads - 1) / threads, group = sh.H / sh.Hkv;
  const T scale = detail::attention_scale<T>(sh);
  T* kt = ctx.template shared<T>();
  T* vt = kt + Bk * d;
  const detail::LaneRow<T> qi = detail::lane_row(vt + Bk * d, tid, threads);
  const detail::LaneRow<T> oi = detail::lane_row(vt + Bk * d + threads * d, tid, threads);  // dO row
  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks, b = bh / sh.H, h = bh % sh.H;
    const int64_t i = qb * threads + tid, row = bh * sh.T + i;
    const bool active = i < sh.T;
    T Di = T(0);
    if constexpr (G::delta == score::Delta::FromOutput) {
      if (active) Di = detail::dot(dout + row * d, out + row * d, d);
    } else {  // Σ_j P w'(P) dA over the visible keys, tile by tile
      const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
      const int64_t e = active ? Mask::key_end(i, sh.T, sh.S, kvlen) : 0;
      const int64_t kend = detail::block_key_end<Mask>(qb, threads, sh.T, sh.S, kvlen);
      const T* kb = k + (b * sh.Hkv + h / group) * sh.S * d;
      const T* vb = v + (b * sh.Hkv + h / group) * sh.S * d;
      const G g(score, e, kvlen, active ? lse[row] : T(0), T(0));
      if (active) {
        detail::load_row(qi, q + row * d, d);
        detail::load_row(oi, dout + row * d, d);
      }
      for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
        const int64_t cols = kend - j0 < Bk ? kend - j0 : Bk;
        detail::load_kv_tile(ctx, kt, vt, kb, vb, j0, cols, d);
        ctx.sync();
        for (int64_t j = 0; active && j0 + j < e && j < cols; ++j) {
          T s = detail::dot(qi, kt + j * d, d) * scale;
          if constexpr (score::HasLogitsTransform<Score>) s = static_cast<T>(score.logits(s));
          Di += static_cast<T>(g.delta_term(score, g.pre(s), detail::dot(oi, vt + j * d, d)));
        }
        ctx.sync();
      }
    }
    if (active) {
      D[row] = Di;
      if constexpr (score::HasRowParamGrad<Score, T>)
        if (row_grad) row_grad[row] = score.row_param_grad(args, h, lse[row], Di);
    }
  }
}

// dK, dV [B, H_kv, S, d]; D from attention_backward_rows (unused by point-wise scores).
template <class Ctx, class Score, class Mask, class T>
SINKLAB_HD void attention_backward_kv(Ctx& ctx, const Score& score, const T* q, const T* k, const T* v,
                                      const T* lse, const T* D, const T* dout, T* dk, T* dv, const AttentionShape& sh) {
  const int64_t d = sh.d, threads = ctx.threads(), tid = ctx.thread();
  const int64_t key_blocks = (sh.S + threads - 1) / threads, group = sh.H / sh.Hkv;
  const T scale = detail::attention_scale<T>(sh);
  using G = score::row_grad_t<Score, T>;
  T* qt = ctx.template shared<T>();  // [threads, d] queries of the tile
  T* ot = qt + threads * d;          // [threads, d] their dO
  T* lt = ot + threads * d;          // [threads] their row gradients: lse, or the first row constant
  T* dt = lt + threads;              // [threads] D, or the second
  const detail::LaneRow<T> kj = detail::lane_row(dt + threads, tid, threads);  // this thread's key row
  const detail::LaneRow<T> vj = detail::lane_row(dt + threads + threads * d, tid, threads);
  const detail::LaneRow<T> dk_acc = detail::lane_row(dt + threads + 2 * threads * d, tid, threads);
  const detail::LaneRow<T> dv_acc = detail::lane_row(dt + threads + 3 * threads * d, tid, threads);
  for (int64_t blk = ctx.block(); blk < sh.B * sh.Hkv * key_blocks; blk += ctx.blocks()) {
    const int64_t bk = blk / key_blocks, kb = blk % key_blocks, b = bk / sh.Hkv, hk = bk % sh.Hkv;
    const int64_t j = kb * threads + tid;
    const bool active = j < sh.S;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    detail::load_row(kj, k + (bk * sh.S + (active ? j : 0)) * d, d);
    detail::load_row(vj, v + (bk * sh.S + (active ? j : 0)) * d, d);
    for (int64_t c = 0; c < d; ++c) dk_acc[c] = dv_acc[c] = T(0);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const int64_t bh = b * sh.H + h;
      for (int64_t i0 = 0; i0 < sh.T; i0 += threads) {
        const int64_t rows = sh.T - i0 < threads ? sh.T - i0 : threads;
        // A query tile none of whose rows sees the block's first key adds nothing (the same test
        // on every thread, so the barriers stay together).
        int64_t seen = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t e = Mask::key_end(i0 + r, sh.T, sh.S, kvlen);
          seen = e > seen ? e : seen;
        }
        if (seen <= kb * threads) continue;
        for (int64_t x = tid; x < rows * d; x += threads) {
          qt[x] = q[(bh * sh.T + i0) * d + x];
          ot[x] = dout[(bh * sh.T + i0) * d + x];
        }
        for (int64_t r = tid; r < rows; r += threads) {  // the rows' gradients, as two numbers each
          const G g(score, Mask::key_end(i0 + r, sh.T, sh.S, kvlen), kvlen, lse ? lse[bh * sh.T + i0 + r] : T(0),
                    D ? D[bh * sh.T + i0 + r] : T(0));
          lt[r] = g.a;
          dt[r] = g.b;
        }
        ctx.sync();
        // Four query rows at a time (detail::dot4 / axpy4); a row that does not see key j adds 0.
        for (int64_t r0 = 0; active && r0 < rows; r0 += 4) {
          const int64_t m_end = rows - r0 < 4 ? rows - r0 : 4;
          T raw[4] = {}, dA[4] = {}, ds[4] = {}, a[4] = {};
          if (m_end == 4) {
            detail::dot4(kj, qt + r0 * d, d, raw);
            detail::dot4(vj, ot + r0 * d, d, dA);
          } else {
            for (int64_t m = 0; m < m_end; ++m) {
              raw[m] = detail::dot(kj, qt + (r0 + m) * d, d);
              dA[m] = detail::dot(vj, ot + (r0 + m) * d, d);
            }
          }
          bool any = false;
          for (int64_t m = 0; m < m_end; ++m) {
            const int64_t r = r0 + m, e = Mask::key_end(i0 + r, sh.T, sh.S, kvlen);
            if (j >= e) continue;
            const detail::PairGrad<T> g = detail::pair_grad(score, G::from(lt[r], dt[r]), raw[m] * scale, dA[m]);
            ds[m] = scale * g.ds;
            a[m] = g.a;
            any = true;
          }
          if (!any) continue;
          if (m_end == 4) {
            detail::axpy4(dk_acc, ds, qt + r0 * d, d);
            detail::axpy4(dv_acc, a, ot + r0 * d, d);
          } else {
            for (int64_t m = 0; m < m_end; ++m)
              for (int64_t c = 0; c < d; ++c) {
                dk_acc[c] += ds[m] * qt[(r0 + m) * d + c];
                dv_acc[c] += a[m] * ot[(r0 + m) * d + c];
              }
          }
        }
        ctx.sync();
      }
    }
    if (active)
      for (int64_t c = 0; c < d; ++c) {
        dk[(bk * sh.S + j) * d + c] = dk_acc[c];
        dv[(bk * sh.S + j) * d + c] = dv_acc[c];
      }
  }
}

// dQ [B, H, T, d].
template <class Ctx, class Score, class Mask, class T>
SINKLAB_HD void attention_backward_q(Ctx& ctx, const Score& score, const T* q, const T* k, const T* v, const T* lse,
                                     const T* D, const T* dout, T* dq, const AttentionShape& sh) {
  const int64_t d = sh.d, Bk = sh.block_k, threads = ctx.threads(), tid = ctx.thread();
  const int64_t query_blocks = (sh.T + threads - 1) / threads, group = sh.H / sh.Hkv;
  const T scale = detail::attention_scale<T>(sh);
  T* kt = ctx.template shared<T>();
  T* vt = kt + Bk * d;
  const detail::LaneRow<T> qi = detail::lane_row(vt + Bk * d, tid, threads);
  const detail::LaneRow<T> oi = detail::lane_row(vt + Bk * d + threads * d, tid, threads);  // dO row
  const detail::LaneRow<T> acc = detail::lane_row(vt + Bk * d + 2 * threads * d, tid, threads);
  using G = score::row_grad_t<Score, T>;
  for (int64_t blk = ctx.block(); blk < sh.B * sh.H * query_blocks; blk += ctx.blocks()) {
    const int64_t bh = blk / query_blocks, qb = blk % query_blocks, b = bh / sh.H, h = bh % sh.H;
    const int64_t i = qb * threads + tid, row = bh * sh.T + (i < sh.T ? i : 0);
    const bool active = i < sh.T;
    const int64_t kvlen = sh.kv_lengths ? sh.kv_lengths[b] : sh.S;
    const int64_t e = active ? Mask::key_end(i, sh.T, sh.S, kvlen) : 0;
    const int64_t kend = detail::block_key_end<Mask>(qb, threads, sh.T, sh.S, kvlen);
    const G g(score, e, kvlen, lse && active ? lse[row] : T(0), D && active ? D[row] : T(0));
    const T* kb = k + (b * sh.Hkv + h / group) * sh.S * d;
    const T* vb = v + (b * sh.Hkv + h / group) * sh.S * d;
    for (int64_t c = 0; c < d; ++c) acc[c] = T(0);
    detail::load_row(qi, q + row * d, d);
    detail::load_row(oi, dout + row * d, d);
    for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
      const int64_t cols = kend - j0 < Bk ? kend - j0 : Bk;
      detail::load_kv_tile(ctx, kt, vt, kb, vb, j0, cols, d);
      ctx.sync();
      const int64_t n = active && e > j0 ? (e - j0 < cols ? e - j0 : cols) : 0;
      int64_t j = 0;
      for (; j + 4 <= n; j += 4) {  // four keys at a time (detail::dot4 / axpy4)
        T raw[4], dA[4], ds[4];
        detail::dot4(qi, kt + j * d, d, raw);
        detail::dot4(oi, vt + j * d, d, dA);
        for (int m = 0; m < 4; ++m) ds[m] = scale * detail::pair_grad(score, g, raw[m] * scale, dA[m]).ds;
        detail::axpy4(acc, ds, kt + j * d, d);
      }
      for (; j < n; ++j) {
        const T raw = detail::dot(qi, kt + j * d, d) * scale;
        const T dA = detail::dot(oi, vt + j * d, d);
        const detail::PairGrad<T> pg = detail::pair_grad(score, g, raw, dA);
        for (int64_t c = 0; c < d; ++c) acc[c] += scale * pg.ds * kt[j * d + c];
      }
      ctx.sync();
    }
    if (active)
      for (int64_t c = 0; c < d; ++c) dq[row * d + c] = acc[c];
  }
}

// dparam [H] += Σ over batch and rows of row_grad [B, H, T]; a block per head (grid-stride over
// heads), ctx.threads() a power of two with that many T of shared memory. Each thread sums rows
// tid, tid + threads, … and the block adds the partials in a fixed tree, so the sum does not
// depend on timing (a thread per head summing B·T rows in turn took longer than the whole
// tensor-core backward it followed).
inline constexpr int kParamsThreads = 256;
template <class Ctx, class T>
SINKLAB_HD void attention_backward_params(Ctx& ctx, const T* row_grad, T* dparam, const AttentionShape& sh) {
  T* part = ctx.template shared<T>();
  const int64_t tid = ctx.thread(), threads = ctx.threads(), rows = sh.B * sh.T;
  for (int64_t h = ctx.block(); h < sh.H; h += ctx.blocks()) {
    T sum = T(0);
    for (int64_t x = tid; x < rows; x += threads) sum += row_grad[((x / sh.T) * sh.H + h) * sh.T + x % sh.T];
    part[tid] = sum;
    ctx.sync();
    for (int64_t w = threads / 2; w > 0; w /= 2) {
      if (tid < w) part[tid] += part[tid + w];
      ctx.sync();
    }
    if (tid == 0) dparam[h] += part[0];
    ctx.sync();  // part is refilled for the next head
  }
}

}  // namespace sinklab::kernels::cuda
