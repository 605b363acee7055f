// max |a − b| / max |b| over two same-sized vectors or tensors (0 when b is all zeros): the
// kernel tests' comparison of a result with its reference. Equal infinities agree; an infinity
// on one side only is infinitely far.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <doctest/doctest.h>

#include "sinklab/core/tensor.hpp"

namespace sinklab_test {

template <class A, class B>
double max_rel_diff(const std::vector<A>& a, const std::vector<B>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return std::numeric_limits<double>::infinity();
      continue;
    }
    diff = std::max(diff, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return scale > 0 ? diff / scale : diff;
}

template <class T>
double max_rel_diff(const sinklab::Tensor<T>& a, const sinklab::Tensor<T>& b) {
  REQUIRE(a.shape() == b.shape());
  return max_rel_diff(a.to_vector(), b.to_vector());
}

}  // namespace sinklab_test
