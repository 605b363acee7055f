// value:: — a transform applied to each value vector before aggregation (per key, per kv head).
// It is elementwise over the keys, O(S·d), so kernels apply it around the fused attention core
// (kernels/cpu/attention_transforms.hpp) rather than inside it.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/policy/params.hpp"

namespace sinklab::value {

struct Identity {
  static constexpr bool identity = true;
  static constexpr const char* name = "identity";
  template <class T>
  using Params = policy::NoParams<T>;
  template <class T>
  Params<T> make_params(int64_t /*kv_heads*/) const {
    return {};
  }
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

  template <class T>
  struct Params {
    Tensor<T> theta;  // [H_kv]
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
  Params<T> make_params(int64_t kv_heads) const {
    return {Tensor<T>::full({kv_heads}, static_cast<T>(init_theta))};
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
inline constexpr bool is_policy_v = std::is_same_v<P, Identity> || std::is_same_v<P, VScale>;

}  // namespace sinklab::value
