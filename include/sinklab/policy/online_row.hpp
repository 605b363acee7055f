// The running normaliser of one softmax row (FlashAttention-2's m and l), written once for every
// attention kernel: the fused CPU kernels (one row at a time, or a block of rows across SIMD
// lanes), the materialised reference and a CUDA kernel all keep their rows in an OnlineRow.
//
//   OnlineRow<V> r = score.template start<V>(args, h);   // empty, or the sink's logit as one key
//   const V alpha = r.rescale(block_max);                 // new max; α rescales partial sums
//   r.add(Σ_j exp(s_j − r.shift()));                      // this block's terms
//   lse = r.lse();  out /= r.sum();                       // finalise
//
// V is a float, a double or an xsimd batch (one row per lane); every member is SINKLAB_HD and
// branch-free through select(), so a batch updates all its lanes at once.
#pragma once
#include <cmath>
#include <cstddef>
#include <limits>

#include "sinklab/core/config.hpp"
#include "sinklab/policy/math.hpp"

namespace sinklab::score {

template <class V>
struct OnlineRow {
  V m;  // running max of the logits seen (−inf before the first)
  V l;  // Σ e^{s − m} over the logits seen

  // No logit seen yet.
  SINKLAB_HD static OnlineRow empty() {
    return {V(-std::numeric_limits<double>::infinity()), V(0)};
  }
  // One logit s seen already, with no value attached (a learnable sink).
  SINKLAB_HD static OnlineRow from_logit(V s) { return {s, V(1)}; }

  // What exponents subtract: m, or 0 while no logit has been seen (−inf − (−inf) would be NaN).
  SINKLAB_HD V shift() const {
    using policy::math::select;
    return select(m == V(-std::numeric_limits<double>::infinity()), V(0), m);
  }
  // Moves the max to max(m, block_max) and rescales l; returns α = e^{m_old − m_new}, the factor
  // that partial sums accumulated against the old max (e.g. an output row) must be multiplied by
  // (0 for a row that had seen nothing).
  SINKLAB_HD V rescale(V block_max) {
    using std::exp;
    using std::max;
    const V old = m;
    m = max(m, block_max);
    const V alpha = exp(old - shift());
    l = l * alpha;
    return alpha;
  }
  // Adds Σ e^{s − shift()} of a block (after rescale).
  SINKLAB_HD void add(V block_sum) { l = l + block_sum; }

  // The row's total Σ e^{s − m} (0 when it saw nothing) and its log-sum-exp (−inf then).
  SINKLAB_HD V sum() const { return l; }
  // A batch takes it lane by lane, so a row's lse is the same bits whether it ran alone or
  // across SIMD lanes with other rows (a batch's log may differ from the scalar one in the last
  // bit, and the backward's probabilities are e^{s − lse}).
  SINKLAB_HD V lse() const {
    if constexpr (requires { V::size; }) {
      using T = typename V::value_type;
      alignas(64) T mm[V::size], ll[V::size];
      m.store_aligned(mm);
      l.store_aligned(ll);
      for (std::size_t i = 0; i < V::size; ++i) mm[i] = OnlineRow<T>{mm[i], ll[i]}.lse();
      return V::load_aligned(mm);
    } else {
      using policy::math::select;
      using std::log;
      return select(l > V(0), m + log(l), V(-std::numeric_limits<double>::infinity()));
    }
  }
};

}  // namespace sinklab::score
