// Δlogit_<s> (VGA, Fig. 5): the pre-softmax advantage of the sink key s over the other keys a
// causal query can see, averaged over a query set:
//
//   Δ_i = logit(i, s) − mean_{j < i, j ≠ s} logit(i, j)
//
// on logits [B, H, T, T] (query i, key j; entries j > i are never read, so a -inf causal mask
// is fine). As in the VGA paper (mean_{j=1..i−1} for s = 0), the query's own key j = i is left
// out of the "other keys" by default; `include_diagonal = true` uses j ≤ i instead. Queries
// i ≤ s (which cannot see s as another key) and queries with no other key are skipped.
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/probe/attention_sink.hpp"

namespace sinklab::probe {

template <class T, class M>
PerHead delta_logit(const Tensor<T>& logits, int64_t s, const Tensor<M>& query_mask,
                    bool include_diagonal = false) {
  constexpr std::string_view fn = "probe::delta_logit";
  detail::require_square_attention(fn, logits);
  detail::require_key(fn, logits, s);
  detail::require_query_mask(fn, logits, query_mask);
  const int64_t B = logits.size(0), H = logits.size(1), Tq = logits.size(2);
  const Tensor<T> c = logits.contiguous();
  std::vector<double> sum(static_cast<std::size_t>(H), 0.0);
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = s + 1; i < Tq; ++i) {
      if (!detail::mask_selects(query_mask, b, i)) continue;
      const int64_t last = include_diagonal ? i : i - 1;  // last other key, inclusive
      const int64_t others = last;                        // keys 0..last minus the sink (s ≤ last)
      if (others <= 0) continue;
      ++count;
      for (int64_t h = 0; h < H; ++h) {
        const T* row = c.data() + ((b * H + h) * Tq + i) * Tq;
        double rest = 0;
        for (int64_t j = 0; j <= last; ++j)
          if (j != s) rest += static_cast<double>(row[j]);
        sum[h] += static_cast<double>(row[s]) - rest / static_cast<double>(others);
      }
    }
  SINKLAB_CHECK(count > 0, fn, ": no query of logits ", logits.shape(), " has key ", s,
                " and at least one other key in view (query mask too narrow or T too small)");
  PerHead out;
  for (double v : sum) out.values.push_back(v / static_cast<double>(count));
  return out;
}

template <class T>
PerHead delta_logit(const Tensor<T>& logits, int64_t s = 0, bool include_diagonal = false) {
  return delta_logit(logits, s,
                     Tensor<uint8_t>::ones({logits.defined() && logits.rank() == 4 ? logits.size(2) : 0}),
                     include_diagonal);
}

}  // namespace sinklab::probe
