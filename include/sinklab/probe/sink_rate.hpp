// Thresholded sink rate and column statistics of the gradient-sinks paper (eqs. 1-2), on
// attention probabilities A [B, H, T, S] (queries t and key s share positions: t runs s..T−1). Positions are 0-based here (the paper's s = 1 is s = 0).
//
//   α_s^h  = (1/T_ε) Σ_{t=s}^{s+T_ε-1} a_ts          Sink_s^ε = (1/H) Σ_h 1[α_s^h > ε]
//   M̄_s^h = (1/(T-s)) Σ_{t=s}^{T-1} a_ts            S̄_s^h = (1/(T-s)) Σ_{t=s}^{T-1} a_ts²
//
// α, M̄ and S̄ are averaged over the batch before the threshold is applied. When the sequence is
// shorter than s + T_ε the window is cut at T and α divides by the number of queries it holds
// (Gu et al.'s form with T < T_ε); `window` reports the count used.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/probe/attention_sink.hpp"

namespace sinklab::probe {

struct SinkRate {
  double rate = 0;  // fraction of heads with α > ε
  PerHead alpha;    // α_s per head (batch mean)
  double epsilon = 0;
  int64_t window = 0;  // queries averaged per head (min(T_ε, T - s))
};

template <class T>
SinkRate sink_rate(const Tensor<T>& A, int64_t s = 0, double epsilon = 0.3, int64_t T_eps = 64) {
  constexpr std::string_view fn = "probe::sink_rate";
  detail::require_attention(fn, A);
  detail::require_key(fn, A, s);
  SINKLAB_CHECK(T_eps > 0, fn, ": T_eps must be positive, got ", T_eps);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2);
  SINKLAB_CHECK(s < Tq, fn, ": position ", s, " has no query at or after it in attention ", A.shape());
  const int64_t end = std::min(Tq, s + T_eps);
  SinkRate out;
  out.epsilon = epsilon;
  out.window = end - s;
  int64_t above = 0;
  for (int64_t h = 0; h < H; ++h) {
    double sum = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = s; t < end; ++t) sum += static_cast<double>(A(b, h, t, s));
    const double alpha = sum / static_cast<double>(B * out.window);
    out.alpha.values.push_back(alpha);
    if (alpha > epsilon) ++above;
  }
  out.rate = static_cast<double>(above) / static_cast<double>(H);
  return out;
}

struct ColumnMass {
  PerHead mass;           // M̄_s
  PerHead second_moment;  // S̄_s
};

template <class T>
ColumnMass column_mass(const Tensor<T>& A, int64_t s = 0) {
  constexpr std::string_view fn = "probe::column_mass";
  detail::require_attention(fn, A);
  detail::require_key(fn, A, s);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2);
  SINKLAB_CHECK(s < Tq, fn, ": position ", s, " has no query at or after it in attention ", A.shape());
  const double n = static_cast<double>(B * (Tq - s));
  ColumnMass out;
  for (int64_t h = 0; h < H; ++h) {
    double m = 0, m2 = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = s; t < Tq; ++t) {
        const double a = static_cast<double>(A(b, h, t, s));
        m += a;
        m2 += a * a;
      }
    out.mass.values.push_back(m / n);
    out.second_moment.values.push_back(m2 / n);
  }
  return out;
}

}  // namespace sinklab::probe
