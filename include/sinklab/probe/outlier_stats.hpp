// Activation-outlier statistics of Bondarenko et al. 2023 ("Quantizable transformers"), the
// source of VGA's "Max I+O inf norm" and "Avg. kurtosis":
//
//   per module output and per sample (the output of one sequence, flattened):
//     inf-norm  = max |x|
//     kurtosis  = mean((x − μ)⁴) / (σ⁴ + 1e-6),  μ, σ² the mean and population variance of x
//   per module: max and mean of the inf-norm over samples, mean kurtosis over samples
//   model:      "Max inf norm" = max over modules of the mean inf-norm
//               "Avg kurtosis" = mean over modules of the mean kurtosis
//
// OutlierAccumulator::add(name, output) takes a module output whose axis 0 is the sample (batch)
// axis; every output[b] is one flattened sample. Modules are reported in the order first seen.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

inline constexpr double kKurtosisEps = 1e-6;

// Kurtosis of n values in Bondarenko et al.'s form (Gaussian ≈ 3), two passes in double.
template <class T>
double kurtosis(const T* x, int64_t n) {
  SINKLAB_CHECK(n > 0, "probe::kurtosis: no values");
  double mu = 0;
  for (int64_t i = 0; i < n; ++i) mu += static_cast<double>(x[i]);
  mu /= static_cast<double>(n);
  double m2 = 0, m4 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mu, d2 = d * d;
    m2 += d2;
    m4 += d2 * d2;
  }
  m2 /= static_cast<double>(n);
  m4 /= static_cast<double>(n);
  return m4 / (m2 * m2 + kKurtosisEps);
}

// Kurtosis of a whole tensor, flattened.
template <class T>
double kurtosis(const Tensor<T>& x) {
  detail::require_nonempty("probe::kurtosis", "input", x);
  const Tensor<T> c = x.contiguous();
  return kurtosis(c.data(), c.numel());
}

template <class T>
double inf_norm(const T* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(x[i])));
  return m;
}

// max |x| of a whole tensor.
template <class T>
double inf_norm(const Tensor<T>& x) {
  detail::require_nonempty("probe::inf_norm", "input", x);
  const Tensor<T> c = x.contiguous();
  return inf_norm(c.data(), c.numel());
}

struct ModuleOutlierStats {
  std::string name;
  int64_t samples = 0;
  double max_inf_norm = 0;   // max over samples
  double mean_inf_norm = 0;  // mean over samples
  double mean_kurtosis = 0;  // mean over samples
};

class OutlierAccumulator {
 public:
  template <class T>
  void add(const std::string& module, const Tensor<T>& output) {
    constexpr std::string_view fn = "probe::OutlierAccumulator::add";
    SINKLAB_CHECK(output.defined() && output.rank() >= 1, fn, ": output of module '", module,
                  "' must have a leading sample axis, got shape ",
                  output.defined() ? output.shape().str() : std::string("undefined"));
    const int64_t B = output.size(0);
    SINKLAB_CHECK(B > 0 && output.numel() > 0, fn, ": output of module '", module, "' is empty (shape ",
                  output.shape(), ")");
    const int64_t n = output.numel() / B;
    const Tensor<T> c = output.contiguous();
    Entry& e = entry(module);
    for (int64_t b = 0; b < B; ++b) {
      const T* x = c.data() + b * n;
      const double inf = inf_norm(x, n);
      e.samples += 1;
      e.max_inf = std::max(e.max_inf, inf);
      e.sum_inf += inf;
      e.sum_kurt += kurtosis(x, n);
    }
  }

  std::vector<ModuleOutlierStats> modules() const {
    std::vector<ModuleOutlierStats> out;
    for (const Entry& e : entries_) {
      const double n = static_cast<double>(e.samples);
      out.push_back({e.name, e.samples, e.max_inf, e.sum_inf / n, e.sum_kurt / n});
    }
    return out;
  }
  // max over modules of the mean inf-norm over samples
  double max_inf_norm() const {
    require_some("max_inf_norm");
    double m = 0;
    for (const auto& s : modules()) m = std::max(m, s.mean_inf_norm);
    return m;
  }
  // mean over modules of the mean kurtosis over samples
  double avg_kurtosis() const {
    require_some("avg_kurtosis");
    double sum = 0;
    for (const auto& s : modules()) sum += s.mean_kurtosis;
    return sum / static_cast<double>(entries_.size());
  }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    std::string name;
    int64_t samples = 0;
    double max_inf = 0, sum_inf = 0, sum_kurt = 0;
  };
  Entry& entry(const std::string& name) {
    for (Entry& e : entries_)
      if (e.name == name) return e;
    entries_.push_back(Entry{name});
    return entries_.back();
  }
  void require_some(const char* what) const {
    SINKLAB_CHECK(!entries_.empty(), "probe::OutlierAccumulator::", what, ": no module output was added");
  }
  std::vector<Entry> entries_;
};

}  // namespace sinklab::probe
