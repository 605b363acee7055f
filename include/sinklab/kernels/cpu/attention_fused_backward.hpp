// Fused attention backward on the CPU (FlashAttention-2): recomputes the logits block by block
// from q, k and the forward's saved lse, and gets every pair's weight and gradient from the score
// family's row gradient (policy/row_update.hpp), so the loop is the same for every score:
//   dA = dO·Vᵀ;  u = g.pre(s), a = g.weight(u), dS = g.dscore(u, dA)
//   softmax family  u = P = e^{S − lse}, dS = P ∘ (w'(P) ∘ dA − D), D_i = Σ_j P_ij w'(P_ij) dA_ij,
//                   which is dO_i·O_i without clipping; the row gradient says where D comes from
//                   (the output, or a sweep over the keys)
//   point-wise      u = S, dS = c_i h'(S + b_i) ∘ dA
//   row parameters  the score's row_param_grad (a sink: dS_h = −Σ_i e^{S_h − lse_i} D_i)
// A score's logits transform multiplies dS by its derivative. dQ = scale·dS·K, dK = scale·dSᵀ·Q,
// dV = Aᵀ·dO, parallel over (batch, kv head), so dk and dv of a group of query heads have one
// owner.
//
// q, k, v and dout may be views with any strides but a unit one along d; the backward copies
// strided keys and values once per task and q, dout once per query block; dq, dk, dv are
// head-major. Block products as the forward's (attention_fused_forward.hpp).
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

template <class Score, class Mask, class T, HostDevice Dev>
AttentionGrads<T, Score, Dev> attention_fused_backward(const Score& score, const Mask&, const Tensor<T, Dev>& q_,
                                                  const Tensor<T, Dev>& k_, const Tensor<T, Dev>& v_,
                                                  const score::params_t<Score, T, Dev>& params,
                                                  const AttentionForward<T, Dev>& fwd, const Tensor<T, Dev>& dout_,
                                                  const AttentionOptions& opt = {}) {
  constexpr const char* kernel = "attention_fused_backward";
  const detail::FusedGeometry geo = detail::check_fused_call<Score, Mask>(kernel, score, q_, k_, v_, params, opt);
  const AttentionDims& dm = geo.dm;
  using G = score::row_grad_t<Score, T>;
  constexpr bool saved_lse = score::saves_lse_v<Score>;
  detail::check_saved(kernel, q_, dout_, fwd, dm, saved_lse);
  const Tensor<T, Dev> q = detail::unit_rows(q_), k = detail::unit_rows(k_), v = detail::unit_rows(v_);
  const Tensor<T, Dev> dout = detail::unit_rows(dout_), out = detail::unit_rows(fwd.out);
  Tensor<T, Dev> lse_all;
  if constexpr (saved_lse) lse_all = fwd.lse.contiguous();

  // dq, dk and dv accumulate in place, each block zeroed just before its first product (in
  // cache, instead of a zero-filling pass over all of them up front).
  AttentionGrads<T, Score, Dev> g;
  g.dq = detail::output_empty<T, Dev>(q.shape());
  g.dk = detail::output_empty<T, Dev>(k.shape());
  g.dv = detail::output_empty<T, Dev>(v.shape());
  const detail::HeadRows<const T> qr = detail::head_rows(q), kr = detail::head_rows(k), vr = detail::head_rows(v),
                                  dor = detail::head_rows(dout), outr = detail::head_rows(out);
  g.dscore = policy::zeros_like(params);
  const auto args = score.args(params);
  const T scale = static_cast<T>(detail::score_scale(opt, dm.d));
  const int64_t Bq = geo.Bq, Bk = geo.Bk;
  const int64_t d = dm.d;
  // Row parameter gradients per (batch, head): tasks of different batch entries share a head.
  detail::RowParamGrads<Score, T, Dev> dparam(dm.B * dm.H);
  constexpr bool transformed = score::HasLogitsTransform<Score>;

  const bool blocked = detail::use_block_gemm<T>(d, Bk);
  const int64_t ldt = detail::round_up(dm.S, simd_width<T>());  // row stride of Kᵀ and Vᵀ

  parallel_for(0, dm.B * dm.Hkv, 1, [&](int64_t lo, int64_t hi) {
    detail::Scratch<T> sbuf(Bq * Bk), dbuf(Bq * Bk), tgbuf(transformed ? Bq * Bk : 0), Dbuf(Bq), ktbuf(blocked ? d * ldt : 0),
        vtbuf(blocked ? d * ldt : 0), kcbuf(kr.ld != d ? dm.S * d : 0), vcbuf(vr.ld != d && !blocked ? dm.S * d : 0),
        dobuf(dor.ld != d ? Bq * d : 0), qcbuf(qr.ld != d ? Bq * d : 0);
    T* kt = ktbuf.data();
    T* vt = vtbuf.data();
    std::vector<int64_t> end(static_cast<std::size_t>(Bq));
    std::vector<G> grads(static_cast<std::size_t>(Bq));
    T* sb = sbuf.data();
    T* db = dbuf.data();
    T* tg = tgbuf.data();  // d(transformed logit)/d(logit) of the block, with a logits transform
    T* D = Dbuf.data();
    BlockProducts<T> ops(opt.precision);
    for (int64_t bk = lo; bk < hi; ++bk) {
      const int64_t b = bk / dm.Hkv, hk = bk % dm.Hkv;
      const int64_t kvlen = detail::kv_length(opt, b, dm.S);
      const T* K = kr.at(b, hk);
      const T* V = vr.at(b, hk);
      // Keys and values read in place from a projection (rows kilobytes apart, which the block
      // products would step through in a few L1 sets) are copied once per task, Q and dO once per
      // block; below, every row stride is d. Blocked, the values are only read as Vᵀ, which is
      // transposed straight from the strided rows.
      if (kr.ld != d) K = detail::copy_rows(K, kr.ld, dm.S, d, kcbuf.data());
      int64_t ldv = vr.ld;
      if (vr.ld != d && !blocked) V = detail::copy_rows(V, vr.ld, dm.S, d, vcbuf.data()), ldv = d;
      T* dK = g.dk.data() + bk * dm.S * d;
      T* dV = g.dv.data() + bk * dm.S * d;
      std::fill(dK, dK + dm.S * d, T(0));
      std::fill(dV, dV + dm.S * d, T(0));
      if (blocked) {
        transpose_rows(K, d, dm.S, d, kt, ldt);
        transpose_rows(V, ldv, dm.S, d, vt, ldt);
      }
      for (int64_t h = hk * dm.group(); h < (hk + 1) * dm.group(); ++h) {
        const int64_t bh = b * dm.H + h;
        for (int64_t i0 = 0; i0 < dm.T; i0 += Bq) {
          const int64_t rows = std::min(Bq, dm.T - i0);
          int64_t kend = 0;
          for (int64_t r = 0; r < rows; ++r) kend = std::max(kend, end[r] = Mask::key_end(i0 + r, dm.T, dm.S, kvlen));
          T* dQ = g.dq.data() + (bh * dm.T + i0) * d;
          std::fill(dQ, dQ + rows * d, T(0));
          if (kend == 0) continue;  // no key visible: every gradient of this block is 0
          const T* Q = qr.at(b, h, i0);
          const T* dO = dor.at(b, h, i0);
          if (qr.ld != d) Q = detail::copy_rows(Q, qr.ld, rows, d, qcbuf.data());
          if (dor.ld != d) dO = detail::copy_rows(dO, dor.ld, rows, d, dobuf.data());
          const T* lse = saved_lse ? lse_all.data() + bh * dm.T + i0 : nullptr;
          constexpr int64_t W = simd_width<T>();
          // This query block's operands, packed once under bf16 for all its key blocks; the key
          // blocks' Kᵀ, Vᵀ and K are tagged with the task.
          const int64_t qtag = bh * dm.T + i0;
          auto whole = [&](int64_t j0) { return detail::round_up(std::min(Bk, dm.S - j0), W); };  // Kᵀ, Vᵀ columns
          BlockA<T> qa, doa;
          BlockB<T> dob, qb;
          if (blocked) {
            qa = ops.a(detail::slot::queries, qtag, rows, d, Q, d, int64_t{1});
            doa = ops.a(detail::slot::dout, qtag, rows, d, dO, d, int64_t{1});
            dob = ops.b(detail::slot::dout_b, qtag, rows, d, dO, d);
            qb = ops.b(detail::slot::queries_b, qtag, rows, d, Q, d);
          }
          auto logits = [&](int64_t j0, int64_t cols) {
            if (blocked)  // Kᵀ, Vᵀ of a key block packed whole (its columns are independent), for every query block
              ops.product(rows, detail::round_up(cols, W), qa,
                          ops.b(detail::slot::block(j0 / Bk, 0), bk, d, whole(j0), kt + j0, ldt), scale, T(0), sb, Bk);
            else
              gemm_at(opt.precision, Trans::N, Trans::T, rows, cols, d, scale, Q, d, K + j0 * d, d, T(0), sb, Bk);
            if constexpr (transformed)
              for (int64_t r = 0; r < rows; ++r) {
                T* sr = sb + r * Bk;
                simd::apply(sr, tg + r * Bk, cols, [&score](auto x) { return score.logits_grad(x); });
                simd::apply(sr, sr, cols, [&score](auto x) { return score.logits(x); });
              }
          };
          auto value_grads = [&](int64_t j0, int64_t cols) {  // db = dA = dO·Vᵀ
            if (blocked)
              ops.product(rows, detail::round_up(cols, W), doa,
                          ops.b(detail::slot::block(j0 / Bk, 1), bk, d, whole(j0), vt + j0, ldt), T(1), T(0), db, Bk);
            else
              gemm_at(opt.precision, Trans::N, Trans::T, rows, cols, d, T(1), dO, d, V + j0 * d, d, T(0), db, Bk);
          };

          // The row gradients, once D is known; D_i first, where the row gradient needs it.
          auto row_grad = [&](int64_t r, T Dr) { return G(score, end[r], kvlen, lse ? lse[r] : T(0), Dr); };
          for (int64_t r = 0; r < rows; ++r) D[r] = T(0);
          if constexpr (G::delta == score::Delta::FromOutput) {
            for (int64_t r = 0; r < rows; ++r) D[r] = simd::dot(dO + r * d, outr.at(b, h, i0 + r), d);
          } else if constexpr (G::delta == score::Delta::FromKeys) {
            for (int64_t r = 0; r < rows; ++r) grads[static_cast<std::size_t>(r)] = row_grad(r, T(0));
            for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
              const int64_t cols = std::min(Bk, kend - j0);
              logits(j0, cols);
              value_grads(j0, cols);
              for (int64_t r = 0; r < rows; ++r) {
                const int64_t ne = detail::visible_in_block(end[r], j0, cols);
                const G& gr = grads[static_cast<std::size_t>(r)];
                T* dr = db + r * Bk;
                simd::apply(sb + r * Bk, dr, dr, ne,
                            [&score, &gr](auto x, auto da) { return gr.delta_term(score, gr.pre(x), da); });
                D[r] += simd::sum(dr, ne);
              }
            }
          }
          for (int64_t r = 0; r < rows; ++r) grads[static_cast<std::size_t>(r)] = row_grad(r, D[r]);
          if constexpr (dparam.enabled) {
            T acc = 0;
            for (int64_t r = 0; r < rows; ++r) acc += score.row_param_grad(args, h, lse[r], D[r]);
            dparam.add(bh, static_cast<double>(acc));
          }

          for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
            const int64_t cols = std::min(Bk, kend - j0);
            logits(j0, cols);
            value_grads(j0, cols);
            for (int64_t r = 0; r < rows; ++r) {
              T* s = sb + r * Bk;
              T* dr = db + r * Bk;
              // s ← A, dr ← dS on whole vectors (the masked entries' values are replaced by 0)
              const int64_t ne = detail::visible_in_block(end[r], j0, cols);
              const int64_t nv = blocked && ne > 0 ? detail::round_up(ne, W) : ne;
              const G& gr = grads[static_cast<std::size_t>(r)];
              [[maybe_unused]] const T* tr = tg + r * Bk;
              simd::loop<T>(nv, [&](auto e, int64_t j) {
                using E = decltype(e);
                const E u = gr.pre(simd::load<E>(s + j));
                E ds = gr.dscore(score, u, simd::load<E>(dr + j));
                if constexpr (transformed) ds = ds * simd::load<E>(tr + j);  // dS at the raw logits
                simd::store(dr + j, ds);
                simd::store(s + j, gr.weight(score, u));
              });
              detail::zero_tail(s, ne, cols);
              detail::zero_tail(dr, ne, cols);
            }
            if (blocked) {  // Pᵀ and dSᵀ are read in place through A's strides
              ops.product(cols, d, ops.a(detail::slot::probs_t, -1, cols, rows, sb, int64_t{1}, Bk), dob, T(1), T(1),
                          dV + j0 * d, d);
              ops.product(rows, d, ops.a(detail::slot::dscores, -1, rows, cols, db, Bk, int64_t{1}),
                          ops.b(detail::slot::block(j0 / Bk, 2), bk, cols, d, K + j0 * d, d), scale, T(1), dQ, d);
              ops.product(cols, d, ops.a(detail::slot::dscores_t, -1, cols, rows, db, int64_t{1}, Bk), qb, scale, T(1),
                          dK + j0 * d, d);
            } else {
              gemm_at(opt.precision, Trans::T, Trans::N, cols, d, rows, T(1), sb, Bk, dO, d, T(1), dV + j0 * d, d);
              gemm_at(opt.precision, Trans::N, Trans::N, rows, d, cols, scale, db, Bk, K + j0 * d, d, T(1), dQ, d);
              gemm_at(opt.precision, Trans::T, Trans::N, cols, d, rows, scale, db, Bk, Q, d, T(1), dK + j0 * d, d);
            }
          }
        }
      }
    }
  });
  dparam.scatter(score, g.dscore, dm.H);
  return g;
}

}  // namespace sinklab::kernels::cpu
