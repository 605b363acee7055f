// Shape checks and small helpers shared by the probe metrics (not part of the public API).
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::probe::detail {

template <class T>
inline constexpr bool is_real_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
void require_rank(std::string_view fn, std::string_view what, const Tensor<T>& t, int rank,
                  std::string_view layout) {
  SINKLAB_CHECK(t.defined(), fn, ": ", what, " is an undefined tensor");
  SINKLAB_CHECK(t.rank() == rank, fn, ": ", what, " has shape ", t.shape(), ", expected rank ", rank, " ",
                layout);
}

template <class T>
void require_nonempty(std::string_view fn, std::string_view what, const Tensor<T>& t) {
  SINKLAB_CHECK(t.defined() && t.numel() > 0, fn, ": ", what, " is empty (shape ",
                t.defined() ? t.shape().str() : std::string("undefined"), ")");
}

// Euclidean norm of n contiguous values, accumulated in double.
template <class T>
double norm2(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return std::sqrt(s);
}

}  // namespace sinklab::probe::detail
