// Fused attention on the CPU: never materialises the T×S matrix. Queries are cut in blocks of
// block_q rows and keys in blocks of block_k; logits of a block pair come from one small GEMM,
// the score math runs vectorised over the block (xsimd), and the weighted values go straight
// into the output with a second GEMM. Memory per head is O(T·d) plus O(block_q·block_k) scratch
// per thread.
//
//   softmax family  one pass with an online normaliser (score::OnlineRow: running max m and
//                   sum l per row, rescaling the partial output when m grows, as
//                   FlashAttention-2); the score starts each row (a sink: m = S_h, l = 1).
//                   Saves lse per row.
//                   Without clipping and with whole-vector heads the scores are kept transposed
//                   (softmax_forward_transposed), so all rows of a block update at once.
//   clipped softmax two passes over the key blocks: the first finds the row normaliser, the
//                   second clips the final probabilities and aggregates. Saves lse.
//   point-wise      one pass, no normaliser and no saved statistics.
//
// The backward recomputes the logits block by block from q, k and the saved lse (FlashAttention-2):
//   softmax family  dS = P ∘ (w'(P) ∘ dA − D), D_i = Σ_j P_ij w'(P_ij) dA_ij (= dO_i·O_i without
//                   clipping; the clipped score needs an extra pass to form D), dA = dO·Vᵀ
//   row parameters  the score's row_param_grad (a sink: dS_h = −Σ_i e^{S_h − lse_i} D_i)
// A score's logits transform (soft-capping) is applied right after each logits product, and
// its derivative multiplies dS.
//   point-wise      dS = c_i h'(S + b_i) ∘ dA
// and parallelises over (batch, kv head), so dk and dv of a group of query heads have one owner.
//
// q, k, v and dout may be views with any strides but a unit one along d (heads read in place
// from a projection [B, T, heads·d]); the backward copies strided keys and values once per task
// and q, dout once per query block. The forward writes its output into `out_into` when given
// (e.g. a [B, T, H·d] buffer viewed as [B, H, T, d]; not overlapping itself or the inputs, and
// unchanged until the backward, which reads it as fwd.out); dq, dk, dv are always head-major.
//
// Every block product goes through BlockProducts (block_products.hpp): fp32 block_gemm on the
// operands as stored, or, under AttentionOptions::precision = bf16, bf16 operands packed once per
// key block or query block with fp32 sums; the score math above is fp32 either way.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/block_gemm.hpp"
#include "sinklab/kernels/cpu/block_products.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"

namespace sinklab::kernels::cpu {

namespace detail {

template <class T>
inline void zero_tail(T* x, int64_t from, int64_t to) {
  if (from < to) std::fill(x + from, x + to, T(0));
}

// Visible keys of row r inside the key block [j0, j0 + cols).
inline int64_t visible_in_block(int64_t end, int64_t j0, int64_t cols) {
  return std::clamp<int64_t>(end - j0, 0, cols);
}

// The register-blocked block products (block_gemm.hpp) need the head size and the key block
// (the row stride of the score scratch) to be whole SIMD vectors; otherwise the kernels call gemm.
template <class T>
inline bool use_block_gemm(int64_t d, int64_t Bk) {
  return block_gemm_fits<T>(d) && block_gemm_fits<T>(Bk);
}
inline int64_t round_up(int64_t n, int64_t w) { return (n + w - 1) / w * w; }

// Slots of the block products' operands (block_products.hpp): one for each operand that one
// product reads at a time, three per key block for those kept across query blocks.
namespace slot {
enum : int64_t { queries, probs, dout, dout_b, queries_b, probs_t, dscores, dscores_t, per_block };
inline int64_t block(int64_t key_block, int64_t kind) { return per_block + 3 * key_block + kind; }
}  // namespace slot

// With whole-vector rows (blocked), a row's masked keys [ne, ne rounded up to a vector) are set
// to −inf, so the softmax loops run on whole vectors (exp gives 0 there) instead of a scalar
// tail; returns the length to process. Otherwise returns ne.
template <class T>
inline int64_t pad_masked(T* s, int64_t ne, bool blocked) {
  if (!blocked || ne == 0) return ne;
  const int64_t n = round_up(ne, simd_width<T>());
  for (int64_t j = ne; j < n; ++j) s[j] = -std::numeric_limits<T>::infinity();
  return n;
}

// The end of a softmax row: the output divided by the row's sum (a row that saw nothing stays
// 0) and its lse.
template <class T>
inline void finish_row(const score::OnlineRow<T>& row, T* o, int64_t d, T& lse) {
  if (row.sum() > T(0)) {
    const T inv = T(1) / row.sum();
    simd::apply(o, o, d, [inv](auto x) { return x * decltype(x)(inv); });
  }
  lse = row.lse();
}

// The softmax family (not clipped) with the scores of a block pair kept transposed, Sᵀ = K·Qᵀ
// [keys, queries]: a query block's rows lie across SIMD lanes, so the running max, the sums and
// the rescale factors of all its rows are vector operations (no horizontal reduction, no scalar
// exp per row), and keys and values are read in place (only the block's Qᵀ is transposed).
// Needs d to be whole vectors. Writes every element of out and lse.
template <class Score, class Mask, class T>
void softmax_forward_transposed(const Score& score, const typename Score::template Args<T>& args,
                                const AttentionDims& dm, const AttentionOptions& opt, HeadRows<const T> q,
                                HeadRows<const T> k, HeadRows<const T> v, T scale, int64_t Bq, int64_t Bk,
                                HeadRows<T> out, T* lse_all) {
  using V = batch<T>;
  constexpr int64_t W = simd_width<T>();
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t d = dm.d, nqb = (dm.T + Bq - 1) / Bq, R = round_up(Bq, W);
  parallel_for(0, dm.B * dm.H * nqb, 1, [&](int64_t lo, int64_t hi) {
    Scratch<T> qtbuf(d * R), stbuf(Bk * R), mbuf(R), lbuf(R), abuf(R), ebuf(R);
    BlockProducts<T> ops(opt.precision);
    T *qt = qtbuf.data(), *st = stbuf.data(), *m = mbuf.data(), *l = lbuf.data(), *alpha = abuf.data(),
      *endf = ebuf.data();
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
        const score::OnlineRow<T> start = score.template start<T>(args, h);
        m[r] = start.m;
        l[r] = start.l;
      }
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
          V mx = V::load_unaligned(m + r);
          const V e = V::load_unaligned(endf + r);
          for (int64_t j = 0; j < cols; ++j) {
            V x = V::load_unaligned(st + j * rv + r);
            if (masked) {
              x = xsimd::select(V(static_cast<T>(j0 + j)) >= e, V(ninf), x);
              x.store_unaligned(st + j * rv + r);
            }
            mx = xsimd::max(mx, x);
          }
          score::OnlineRow<V> row{V::load_unaligned(m + r), V::load_unaligned(l + r)};
          const V a = row.rescale(mx);
          const V ms = row.shift();
          V sum(T(0));
          for (int64_t j = 0; j < cols; ++j) {
            const V p = xsimd::exp(V::load_unaligned(st + j * rv + r) - ms);
            p.store_unaligned(st + j * rv + r);
            sum += p;
          }
          row.add(sum);
          row.l.store_unaligned(l + r);
          row.m.store_unaligned(m + r);
          a.store_unaligned(alpha + r);
        }
        // O = α·O + P·V; the first block writes O (every row: masked keys have P = 0).
        if (j0 > 0)
          for (int64_t r = 0; r < rows; ++r)
            if (alpha[r] != T(1)) simd::apply(O + r * ldo, O + r * ldo, d, [ar = alpha[r]](auto x) { return x * decltype(x)(ar); });
        ops.product(rows, d, ops.a(slot::probs, -1, rows, cols, st, int64_t{1}, rv),
                    ops.b(slot::block(jb, 1), kv_head, cols, d, Vv + j0 * ldv, ldv), T(1), j0 > 0 ? T(1) : T(0), O,
                    ldo);
      }
      T* lse = lse_all + bh * dm.T + i0;
      for (int64_t r = 0; r < rows; ++r) finish_row(score::OnlineRow<T>{m[r], l[r]}, O + r * ldo, d, lse[r]);
    }
  });
}

}  // namespace detail

template <class Score, class Mask, class T, HostDevice Dev>
AttentionForward<T, Dev> attention_fused_forward(const Score& score, const Mask&, const Tensor<T, Dev>& q_, const Tensor<T, Dev>& k_,
                                            const Tensor<T, Dev>& v_, const score::params_t<Score, T, Dev>& params,
                                            const AttentionOptions& opt = {}, const Tensor<T, Dev>& out_into = {}) {
  detail::require_float<T>();
  static_assert(score::is_policy_v<Score>, "attention_fused_forward: Score must be a sinklab::score policy");
  static_assert(mask::is_policy_v<Mask>, "attention_fused_forward: Mask must be a sinklab::mask policy");
  constexpr const char* kernel = "attention_fused_forward";
  const AttentionDims dm = detail::check_shapes(kernel, q_, k_, v_, opt);
  detail::check_score_params<T, Score, Dev>(kernel, score, params, dm);
  const Tensor<T, Dev> q = detail::unit_rows(q_), k = detail::unit_rows(k_), v = detail::unit_rows(v_);
  constexpr bool normalised = Score::family == score::Family::Normalised;
  [[maybe_unused]] constexpr T ninf = -std::numeric_limits<T>::infinity();

  AttentionForward<T, Dev> res;
  constexpr bool transposed_softmax = normalised && !Score::clipped;  // when the head size allows
  const bool transposed = transposed_softmax && block_gemm_fits<T>(dm.d);
  // The transposed softmax path writes every element; the others accumulate into zeros.
  if (out_into.defined()) {
    detail::check_output_view(kernel, "out", out_into, {dm.B, dm.H, dm.T, dm.d}, {&q_, &k_, &v_});
    res.out = out_into;
    if (!transposed) detail::zero_rows(res.out);
  } else {
    res.out = transposed ? detail::output_empty<T, Dev>({dm.B, dm.H, dm.T, dm.d})
                         : detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T, dm.d});
  }
  const detail::HeadRows<const T> qr = detail::head_rows(q), kr = detail::head_rows(k), vr = detail::head_rows(v);
  const detail::HeadRows<T> outr = detail::head_rows_mut(res.out);
  if constexpr (normalised) res.lse = detail::output_empty<T, Dev>({dm.B, dm.H, dm.T});  // every row is written
  const auto args = score.args(params);
  const T scale = static_cast<T>(detail::score_scale(opt, dm.d));
  const int64_t Bq = std::max<int64_t>(1, std::min(opt.block_q, dm.T));
  const int64_t Bk = std::max<int64_t>(1, std::min(opt.block_k, dm.S));
  const int64_t nqb = (dm.T + Bq - 1) / Bq;
  const int64_t d = dm.d;

  const bool blocked = detail::use_block_gemm<T>(d, Bk);
  const int64_t ldt = detail::round_up(dm.S, simd_width<T>());  // row stride of the transposed keys
  if constexpr (transposed_softmax) {
    if (transposed) {
      detail::softmax_forward_transposed<Score, Mask>(score, args, dm, opt, qr, kr, vr, scale, Bq, Bk, outr,
                                                      res.lse.data());
      return res;
    }
  }

  parallel_for(0, dm.B * dm.H * nqb, 1, [&](int64_t lo, int64_t hi) {
    detail::Scratch<T> sbuf(Bq * Bk), mbuf(Bq), lbuf(Bq), ktbuf(blocked ? d * ldt : 0);
    std::vector<int64_t> end(static_cast<std::size_t>(Bq));
    T* kt = ktbuf.data();
    T* sb = sbuf.data();
    T* m = mbuf.data();
    T* l = lbuf.data();
    int64_t kt_head = -1, kt_rows = 0;  // kt holds Kᵀ of keys [0, kt_rows) of kv head kt_head
    BlockProducts<T> ops(opt.precision);
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t qb = task % nqb, bh = task / nqb, b = bh / dm.H, h = bh % dm.H, hk = h / dm.group();
      const int64_t i0 = qb * Bq, rows = std::min(Bq, dm.T - i0);
      const int64_t kvlen = detail::kv_length(opt, b, dm.S);
      int64_t kend = 0;
      for (int64_t r = 0; r < rows; ++r) kend = std::max(kend, end[r] = Mask::key_end(i0 + r, dm.T, dm.S, kvlen));
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

      if constexpr (normalised) {
        T* lse = res.lse.data() + bh * dm.T + i0;
        const score::OnlineRow<T> start = score.template start<T>(args, h);
        for (int64_t r = 0; r < rows; ++r) {
          m[r] = start.m;
          l[r] = start.l;
        }
        // Online update of (m, l) with one block; with `rescale` the partial output follows.
        auto online = [&](int64_t j0, int64_t cols, bool rescale) {
          for (int64_t r = 0; r < rows; ++r) {
            T* s = sb + r * Bk;
            const int64_t ne = detail::visible_in_block(end[r], j0, cols);
            if (ne > 0) {
              const int64_t nv = detail::pad_masked(s, ne, blocked);
              score::OnlineRow<T> row{m[r], l[r]};
              const T alpha = row.rescale(simd::max(s, nv));
              const T shift = row.shift();
              row.add(simd::apply_sum(s, nv, [shift](auto x) {
                using std::exp;
                using V = decltype(x);
                return exp(x - V(shift));
              }));
              l[r] = row.l;
              m[r] = row.m;
              if (rescale && alpha != T(1))
                for (int64_t c = 0; c < d; ++c) O[r * ldo + c] *= alpha;
            }
            detail::zero_tail(s, ne, cols);
          }
        };
        if constexpr (!Score::clipped) {
          for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
            const int64_t cols = std::min(Bk, kend - j0);
            logits(j0, cols);
            online(j0, cols, true);
            aggregate(j0, cols);
          }
          for (int64_t r = 0; r < rows; ++r) detail::finish_row(score::OnlineRow<T>{m[r], l[r]}, O + r * ldo, d, lse[r]);
        } else {
          for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
            const int64_t cols = std::min(Bk, kend - j0);
            logits(j0, cols);
            online(j0, cols, false);
          }
          for (int64_t r = 0; r < rows; ++r) lse[r] = score::OnlineRow<T>{m[r], l[r]}.lse();
          for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
            const int64_t cols = std::min(Bk, kend - j0);
            logits(j0, cols);
            for (int64_t r = 0; r < rows; ++r) {
              T* s = sb + r * Bk;
              const int64_t ne = lse[r] == ninf ? 0 : detail::visible_in_block(end[r], j0, cols);
              const T lr = lse[r];
              simd::apply(s, s, ne, [&score, lr](auto x) {
                using std::exp;
                using V = decltype(x);
                return score.weight(exp(x - V(lr)));
              });
              detail::zero_tail(s, ne, cols);
            }
            aggregate(j0, cols);
          }
        }
      } else {
        std::vector<score::RowConstants> rc(static_cast<std::size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) rc[r] = score.row(end[r], kvlen);
        for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
          const int64_t cols = std::min(Bk, kend - j0);
          logits(j0, cols);
          for (int64_t r = 0; r < rows; ++r) {
            T* s = sb + r * Bk;
            const int64_t ne = detail::visible_in_block(end[r], j0, cols);
            const T c = static_cast<T>(rc[r].scale), bias = static_cast<T>(rc[r].bias);
            simd::apply(s, s, ne, [&score, c, bias](auto x) {
              using V = decltype(x);
              return score.weight(x, V(c), V(bias));
            });
            detail::zero_tail(s, ne, cols);
          }
          aggregate(j0, cols);
        }
      }
    }
  });
  return res;
}

template <class Score, class Mask, class T, HostDevice Dev>
AttentionGrads<T, Score, Dev> attention_fused_backward(const Score& score, const Mask&, const Tensor<T, Dev>& q_,
                                                  const Tensor<T, Dev>& k_, const Tensor<T, Dev>& v_,
                                                  const score::params_t<Score, T, Dev>& params,
                                                  const AttentionForward<T, Dev>& fwd, const Tensor<T, Dev>& dout_,
                                                  const AttentionOptions& opt = {}) {
  detail::require_float<T>();
  static_assert(score::is_policy_v<Score>, "attention_fused_backward: Score must be a sinklab::score policy");
  static_assert(mask::is_policy_v<Mask>, "attention_fused_backward: Mask must be a sinklab::mask policy");
  constexpr const char* kernel = "attention_fused_backward";
  const AttentionDims dm = detail::check_shapes(kernel, q_, k_, v_, opt);
  detail::check_score_params<T, Score, Dev>(kernel, score, params, dm);
  constexpr bool normalised = Score::family == score::Family::Normalised;
  [[maybe_unused]] constexpr T ninf = -std::numeric_limits<T>::infinity();
  detail::check_saved(kernel, q_, dout_, fwd, dm, normalised);
  const Tensor<T, Dev> q = detail::unit_rows(q_), k = detail::unit_rows(k_), v = detail::unit_rows(v_);
  const Tensor<T, Dev> dout = detail::unit_rows(dout_), out = detail::unit_rows(fwd.out);
  Tensor<T, Dev> lse_all;
  if constexpr (normalised) lse_all = fwd.lse.contiguous();

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
  const int64_t Bq = std::max<int64_t>(1, std::min(opt.block_q, dm.T));
  const int64_t Bk = std::max<int64_t>(1, std::min(opt.block_k, dm.S));
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
    std::vector<score::RowConstants> rc(static_cast<std::size_t>(Bq));
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
          const T* lse = normalised ? lse_all.data() + bh * dm.T + i0 : nullptr;
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

          if constexpr (normalised) {
            if constexpr (!Score::clipped) {
              for (int64_t r = 0; r < rows; ++r)
                D[r] = simd::dot(dO + r * d, outr.at(b, h, i0 + r), d);
            } else {
              for (int64_t r = 0; r < rows; ++r) D[r] = T(0);
              for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
                const int64_t cols = std::min(Bk, kend - j0);
                logits(j0, cols);
                value_grads(j0, cols);
                for (int64_t r = 0; r < rows; ++r) {
                  const int64_t ne = lse[r] == ninf ? 0 : detail::visible_in_block(end[r], j0, cols);
                  const T lr = lse[r];
                  T* dr = db + r * Bk;
                  simd::apply(sb + r * Bk, dr, dr, ne, [&score, lr](auto x, auto da) {
                    using std::exp;
                    using V = decltype(x);
                    const V p = exp(x - V(lr));
                    return p * score.weight_grad(p) * da;
                  });
                  D[r] += simd::sum(dr, ne);
                }
              }
            }
            if constexpr (dparam.enabled) {
              T acc = 0;
              for (int64_t r = 0; r < rows; ++r) acc += score.row_param_grad(args, h, lse[r], D[r]);
              dparam.add(bh, static_cast<double>(acc));
            }
          } else {
            for (int64_t r = 0; r < rows; ++r) rc[r] = score.row(end[r], kvlen);
          }

          for (int64_t j0 = 0; j0 < kend; j0 += Bk) {
            const int64_t cols = std::min(Bk, kend - j0);
            logits(j0, cols);
            value_grads(j0, cols);
            for (int64_t r = 0; r < rows; ++r) {
              T* s = sb + r * Bk;
              T* dr = db + r * Bk;
              if constexpr (normalised) {
                const int64_t ne = lse[r] == ninf ? 0 : detail::visible_in_block(end[r], j0, cols);
                const int64_t nv = detail::pad_masked(s, ne, blocked);  // P = 0 and dS = 0 past ne
                const T lr = lse[r], Dr = D[r];
                simd::apply(s, s, nv, [lr](auto x) {  // s ← P
                  using std::exp;
                  using V = decltype(x);
                  return exp(x - V(lr));
                });
                simd::apply(s, dr, dr, nv, [&score, Dr](auto p, auto da) {  // dr ← dS
                  using V = decltype(p);
                  return p * (score.weight_grad(p) * da - V(Dr));
                });
                if constexpr (Score::clipped)
                  simd::apply(s, s, ne, [&score](auto p) { return score.weight(p); });  // s ← A
                if constexpr (transformed)  // dS at the raw logits
                  simd::apply(tg + r * Bk, dr, dr, ne, [](auto t, auto x) { return t * x; });
                detail::zero_tail(s, ne, cols);
                detail::zero_tail(dr, ne, cols);
              } else {
                const int64_t ne = detail::visible_in_block(end[r], j0, cols);
                const T c = static_cast<T>(rc[r].scale), bias = static_cast<T>(rc[r].bias);
                simd::apply(s, dr, dr, ne, [&score, c, bias](auto x, auto da) {
                  using V = decltype(x);
                  return score.weight_grad(x, V(c), V(bias)) * da;
                });
                simd::apply(s, s, ne, [&score, c, bias](auto x) {
                  using V = decltype(x);
                  return score.weight(x, V(c), V(bias));
                });
                if constexpr (transformed)  // dS at the raw logits
                  simd::apply(tg + r * Bk, dr, dr, ne, [](auto t, auto x) { return t * x; });
                detail::zero_tail(s, ne, cols);
                detail::zero_tail(dr, ne, cols);
              }
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
