// Gradient clipping: by the global L2 norm over a list of parameters, and per value, on the
// parameters' device: the norm is its backend's sum_of_squares_over the list (in double, as on the CPU), the
// rescaling and clamping are policy/update.hpp's, run by its apply_update.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/backend.hpp"
#include "sinklab/policy/update.hpp"

namespace sinklab::optim {

namespace detail {

// True when p takes part in clipping; frozen parameters are skipped before their gradient is
// looked at (it may be undefined).
template <class T, class Device>
bool clipped(const char* who, const autodiff::Parameter<T, Device>* p) {
  SINKLAB_CHECK(p != nullptr, who, ": null parameter pointer");
  if (!p->requires_grad) return false;
  SINKLAB_CHECK(p->grad.defined() && p->grad.is_contiguous(), who, ": parameter '", p->name,
                "' needs a defined, contiguous gradient");
  return true;
}

}  // namespace detail

// L2 norm of all gradients together (parameters with requires_grad = false are left out), in one
// call of the backend for the whole list: a GPU brings one sum to the host, not one per parameter.
template <class T, class Device = cpu>
double grad_norm(const std::vector<autodiff::Parameter<T, Device>*>& params) {
  std::vector<const T*> grads;
  std::vector<int64_t> sizes;
  for (const auto* p : params)
    if (detail::clipped("optim::grad_norm", p)) grads.push_back(p->grad.data()), sizes.push_back(p->grad.numel());
  return std::sqrt(
      kernels::backend<Device>::sum_of_squares_over(static_cast<int64_t>(grads.size()), grads.data(), sizes.data()));
}

// Scales all gradients by max_norm / total_norm when the total norm exceeds max_norm, so the
// clipped norm is max_norm. Returns the norm before clipping. A non-finite norm (inf or NaN
// gradients) is returned as is and the gradients are left untouched, so the caller can see it
// and skip the step; with error_if_nonfinite it throws instead.
template <class T, class Device = cpu>
double clip_grad_norm(const std::vector<autodiff::Parameter<T, Device>*>& params, double max_norm,
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
  const policy::Scale<T> scale{static_cast<T>(max_norm / total)};
  for (auto* p : params)
    if (p->requires_grad) kernels::backend<Device>::apply_update(p->grad.numel(), scale, p->grad.data());
  return total;
}

// Clamps every gradient value to [−clip_value, clip_value]; NaNs are left as they are.
template <class T, class Device = cpu>
void clip_grad_value(const std::vector<autodiff::Parameter<T, Device>*>& params, double clip_value) {
  SINKLAB_CHECK(std::isfinite(clip_value) && clip_value > 0, "optim::clip_grad_value: clip_value ", clip_value,
                ", expected a finite value > 0");
  const policy::ClampValue<T> clamp{static_cast<T>(clip_value)};
  for (auto* p : params)
    if (detail::clipped("optim::clip_grad_value", p))
      kernels::backend<Device>::apply_update(p->grad.numel(), clamp, p->grad.data());
}

}  // namespace sinklab::optim
