// Fused attention forward on the CPU: never materialises the T×S matrix. Queries are cut in
// blocks of block_q rows and keys in blocks of block_k; logits of a block pair come from one small
// GEMM, the score family's row update (policy/row_update.hpp) turns them into weights vectorised
// over the block (xsimd), and the weighted values go straight into the output with a second GEMM.
// Memory per head is O(T·d) plus O(block_q·block_k) scratch per thread. The loop is the same for
// every score: the row update says how many passes over the keys it needs (clipped softmax: the
// normaliser first), which of them aggregate values, the factor a partial output is rescaled by
// when a block arrives (softmax's growing max, FlashAttention-2), the final factor, and whether
// lse is saved; a score's logits transform (soft-capping) is applied right after each product.
//
// Two ways through the blocks:
//   rows in lanes  when the row update allows it (its start is the same on every row: softmax,
//                  a sink) and the head is whole vectors, the scores of a block pair are kept
//                  transposed, Sᵀ = K·Qᵀ [keys, queries]: a query block's rows lie across SIMD
//                  lanes, so the row updates of all its rows are vector operations (no horizontal
//                  reduction, no scalar exp per row), and keys and values are read in place;
//   a row at a time otherwise, each row's block of logits vectorised along the keys.
//
// q, k, v may be views with any strides but a unit one along d (heads read in place from a
// projection [B, T, heads·d]). The output goes into `out_into` when given (e.g. a [B, T, H·d]
// buffer viewed as [B, H, T, d]; not overlapping itself or the inputs, and unchanged until the
// backward, which reads it as fwd.out). Every block product goes through BlockProducts
// (block_products.hpp): fp32 block_gemm on the operands as stored, or, under
// AttentionOptions::precision = bf16, bf16 operands packed once per key block or query block with
// fp32 sums; the row updates are fp32 either way.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/attention_blocks.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/block_gemm.hpp"
#include "sinklab/kernels/cpu/block_products.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "sinklab/policy/row_update.hpp"

namespace sinklab::kernels::cpu {

namespace detail {

// Multiplies an output row by f unless f is 1.
template <class T>
inline void scale_row(T* o, int64_t d, T f) {
  if (f != T(1)) simd::apply(o, o, d, [f](auto x) { return x * decltype(x)(f); });
}

// The rows-in-lanes forward (see the top of the file). Needs d to be whole vectors and a
// one-pass row update. Writes every element of out and lse.
template <class Score, class Mask, class T>
void forward_rows_in_lanes(const Score& score, const typename Score::template Args<T>& args, const AttentionDims& dm,
                           const AttentionOptions& opt, HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                           T scale, int64_t Bq, int64_t Bk, HeadRows<T> out, T* lse_all) {
  using V = batch<T>;
  using U = score::row_update_t<Score, V>;
  static_assert(U::passes == 1 && U::rows_in_lanes, "forward_rows_in_lanes: a one-pass row update shared by lanes");
  constexpr int64_t W = simd_width<T>();
  const int64_t d = dm.d, nqb = (dm.T + Bq - 1) / Bq, R = round_up(Bq, W);
  parallel_for(0, dm.B * dm.H * nqb, 1, [&](int64_t lo, int64_t hi) {
    Scratch<T> qtbuf(d * R), stbuf(Bk * R), abuf(R), ebuf(R), obuf(R), lsebuf(R);
    std::vector<U> rows_u;
    rows_u.reserve(static_cast<std::size_t>(R / W));
    BlockProducts<T> ops(opt.precision);
    T *qt = qtbuf.data(), *st = stbuf.data(), *alpha = abuf.data(), *endf = ebuf.data();
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t qb = task % nqb, bh = task / nqb, b = bh / dm.H, h = bh % dm.H, hk = h / dm.group();
      const int64_t i0 = qb * Bq, rows = std::min(Bq, dm.T - i0), rv = round_up(rows, W);
      const int64_t kvlen = kv_length(opt, b, dm.S);
      int64_t kend = 0, kmin = dm.S;
      for (int64_t r = 0; r < rv; ++r) {
        // Padding lanes see every key (their queries are 0): finite, and never read back.
        const int64_t e = r < rows ? Mask::key_end(i0 + r, dm.T, dm.S, kvlen) : dm.S;
        endf[r] = static_cast<T>(e);
        if (r < rows) kend = std::max(kend, e), kmin = std::min(kmin, e);
      }
      rows_u.clear();
      for (int64_t r = 0; r < rv; r += W) rows_u.emplace_back(score, args, h, int64_t{0}, kvlen);
      const T* Q = q.at(b, h, i0);
      const T* K = k.at(b, hk);
      const T* Vv = v.at(b, hk);
      T* O = out.at(b, h, i0);
      const int64_t ldq = q.ld, ldk = k.ld, ldv = v.ld, ldo = out.ld;
      transpose_rows(Q, ldq, rows, d, qt, rv);
      for (int64_t c = 0; c < d; ++c) std::fill(qt + c * rv + rows, qt + (c + 1) * rv, T(0));
      const int64_t kv_head = b * dm.Hkv + hk;  // tags its keys' and values' blocks (packed once under bf16)
      const BlockB<T> qtb = ops.b(slot::queries, -1, d, rv, qt, rv);
      if (kend == 0)  // no visible key: zero output
        for (int64_t r = 0; r < rows; ++r) std::fill(O + r * ldo, O + r * ldo + d, T(0));
      for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
        const int64_t cols = std::min(Bk, kend - j0);
        // The block's keys are packed whole (under bf16: rows of Sᵀ, each on its own), so the query
        // blocks that see part of it read the same packing; its values only as far as this query
        // block sees (a product sums over them: keys it must not see, e.g. padding, never enter).
        const int64_t jb = j0 / Bk, whole = std::min(Bk, dm.S - j0);
        ops.product(cols, rv, ops.a(slot::block(jb, 0), kv_head, whole, d, K + j0 * ldk, ldk, int64_t{1}), qtb, scale,
                    T(0), st, rv);  // Sᵀ
        transform_logits(score, st, cols * rv);
        const bool masked = j0 + cols > kmin;  // some row sees only part of this block
        for (int64_t r = 0; r < rv; r += W) {
          LaneBlock<T> blk{st + r, rv, cols, j0, V::load_unaligned(endf + r), masked};
          rows_u[static_cast<std::size_t>(r / W)].block(score, 0, blk).store_unaligned(alpha + r);
        }
        // O = α·O + W·V; the first block writes O (every row: masked keys have weight 0).
        if (j0 > 0)
          for (int64_t r = 0; r < rows; ++r) scale_row(O + r * ldo, d, alpha[r]);
        ops.product(rows, d, ops.a(slot::probs, -1, rows, cols, st, int64_t{1}, rv),
                    ops.b(slot::block(jb, 1), kv_head, cols, d, Vv + j0 * ldv, ldv), T(1), j0 > 0 ? T(1) : T(0), O,
                    ldo);
      }
      T* f = obuf.data();
      T* l = lsebuf.data();
      for (int64_t r = 0; r < rv; r += W) {
        const U& u = rows_u[static_cast<std::size_t>(r / W)];
        u.out_scale().store_unaligned(f + r);
        u.lse().store_unaligned(l + r);
      }
      T* lse = lse_all + bh * dm.T + i0;
      for (int64_t r = 0; r < rows; ++r) {
        if (kend > 0) scale_row(O + r * ldo, d, f[r]);
        lse[r] = l[r];
      }
    }
  });
}

}  // namespace detail

template <class Score, class Mask, class T, HostDevice Dev>
AttentionForward<T, Dev> attention_fused_forward(const Score& score, const Mask&, const Tensor<T, Dev>& q_, const Tensor<T, Dev>& k_,
                                            const Tensor<T, Dev>& v_, const score::params_t<Score, T, Dev>& params,
                                            const AttentionOptions& opt = {}, const Tensor<T, Dev>& out_into = {}) {
  constexpr const char* kernel = "attention_fused_forward";
  const detail::FusedGeometry geo = detail::check_fused_call<Score, Mask>(kernel, score, q_, k_, v_, params, opt);
  const AttentionDims& dm = geo.dm;
  const Tensor<T, Dev> q = detail::unit_rows(q_), k = detail::unit_rows(k_), v = detail::unit_rows(v_);
  using U = score::row_update_t<Score, T>;
  using UL = score::row_update_t<Score, detail::batch<T>>;

  AttentionForward<T, Dev> res;
  constexpr bool lanes_allowed = UL::passes == 1 && UL::rows_in_lanes;
  const bool lanes = lanes_allowed && block_gemm_fits<T>(dm.d);
  // The rows-in-lanes path writes every element; the other accumulates into zeros.
  if (out_into.defined()) {
    detail::check_output_view(kernel, "out", out_into, {dm.B, dm.H, dm.T, dm.d}, {&q_, &k_, &v_});
    res.out = out_into;
    if (!lanes) detail::zero_rows(res.out);
  } else {
    res.out = lanes ? detail::output_empty<T, Dev>({dm.B, dm.H, dm.T, dm.d})
                    : detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T, dm.d});
  }
  const detail::HeadRows<const T> qr = detail::head_rows(q), kr = detail::head_rows(k), vr = detail::head_rows(v);
  const detail::HeadRows<T> outr = detail::head_rows_mut(res.out);
  if constexpr (U::saves_lse) res.lse = detail::output_empty<T, Dev>({dm.B, dm.H, dm.T});  // every row is written
  const auto args = score.args(params);
  const T scale = static_cast<T>(detail::score_scale(opt, dm.d));
  const int64_t Bq = geo.Bq, Bk = geo.Bk;
  const int64_t nqb = (dm.T + Bq - 1) / Bq;
  const int64_t d = dm.d;

  const bool blocked = detail::use_block_gemm<T>(d, Bk);
  const int64_t ldt = detail::round_up(dm.S, simd_width<T>());  // row stride of the transposed keys
  if constexpr (lanes_allowed) {
    if (lanes) {
      detail::forward_rows_in_lanes<Score, Mask>(score, args, dm, opt, qr, kr, vr, scale, Bq, Bk, outr, res.lse.data());
      return res;
    }
  }

  parallel_for(0, dm.B * dm.H * nqb, 1, [&](int64_t lo, int64_t hi) {
    detail::Scratch<T> sbuf(Bq * Bk), ktbuf(blocked ? d * ldt : 0);
    std::vector<int64_t> end(static_cast<std::size_t>(Bq));
    std::vector<U> rows_u;
    rows_u.reserve(static_cast<std::size_t>(Bq));
    T* kt = ktbuf.data();
    T* sb = sbuf.data();
    int64_t kt_head = -1, kt_rows = 0;  // kt holds Kᵀ of keys [0, kt_rows) of kv head kt_head
    BlockProducts<T> ops(opt.precision);
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t qb = task % nqb, bh = task / nqb, b = bh / dm.H, h = bh % dm.H, hk = h / dm.group();
      const int64_t i0 = qb * Bq, rows = std::min(Bq, dm.T - i0);
      const int64_t kvlen = detail::kv_length(opt, b, dm.S);
      int64_t kend = 0;
      rows_u.clear();
      for (int64_t r = 0; r < rows; ++r) {
        kend = std::max(kend, end[r] = Mask::key_end(i0 + r, dm.T, dm.S, kvlen));
        rows_u.emplace_back(score, args, h, end[r], kvlen);
      }
      const T* Q = qr.at(b, h, i0);
      const T* K = kr.at(b, hk);
      const T* V = vr.at(b, hk);
      T* O = outr.at(b, h, i0);  // zeroed; used as the accumulator
      const int64_t ldq = qr.ld, ldk = kr.ld, ldv = vr.ld, ldo = outr.ld;
      // Kᵀ of the visible keys, [d, ldt], so logits are broadcast-FMA rows. The query blocks of a
      // head follow each other within a chunk, so each one extends the previous one's Kᵀ.
      if (blocked) {
        const int64_t kv_head = b * dm.Hkv + hk;
        if (kv_head != kt_head) kt_head = kv_head, kt_rows = 0;
        if (kend > kt_rows) {
          transpose_rows(K + kt_rows * ldk, ldk, kend - kt_rows, d, kt + kt_rows, ldt);
          kt_rows = kend;
        }
      }
      const int64_t kv_head = b * dm.Hkv + hk;  // tags its keys' and values' blocks (packed once under bf16)
      const BlockA<T> qa = blocked ? ops.a(detail::slot::queries, task, rows, d, Q, ldq, int64_t{1}) : BlockA<T>{};
      auto logits = [&](int64_t j0, int64_t cols) {
        // Whole vectors: the columns past `cols` get don't-care values that are never read.
        if (blocked) {
          // Kᵀ grows with the query blocks: a key block's packing is kept once the block is whole.
          const int64_t n = detail::round_up(cols, simd_width<T>());
          ops.product(rows, n, qa,
                      ops.b(detail::slot::block(j0 / Bk, 0), cols == Bk ? kv_head : -1, d, n, kt + j0, ldt), scale,
                      T(0), sb, Bk);
        } else
          gemm_at(opt.precision, Trans::N, Trans::T, rows, cols, d, scale, Q, ldq, K + j0 * ldk, ldk, T(0), sb, Bk);
        if constexpr (score::HasLogitsTransform<Score>)
          for (int64_t r = 0; r < rows; ++r) detail::transform_logits(score, sb + r * Bk, cols);
      };
      auto aggregate = [&](int64_t j0, int64_t cols) {
        if (blocked)
          ops.product(rows, d, ops.a(detail::slot::probs, -1, rows, cols, sb, Bk, int64_t{1}),
                      ops.b(detail::slot::block(j0 / Bk, 1), kv_head, cols, d, V + j0 * ldv, ldv), T(1), T(1), O, ldo);
        else
          gemm_at(opt.precision, Trans::N, Trans::N, rows, d, cols, T(1), sb, Bk, V + j0 * ldv, ldv, T(1), O, ldo);
      };

      for (int pass = 0; pass < U::passes; ++pass) {
        const bool accumulate = U::accumulates(pass);
        for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
          const int64_t cols = std::min(Bk, kend - j0);
          logits(j0, cols);
          for (int64_t r = 0; r < rows; ++r) {
            T* s = sb + r * Bk;
            const int64_t ne = detail::visible_in_block(end[r], j0, cols);
            if (ne == 0) {  // sees none of this block: weights 0, the row unchanged
              detail::zero_tail(s, 0, cols);
              continue;
            }
            detail::RowBlock<T> blk(s, ne, cols, blocked);
            const T alpha = rows_u[static_cast<std::size_t>(r)].block(score, pass, blk);
            if (accumulate) detail::scale_row(O + r * ldo, d, alpha);
          }
          if (accumulate) aggregate(j0, cols);
        }
        for (int64_t r = 0; r < rows; ++r) rows_u[static_cast<std::size_t>(r)].end_pass(pass);
      }
      for (int64_t r = 0; r < rows; ++r) detail::scale_row(O + r * ldo, d, rows_u[static_cast<std::size_t>(r)].out_scale());
      if constexpr (U::saves_lse) {
        T* lse = res.lse.data() + bh * dm.T + i0;
        for (int64_t r = 0; r < rows; ++r) lse[r] = rows_u[static_cast<std::size_t>(r)].lse();
      }
    }
  });
  return res;
}

}  // namespace sinklab::kernels::cpu
