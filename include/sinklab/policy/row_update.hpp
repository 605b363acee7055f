// The row updates of the score families: what one query row keeps across the key blocks of an
// attention kernel, how a block of its logits becomes the weights that multiply the values
// (RowUpdate), and how a pair's gradient follows in the backward (RowGrad). Each family owns
// its pair, as FlashInfer's attention variants own their logits transform and row update, so
// every kernel — the fused CPU one (a row at a time, or rows across SIMD lanes), the SIMT one and
// the tensor-core one — writes its loop once and never asks which family runs:
//
//   U u(score, args, head, visible, keys);                 // U = score::row_update_t<Score, V>
//   for (int pass = 0; pass < U::passes; ++pass) {
//     for each key block:  s ← logits;  α = u.block(score, pass, s);
//                          if (U::accumulates(pass)) O = α·O + s·V;
//     u.end_pass(pass);
//   }
//   O *= u.out_scale();   if constexpr (U::saves_lse) lse = u.lse();
//
// `s` is the kernel's Block: its view of this row's scaled (transformed) logits in one key block
// — contiguous floats, a column of SIMD lanes, an MMA fragment — with
//   s.max()       the largest visible logit (−inf if none)
//   s.map(f)      s_j ← f(s_j) on the visible keys and 0 on the others (f may also be called on
//                 masked entries; their results are replaced)
//   s.map_sum(f)  the same, returning Σ_j s_j
// f receives the Block's element type E (a float, a double, an xsimd batch); row values enter it
// as E(x).
//
// The backward recomputes each pair from its logit s (FlashAttention-2):
//   G g(score, visible, keys, lse_i, D_i);                 // G = score::row_grad_t<Score, V>
//   u = g.pre(s);  a = g.weight(score, u);  dS = g.dscore(score, u, dA)   (dA = dO·vⱼ)
// and G::delta says where D_i = Σ_j P_ij w'(P_ij) dA_ij comes from: nowhere (point-wise), dO_i·O_i
// (softmax: w(P) = P), or a sweep over the keys summing g.delta_term(score, u, dA) (clipped). A
// row's backward state is two numbers (lse and D, or the row constants), G::from(a, b) rebuilds
// it where a kernel keeps rows in shared memory.
//
// V is the row state's type: float, double, or an xsimd batch of rows (U::rows_in_lanes says
// whether rows may share a batch: their start must not depend on the row). Exp is the
// exponential (std / xsimd by default; the tensor-core kernels pass the fast hardware one).
// A new family is a new pair here and a line in rows::Select; the kernels stay as they are.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/policy/math.hpp"
#include "sinklab/policy/online_row.hpp"
#include "sinklab/policy/score.hpp"

namespace sinklab::score {

// e^x by std::exp, or xsimd's for a batch (argument-dependent lookup).
struct StdExp {
  template <class E>
  SINKLAB_HD static E apply(E x) {
    using std::exp;
    return exp(x);
  }
};

// Where the backward's D_i comes from.
enum class Delta { None, FromOutput, FromKeys };

namespace rows {

template <class V>
SINKLAB_HD V ninf() {
  return V(-std::numeric_limits<double>::infinity());
}
// lse, or +inf for a row that saw nothing (−inf): e^{s − lse} is then 0 instead of NaN.
template <class V>
SINKLAB_HD V safe_lse(V lse) {
  using policy::math::select;
  return select(lse == ninf<V>(), V(std::numeric_limits<double>::infinity()), lse);
}

// ---------------------------------------------------------------- forward

// Softmax and a learnable sink: one pass with the online normaliser (FlashAttention-2's m and l);
// the score starts the row (a sink: one key of logit S_h already seen); weights e^{s − m},
// the output divided by l at the end; saves lse.
template <class Score, class V, class Exp>
struct OnlineSoftmax {
  static constexpr int passes = 1;
  static constexpr bool saves_lse = true;
  static constexpr bool rows_in_lanes = true;
  OnlineRow<V> row;

  template <class A>
  SINKLAB_HD OnlineSoftmax(const Score& sc, const A& args, int64_t head, int64_t /*visible*/, int64_t /*keys*/)
      : row(sc.template start<V>(args, head)) {}
  SINKLAB_HD static constexpr bool accumulates(int /*pass*/) { return true; }
  template <class Block>
  SINKLAB_HD V block(const Score&, int /*pass*/, Block& s) {
    const V alpha = row.rescale(s.max());
    const V shift = row.shift();
    row.add(s.map_sum([shift](auto x) {
      using E = decltype(x);
      return Exp::apply(x - E(shift));
    }));
    return alpha;
  }
  SINKLAB_HD void end_pass(int) {}
  SINKLAB_HD V out_scale() const {
    using policy::math::select;
    return select(row.sum() > V(0), V(1) / row.sum(), V(0));
  }
  SINKLAB_HD V lse() const { return row.lse(); }
};

// Clipped softmax: the final normaliser is needed before clipping, so two passes — the first
// runs the online normaliser alone, the second turns each logit into weight(e^{s − lse}).
template <class Score, class V, class Exp>
struct TwoPassSoftmax {
  static constexpr int passes = 2;
  static constexpr bool saves_lse = true;
  static constexpr bool rows_in_lanes = false;
  OnlineSoftmax<Score, V, Exp> stats;
  V lse_;

  template <class A>
  SINKLAB_HD TwoPassSoftmax(const Score& sc, const A& args, int64_t head, int64_t visible, int64_t keys)
      : stats(sc, args, head, visible, keys), lse_(ninf<V>()) {}
  SINKLAB_HD static constexpr bool accumulates(int pass) { return pass == 1; }
  template <class Block>
  SINKLAB_HD V block(const Score& sc, int pass, Block& s) {
    if (pass == 0) return stats.block(sc, pass, s);
    const V l = safe_lse(lse_);
    s.map([&sc, l](auto x) {
      using E = decltype(x);
      return sc.weight(Exp::apply(x - E(l)));
    });
    return V(1);
  }
  SINKLAB_HD void end_pass(int pass) {
    if (pass == 0) lse_ = stats.lse();
  }
  SINKLAB_HD V out_scale() const { return V(1); }
  SINKLAB_HD V lse() const { return lse_; }
};

// Point-wise scores: a = c_i · h(s + b_i) with the row's constants; no normaliser, nothing saved.
template <class Score, class V, class Exp>
struct Pointwise {
  static constexpr int passes = 1;
  static constexpr bool saves_lse = false;
  static constexpr bool rows_in_lanes = false;  // the constants depend on the row's visible keys
  V c, b;

  template <class A>
  SINKLAB_HD Pointwise(const Score& sc, const A& /*args*/, int64_t /*head*/, int64_t visible, int64_t keys) {
    const RowConstants rc = sc.row(visible, keys);
    c = V(rc.scale), b = V(rc.bias);
  }
  SINKLAB_HD static constexpr bool accumulates(int /*pass*/) { return true; }
  template <class Block>
  SINKLAB_HD V block(const Score& sc, int /*pass*/, Block& s) {
    const V c_ = c, b_ = b;
    s.map([&sc, c_, b_](auto x) {
      using E = decltype(x);
      return sc.weight(x, E(c_), E(b_));
    });
    return V(1);
  }
  SINKLAB_HD void end_pass(int) {}
  SINKLAB_HD V out_scale() const { return V(1); }
};

// ---------------------------------------------------------------- backward

// The softmax family: u = P = e^{s − lse}, a = w(P), dS = P ∘ (w'(P) dA − D).
template <class Score, class V, class Exp>
struct NormalisedGrad {
  static constexpr Delta delta = Score::clipped ? Delta::FromKeys : Delta::FromOutput;
  V a, b;  // lse (+inf for a row that saw nothing), D

  SINKLAB_HD static NormalisedGrad from(V a_, V b_) {
    NormalisedGrad g;
    g.a = a_, g.b = b_;
    return g;
  }
  NormalisedGrad() = default;
  SINKLAB_HD NormalisedGrad(const Score&, int64_t /*visible*/, int64_t /*keys*/, V lse, V D)
      : a(safe_lse(lse)), b(D) {}
  template <class E>
  SINKLAB_HD E pre(E s) const {
    return Exp::apply(s - E(a));
  }
  template <class E>
  SINKLAB_HD E weight(const Score& sc, E u) const {
    return sc.weight(u);
  }
  template <class E>
  SINKLAB_HD E dscore(const Score& sc, E u, E dA) const {
    return u * (sc.weight_grad(u) * dA - E(b));
  }
  template <class E>
  SINKLAB_HD E delta_term(const Score& sc, E u, E dA) const {
    return u * sc.weight_grad(u) * dA;
  }
};

// Point-wise scores: u = s, a = c h(s + b), dS = c h'(s + b) dA.
template <class Score, class V, class Exp>
struct PointwiseGrad {
  static constexpr Delta delta = Delta::None;
  V a, b;  // the row constants c, b

  SINKLAB_HD static PointwiseGrad from(V a_, V b_) {
    PointwiseGrad g;
    g.a = a_, g.b = b_;
    return g;
  }
  PointwiseGrad() = default;
  SINKLAB_HD PointwiseGrad(const Score& sc, int64_t visible, int64_t keys, V /*lse*/, V /*D*/) {
    const RowConstants rc = sc.row(visible, keys);
    a = V(rc.scale), b = V(rc.bias);
  }
  template <class E>
  SINKLAB_HD E pre(E s) const {
    return s;
  }
  template <class E>
  SINKLAB_HD E weight(const Score& sc, E u) const {
    return sc.weight(u, E(a), E(b));
  }
  template <class E>
  SINKLAB_HD E dscore(const Score& sc, E u, E dA) const {
    return sc.weight_grad(u, E(a), E(b)) * dA;
  }
  template <class E>
  SINKLAB_HD E delta_term(const Score&, E, E) const {
    return E(0);
  }
};

// The family's pair.
template <class Score, class V, class Exp>
struct Select {
  using update = std::conditional_t<Score::family == Family::Pointwise, Pointwise<Score, V, Exp>,
                                    std::conditional_t<Score::clipped, TwoPassSoftmax<Score, V, Exp>,
                                                       OnlineSoftmax<Score, V, Exp>>>;
  using grad = std::conditional_t<Score::family == Family::Pointwise, PointwiseGrad<Score, V, Exp>,
                                  NormalisedGrad<Score, V, Exp>>;
};

}  // namespace rows

template <class Score, class V, class Exp = StdExp>
using row_update_t = typename rows::Select<Score, V, Exp>::update;
template <class Score, class V, class Exp = StdExp>
using row_grad_t = typename rows::Select<Score, V, Exp>::grad;

// Whether the forward saves lse for this score (the softmax family).
template <class Score>
inline constexpr bool saves_lse_v = row_update_t<Score, double>::saves_lse;

}  // namespace sinklab::score
