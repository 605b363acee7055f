// PerHead: one number per attention head, with the layer-level summaries the papers report.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab::probe {

struct PerHead {
  std::vector<double> values;  // values[h] for head h

  int64_t heads() const { return static_cast<int64_t>(values.size()); }
  double operator[](int64_t h) const { return values.at(static_cast<std::size_t>(h)); }
  double mean() const {
    SINKLAB_CHECK(!values.empty(), "PerHead::mean: no heads");
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  }
  double max() const {
    SINKLAB_CHECK(!values.empty(), "PerHead::max: no heads");
    return *std::max_element(values.begin(), values.end());
  }
  double min() const {
    SINKLAB_CHECK(!values.empty(), "PerHead::min: no heads");
    return *std::min_element(values.begin(), values.end());
  }
};

}  // namespace sinklab::probe
