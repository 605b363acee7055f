// What the language-model studies share when they log a probe report as scalars: the name of a
// per-head metric, and the mean over the "other early tokens" 1..15 that token 0 is read against
// (the gradient-sinks paper's comparison).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/experiment/matrix.hpp"

namespace examples {

// "L<l>_h<h>_<name>" (layer and head from 0): the head's metric under the Matrix's per-layer name,
// so layer_table and the per-layer readers find it. Built by appending: GCC 12 warns falsely
// (-Wrestrict) on an operator+ chain here.
inline std::string head_metric(int64_t l, int64_t h, const char* name) {
  std::string k = "h";
  k += std::to_string(h);
  k += '_';
  k += name;
  return sinklab::experiment::Matrix::layer_metric(l, k);
}

// Tokens 1..15 (cut at T − 1): the paper's "other early tokens".
constexpr int64_t kEarlyLast = 15;
// Mean of a per-token profile over tokens 1..kEarlyLast (NaN with fewer than two tokens).
inline double early_mean(const std::vector<double>& per_token) {
  const auto last = std::min<int64_t>(kEarlyLast, static_cast<int64_t>(per_token.size()) - 1);
  double s = 0;
  for (int64_t t = 1; t <= last; ++t) s += per_token[static_cast<std::size_t>(t)];
  return last >= 1 ? s / double(last) : NAN;
}

}  // namespace examples
