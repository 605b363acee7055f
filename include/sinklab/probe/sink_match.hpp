// Per-sample sink location (NOP-vs-broadcast paper, broadcast toy and ViT inflow plots):
//
//   attention_inflow(A)       ĵ_bh = argmax_j (1/T) Σ_i A_bij per sequence and head — the token
//                             receiving the most attention mass ("attention inflow"), [B, H]
//   inflow_strength(A)        per head, the mean over sequences of the peak column mass
//                             (1/T) Σ_i A_b,i,ĵ — a sink that moves between inputs (ViT) at full
//                             strength, where sink_score's batch-mean column would dilute it
//   sink_match(A, target)     per head: the fraction of sequences whose ĵ equals the ground-truth
//                             hub j*_b (the broadcast toy's selected token), and the mean peak
//                             column mass (1/T) Σ_i A_b,i,ĵ ("sink strength")
//
// A [B, H, T, S] as in attention_sink.hpp; ties go to the lower key index.
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/probe/attention_sink.hpp"

namespace sinklab::probe {

struct SinkMatch {
  PerHead match_rate;  // fraction of sequences with ĵ = j*
  PerHead strength;    // mean over sequences of the peak column mass
};

namespace detail {
// Column masses of one (b, h) attention matrix, and its argmax.
template <class T>
int64_t peak_column(const T* m, int64_t Tq, int64_t S, std::vector<double>& col, double& peak) {
  std::fill(col.begin(), col.end(), 0.0);
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < S; ++j) col[j] += static_cast<double>(m[i * S + j]);
  int64_t best = 0;
  for (int64_t j = 1; j < S; ++j)
    if (col[j] > col[best]) best = j;
  peak = col[best] / static_cast<double>(Tq);
  return best;
}
}  // namespace detail

template <class T>
Tensor<int64_t> attention_inflow(const Tensor<T>& A) {
  detail::require_attention("probe::attention_inflow", A);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2), S = A.size(3);
  const Tensor<T> a = A.contiguous();
  Tensor<int64_t> out = Tensor<int64_t>::zeros({B, H});
  std::vector<double> col(static_cast<std::size_t>(S));
  double peak = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) out(b, h) = detail::peak_column(a.data() + (b * H + h) * Tq * S, Tq, S, col, peak);
  return out;
}

template <class T>
PerHead inflow_strength(const Tensor<T>& A) {
  detail::require_attention("probe::inflow_strength", A);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2), S = A.size(3);
  const Tensor<T> a = A.contiguous();
  std::vector<double> col(static_cast<std::size_t>(S));
  PerHead out;
  for (int64_t h = 0; h < H; ++h) {
    double sum = 0, peak = 0;
    for (int64_t b = 0; b < B; ++b) {
      detail::peak_column(a.data() + (b * H + h) * Tq * S, Tq, S, col, peak);
      sum += peak;
    }
    out.values.push_back(sum / static_cast<double>(B));
  }
  return out;
}

// target [B]: the ground-truth hub index of each sequence.
template <class T, class I>
SinkMatch sink_match(const Tensor<T>& A, const Tensor<I>& target) {
  constexpr std::string_view fn = "probe::sink_match";
  detail::require_attention(fn, A);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2), S = A.size(3);
  SINKLAB_CHECK(target.defined() && target.rank() == 1 && target.size(0) == B, fn, ": targets of shape ",
                target.defined() ? target.shape().str() : std::string("undefined"), " for attention ", A.shape(),
                ", expected [", B, "]");
  for (int64_t b = 0; b < B; ++b)
    SINKLAB_CHECK(0 <= static_cast<int64_t>(target(b)) && static_cast<int64_t>(target(b)) < S, fn, ": target ",
                  static_cast<int64_t>(target(b)), " of sequence ", b, " is not a key index of attention ", A.shape());
  const Tensor<T> a = A.contiguous();
  std::vector<double> col(static_cast<std::size_t>(S));
  SinkMatch out;
  for (int64_t h = 0; h < H; ++h) {
    double hits = 0, strength = 0, peak = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t j = detail::peak_column(a.data() + (b * H + h) * Tq * S, Tq, S, col, peak);
      hits += j == static_cast<int64_t>(target(b)) ? 1.0 : 0.0;
      strength += peak;
    }
    out.match_rate.values.push_back(hits / static_cast<double>(B));
    out.strength.values.push_back(strength / static_cast<double>(B));
  }
  return out;
}

}  // namespace sinklab::probe
