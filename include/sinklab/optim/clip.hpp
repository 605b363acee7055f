// Gradient clipping: by the global L2 norm over a list of parameters, and per value.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"

namespace sinklab::optim {

namespace detail {

// Sum of squares in double over fixed blocks, so the result does not depend on the thread count.
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
  parallel_for(0, blocks, 8, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      double s = 0;
      for (int64_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      partial[static_cast<std::size_t>(b)] = s;
    }
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

// True when p takes part in clipping; frozen parameters are skipped before their gradient is
// looked at (it may be undefined).
template <class T>
bool clipped(const char* who, const autodiff::Parameter<T>* p) {
  SINKLAB_CHECK(p != nullptr, who, ": null parameter pointer");
  if (!p->requires_grad) return false;
  SINKLAB_CHECK(p->grad.defined() && p->grad.is_contiguous(), who, ": parameter '", p->name,
                "' needs a defined, contiguous gradient");
  return true;
}

}  // namespace detail

// L2 norm of all gradients together (parameters with requires_grad = false are left out).
template <class T>
double grad_norm(const std::vector<autodiff::Parameter<T>*>& params) {
  double s = 0;
  for (const auto* p : params)
    if (detail::clipped("optim::grad_norm", p)) s += detail::sum_of_squares(p->grad.data(), p->grad.numel());
  return std::sqrt(s);
}

// Scales all gradients by max_norm / total_norm when the total norm exceeds max_norm, so the
// clipped norm is max_norm. Returns the norm before clipping. A non-finite norm (inf or NaN
// gradients) is returned as is and the gradients are left untouched, so the caller can see it
// and skip the step; with error_if_nonfinite it throws instead.
template <class T>
double clip_grad_norm(const std::vector<autodiff::Parameter<T>*>& params, double max_norm,
                      bool error_if_nonfinite = false) {
  SINKLAB_CHECK(std::isfinite(max_norm) && max_norm > 0, "optim::clip_grad_norm: max_norm ", max_norm,
                ", expected a finite value > 0");
  const double total = grad_norm(params);
  if (!std::isfinite(total)) {
    SINKLAB_CHECK(!error_if_nonfinite, "optim::clip_grad_norm: the total gradient norm over ", params.size(),
                  " parameters is ", total, " (non-finite gradients)");
    return total;
  }
  if (total <= max_norm) return total;
  const T scale = static_cast<T>(max_norm / total);
  for (auto* p : params) {
    if (!p->requires_grad) continue;
    T* g = p->grad.data();
    parallel_for(0, p->grad.numel(), int64_t{1} << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) g[i] *= scale;
    });
  }
  return total;
}

// Clamps every gradient value to [−clip_value, clip_value]; NaNs are left as they are.
template <class T>
void clip_grad_value(const std::vector<autodiff::Parameter<T>*>& params, double clip_value) {
  SINKLAB_CHECK(std::isfinite(clip_value) && clip_value > 0, "optim::clip_grad_value: clip_value ", clip_value,
                ", expected a finite value > 0");
  const T c = static_cast<T>(clip_value);
  for (auto* p : params) {
    if (!detail::clipped("optim::clip_grad_value", p)) continue;
    T* g = p->grad.data();
    parallel_for(0, p->grad.numel(), int64_t{1} << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) g[i] = g[i] > c ? c : (g[i] < -c ? -c : g[i]);
    });
  }
}

}  // namespace sinklab::optim
