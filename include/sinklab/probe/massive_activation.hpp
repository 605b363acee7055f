// Massive activations (Sun et al. 2024, "Massive Activations in Large Language Models"): a few
// entries of a hidden state, at fixed channels and typically at the first token, that are
// thousands of times the median magnitude. They name an activation massive when |x| > 100 and
// about 1000× the median |x|; the sink-emergence study reads "massive" as top-1 / median ≥ 100.
//
//   MassiveActivation m = massive_activation(x);   // x [B, T, D] (any [..., T, D])
//   m.ratio   top-1 |x| over the median |x| of every entry
//   m.top, m.median, m.token, m.channel    where the top-1 entry sits (first occurrence)
//   m.token_share   fraction of the batch's sequences whose own top-1 entry is at m.token
//
// The token and channel are what make it a massive activation rather than an outlier: the
// papers find it at the first token (or a delimiter) in one or two fixed channels of every sequence.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

struct MassiveActivation {
  double top = 0;         // max |x|
  double median = 0;      // median |x| over every entry
  double ratio = 0;       // top / median (0 when the median is 0)
  int64_t token = -1;     // position of the top entry (axis −2)
  int64_t channel = -1;   // its channel (axis −1)
  double token_share = 0; // sequences whose own largest |x| sits at `token`
};

template <class T>
MassiveActivation massive_activation(const Tensor<T>& x) {
  constexpr std::string_view fn = "probe::massive_activation";
  SINKLAB_CHECK(x.defined() && x.rank() >= 2 && x.numel() > 0, fn, ": expected a non-empty [..., T, D] tensor, got ",
                x.defined() ? x.shape().str() : std::string("undefined"));
  const Tensor<T> c = x.contiguous();
  const int64_t D = c.size(-1), Tn = c.size(-2), per_seq = Tn * D, seqs = c.numel() / per_seq;
  MassiveActivation m;
  std::vector<double> abs_all(static_cast<std::size_t>(c.numel()));
  std::vector<int64_t> seq_top_token(static_cast<std::size_t>(seqs), 0);
  for (int64_t s = 0; s < seqs; ++s) {
    double seq_top = -1;
    for (int64_t i = 0; i < per_seq; ++i) {
      const int64_t k = s * per_seq + i;
      const double a = std::abs(static_cast<double>(c.data()[k]));
      abs_all[static_cast<std::size_t>(k)] = a;
      if (a > seq_top) seq_top = a, seq_top_token[static_cast<std::size_t>(s)] = i / D;
      if (a > m.top) m.top = a, m.token = i / D, m.channel = i % D;
    }
  }
  if (m.token < 0) m.token = 0, m.channel = 0;  // an all-zero tensor
  auto mid = abs_all.begin() + static_cast<std::ptrdiff_t>(abs_all.size() / 2);
  std::nth_element(abs_all.begin(), mid, abs_all.end());
  m.median = *mid;
  m.ratio = m.median > 0 ? m.top / m.median : 0.0;
  m.token_share = static_cast<double>(std::count(seq_top_token.begin(), seq_top_token.end(), m.token)) /
                  static_cast<double>(seqs);
  return m;
}

}  // namespace sinklab::probe
