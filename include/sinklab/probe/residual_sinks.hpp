// Residual sinks (outlier-driven rescaling paper): a few fixed hidden dimensions that carry
// massive activations. DimensionMaxAbs keeps max |x| per last-axis dimension over every batch
// added; top(k) lists the largest dimensions. residual_sinks(x, ratio) finds the dimensions that
// are large at most tokens, not at a few: median |x| over tokens >= ratio × the median |x| of x.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

struct DimensionValue {
  int64_t dim;
  double value;
};

class DimensionMaxAbs {
 public:
  // x [..., D]: any leading axes (batch, tokens) are reduced.
  template <class T>
  void add(const Tensor<T>& x) {
    constexpr std::string_view fn = "probe::DimensionMaxAbs::add";
    SINKLAB_CHECK(x.defined() && x.rank() >= 1 && x.numel() > 0, fn, ": expected a non-empty [..., D] tensor, got ",
                  x.defined() ? x.shape().str() : std::string("undefined"));
    const int64_t D = x.size(-1), rows = x.numel() / D;
    if (max_.empty()) max_.assign(static_cast<std::size_t>(D), 0.0);
    SINKLAB_CHECK(static_cast<int64_t>(max_.size()) == D, fn, ": tensor of shape ", x.shape(),
                  " has last axis ", D, ", earlier tensors had ", max_.size());
    const Tensor<T> c = x.contiguous();
    for (int64_t r = 0; r < rows; ++r) {
      const T* p = c.data() + r * D;
      for (int64_t d = 0; d < D; ++d) max_[d] = std::max(max_[d], std::abs(static_cast<double>(p[d])));
    }
  }
  const std::vector<double>& values() const { return max_; }
  double max() const {
    SINKLAB_CHECK(!max_.empty(), "probe::DimensionMaxAbs::max: nothing added");
    return *std::max_element(max_.begin(), max_.end());
  }
  // The k dimensions with the largest max |x|, largest first (ties: lower index first).
  std::vector<DimensionValue> top(int64_t k) const {
    SINKLAB_CHECK(!max_.empty(), "probe::DimensionMaxAbs::top: nothing added");
    std::vector<int64_t> idx(max_.size());
    std::iota(idx.begin(), idx.end(), int64_t{0});
    k = std::clamp<int64_t>(k, 0, static_cast<int64_t>(idx.size()));
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
      return max_[a] != max_[b] ? max_[a] > max_[b] : a < b;
    });
    std::vector<DimensionValue> out;
    for (int64_t i = 0; i < k; ++i) out.push_back({idx[i], max_[idx[i]]});
    return out;
  }

 private:
  std::vector<double> max_;
};

struct ResidualSinks {
  double median = 0;             // median |x| over every entry
  std::vector<int64_t> dims;     // dimensions whose median |x| over tokens is >= ratio × median
  int64_t top = -1;              // the dimension with the largest such ratio (ties: lower index)
  double top_ratio = 0;          // its median |x| over tokens / median
  std::vector<double> ratios;    // every dimension's median |x| over tokens / median
};

// x [..., D]: every leading position (batch, token) is one sample of each dimension.
template <class T>
ResidualSinks residual_sinks(const Tensor<T>& x, double ratio) {
  constexpr std::string_view fn = "probe::residual_sinks";
  SINKLAB_CHECK(x.defined() && x.rank() >= 1 && x.numel() > 0, fn, ": expected a non-empty [..., D] tensor, got ",
                x.defined() ? x.shape().str() : std::string("undefined"));
  SINKLAB_CHECK(ratio > 0, fn, ": ratio must be positive, got ", ratio);
  const int64_t D = x.size(-1), rows = x.numel() / D;
  const Tensor<T> c = x.contiguous();
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> all(static_cast<std::size_t>(c.numel())), column(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < c.numel(); ++i) all[static_cast<std::size_t>(i)] = std::abs(static_cast<double>(c.data()[i]));
  ResidualSinks out;
  out.median = median(all);
  const double floor = std::max(out.median, 1e-30);
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t r = 0; r < rows; ++r)
      column[static_cast<std::size_t>(r)] = std::abs(static_cast<double>(c.data()[r * D + d]));
    const double q = median(column) / floor;
    out.ratios.push_back(q);
    if (q >= ratio) out.dims.push_back(d);
    if (q > out.top_ratio) out.top_ratio = q, out.top = d;
  }
  return out;
}

// max |x| per dimension of one tensor [..., D], as a [D] tensor.
template <class T>
Tensor<double> max_abs_per_dim(const Tensor<T>& x) {
  DimensionMaxAbs acc;
  acc.add(x);
  const auto& v = acc.values();
  return Tensor<double>::from({static_cast<int64_t>(v.size())}, v);
}

}  // namespace sinklab::probe
