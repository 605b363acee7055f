// How a policy declares the tensors it learns.
//
// Convention (all of score::, value::, gate:: follow it):
//   - P::Params<T> is a plain struct holding the policy's learnable tensors (for example the
//     sink logits [H] of score::SoftmaxSink). Policies without parameters use NoParams<T>.
//     A policy whose tensors may live on any device declares Params<T, Device = cpu> (and
//     make_params<T, Device = cpu>) with Tensor<T, Device> members; params_t<P, T, Device>
//     picks that, and falls back to Params<T> (host tensors, for host-memory devices).
//   - Params<T>::parameters(visitor) calls visitor(name, tensor) once per tensor, with `name`
//     a string literal ("sink_logit", "theta") and `tensor` a Tensor<T>& (const& on a const
//     Params). Optimisers, checkpoints and probes walk parameters only through this.
//   - P::make_params<T>(heads) builds the initial values (the policy documents its init).
//   - Kernels return gradients as a Params<T> of the same shapes, so the value and its
//     gradient are visited in the same order.
//   - P::Args<T> is what a kernel reads: the same tensors as raw pointers (device memory on a
//     GPU), made by p.args(params); kernels never name a policy's tensors.
#pragma once
#include <cstdint>
#include <type_traits>

#include "sinklab/core/tensor.hpp"

namespace sinklab::policy {

// The kernel arguments of a policy without learnable tensors.
struct NoArgs {};

template <class T>
struct NoParams {
  template <class F>
  void parameters(F&&) {}
  template <class F>
  void parameters(F&&) const {}
};

// Params<T, Device> when the policy declares its tensors per device, otherwise Params<T>.
template <class P, class T, class Device>
auto params_of() {
  if constexpr (requires { typename P::template Params<T, Device>; })
    return typename P::template Params<T, Device>{};
  else
    return typename P::template Params<T>{};
}
template <class P, class T, class Device = cpu>
using params_t = decltype(params_of<P, T, Device>());

// A Params<T> of the same shapes, filled with zeros (gradient accumulators).
template <class P>
P zeros_like(const P& p) {
  P z = p;
  z.parameters([](const char*, auto& t) { t = std::decay_t<decltype(t)>::zeros(t.shape()); });
  return z;
}

// Number of tensors a Params<T> declares.
template <class P>
int count_parameters(const P& p) {
  int n = 0;
  p.parameters([&](const char*, const auto&) { ++n; });
  return n;
}

}  // namespace sinklab::policy
