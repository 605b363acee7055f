// value:: — a transform applied to each value vector before aggregation (per key, per kv head).
// It is elementwise over the keys, O(S·d), so kernels apply it around the fused attention core
// (kernels/cpu/attention_transforms.hpp) rather than inside it.
//
// What a kernel asks of a value policy (the Policy concept below):
//   identity (true: v̂ = v, nothing runs), name, Params<T>, make_params<T>(kv_heads),
//   check_params(p, kv_heads, where), args(p) → Args<T> (raw pointers to the learnable tensors),
//   forward_row(args, kv_head, v, v̂, d)                 v̂ of one value row of d elements
//   backward_row(args, kv_head, v, dv̂, dv, d) → g      dv of that row; g its part of ∂L/∂θ_kv_head
//   add_param_grad(grads, kv_head, g)                   (policies with per-head parameters)
// Row functions are SINKLAB_HD: the CPU loops and a CUDA kernel call the same code.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/policy/params.hpp"

namespace sinklab::value {

struct Identity {
  static constexpr bool identity = true;
  static constexpr const char* name = "identity";
  template <class T>
  using Params = policy::NoParams<T>;
  template <class T>
  using Args = policy::NoArgs;
  template <class T>
  Params<T> make_params(int64_t /*kv_heads*/) const {
    return {};
  }
  template <class T>
  Args<T> args(const Params<T>&) const {
    return {};
  }
  template <class T>
  void check_params(const Params<T>&, int64_t, const char*) const {}
};

// V-scale (gradient-sinks paper): v̂ = φ(r)·v, φ(r) = r/(r + C), r = |v|², with
// C = (d_head·c_scale)²·e^θ, c_scale = 0.02 and one learnable θ per kv head (init 0).
// Jacobian ∂v̂/∂v = φ(r)·I + 2·φ'(r)·v vᵀ, φ'(r) = C/(r + C)²; ∂φ/∂θ = −r·C/(r + C)².
// θ lives per key/value head (the transform acts on v, which has H_kv heads under GQA).
struct VScale {
  static constexpr bool identity = false;
  static constexpr const char* name = "vscale";
  double c_scale = 0.02;
  double init_theta = 0.0;

  template <class T, class Device = cpu>
  struct Params {
    Tensor<T, Device> theta;  // [H_kv]
    template <class F>
    void parameters(F&& f) {
      f("theta", theta);
    }
    template <class F>
    void parameters(F&& f) const {
      f("theta", theta);
    }
  };
  template <class T>
  struct Args {
    const T* theta = nullptr;  // [H_kv]
  };
  template <class T, class Device = cpu>
  Params<T, Device> make_params(int64_t kv_heads) const {
    return {Tensor<T, Device>::full({kv_heads}, static_cast<T>(init_theta))};
  }
  template <class T, class Device>
  Args<T> args(const Params<T, Device>& p) const {
    return {p.theta.data()};
  }
  template <class T, class Device>
  void check_params(const Params<T, Device>& p, int64_t kv_heads, const char* where) const {
    SINKLAB_CHECK(p.theta.defined() && p.theta.rank() == 1 && p.theta.size(0) == kv_heads && p.theta.is_contiguous(),
                  where, ": theta of shape ", p.theta.defined() ? p.theta.shape() : Shape{},
                  " must be a contiguous [H_kv] = [", kv_heads, "]");
  }

  // v̂ = φ(|v|²)·v.
  template <class T>
  SINKLAB_HD void forward_row(const Args<T>& a, int64_t hk, const T* v, T* out, int64_t d) const {
    const T C = static_cast<T>(constant(d, static_cast<double>(a.theta[hk])));
    T r = 0;
    for (int64_t c = 0; c < d; ++c) r += v[c] * v[c];
    const T p = phi(r, C);
    for (int64_t c = 0; c < d; ++c) out[c] = p * v[c];
  }
  // dv = φ·dv̂ + 2φ'(r)(v·dv̂)·v; returns this row's (v·dv̂)·∂φ/∂C·C = its part of ∂L/∂θ.
  template <class T>
  SINKLAB_HD T backward_row(const Args<T>& a, int64_t hk, const T* v, const T* dvhat, T* dv, int64_t d) const {
    const T C = static_cast<T>(constant(d, static_cast<double>(a.theta[hk])));
    T r = 0, vg = 0;
    for (int64_t c = 0; c < d; ++c) {
      r += v[c] * v[c];
      vg += v[c] * dvhat[c];
    }
    const T p = phi(r, C), two_dphi_vg = T(2) * dphi_dr(r, C) * vg;
    for (int64_t c = 0; c < d; ++c) dv[c] = p * dvhat[c] + two_dphi_vg * v[c];
    return vg * dphi_dC(r, C) * C;
  }
  template <class T, HostDevice Device>
  void add_param_grad(Params<T, Device>& grads, int64_t hk, double g) const {
    grads.theta.data()[hk] += static_cast<T>(g);
  }

  // C for a head with log-offset θ.
  SINKLAB_HD double constant(int64_t d_head, double theta) const {
    using std::exp;
    const double base = static_cast<double>(d_head) * c_scale;
    return base * base * exp(theta);
  }
  template <class V>
  SINKLAB_HD static V phi(V r, V C) {
    return r / (r + C);
  }
  template <class V>
  SINKLAB_HD static V dphi_dr(V r, V C) {
    const V s = r + C;
    return C / (s * s);
  }
  template <class V>
  SINKLAB_HD static V dphi_dC(V r, V C) {
    const V s = r + C;
    return -r / (s * s);
  }
};

template <class P>
concept Policy = requires(const P& v, const typename P::template Params<double>& p) {
  { P::identity } -> std::convertible_to<bool>;
  { P::name } -> std::convertible_to<const char*>;
  { v.template make_params<double>(int64_t{1}) } -> std::same_as<typename P::template Params<double>>;
  v.args(p);
  v.check_params(p, int64_t{1}, "");
} && (P::identity || requires(const P& v, const typename P::template Args<double>& a, typename P::template Params<double>& g,
                              const double* x, double* y) {
  v.forward_row(a, int64_t{0}, x, y, int64_t{1});
  { v.backward_row(a, int64_t{0}, x, x, y, int64_t{1}) } -> std::convertible_to<double>;
  v.add_param_grad(g, int64_t{0}, 0.0);
});

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

template <class P, class T, class Device = cpu>
using params_t = policy::params_t<P, T, Device>;

}  // namespace sinklab::value
