// Token-wise activation norms (gradient-sinks paper, Figs. 1 and 5): ‖x_t‖₂ per position,
// averaged over the batch, and the comparison of the first token with the early tokens 1–15.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

// x [B, T, D] (or [T, D]) → [T]: mean over the batch of ‖x_bt‖₂.
template <class T>
Tensor<double> token_norms(const Tensor<T>& x) {
  constexpr std::string_view fn = "probe::token_norms";
  SINKLAB_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3), fn, ": expected [B, T, D] or [T, D], got ",
                x.defined() ? x.shape().str() : std::string("undefined"));
  detail::require_nonempty(fn, "input", x);
  const Tensor<T> c = x.rank() == 2 ? x.contiguous().view({1, x.size(0), x.size(1)}) : x.contiguous();
  const int64_t B = c.size(0), Tn = c.size(1), D = c.size(2);
  Tensor<double> out = Tensor<double>::zeros({Tn});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) out(t) += detail::norm2(c.data() + (b * Tn + t) * D, D);
  for (int64_t t = 0; t < Tn; ++t) out(t) /= static_cast<double>(B);
  return out;
}

struct EarlyTokenNorms {
  double token0 = 0;     // batch-mean norm of token 0
  double rest_mean = 0;  // mean over tokens first..last of their batch-mean norms
  double rest_max = 0;   // max over tokens first..last
  int64_t first = 0, last = 0;  // the comparison range actually used (inclusive)
};

// Token 0 against tokens first..last (default 1..15, cut at T − 1).
template <class T>
EarlyTokenNorms early_token_norms(const Tensor<T>& x, int64_t first = 1, int64_t last = 15) {
  const Tensor<double> n = token_norms(x);
  const int64_t Tn = n.size(0);
  last = std::min(last, Tn - 1);
  SINKLAB_CHECK(1 <= first && first <= last, "probe::early_token_norms: token range [", first, ", ", last,
                "] is empty for ", Tn, " tokens (input ", x.shape(), ")");
  EarlyTokenNorms out;
  out.token0 = n(0);
  out.first = first;
  out.last = last;
  for (int64_t t = first; t <= last; ++t) {
    out.rest_mean += n(t);
    out.rest_max = std::max(out.rest_max, n(t));
  }
  out.rest_mean /= static_cast<double>(last - first + 1);
  return out;
}

}  // namespace sinklab::probe
