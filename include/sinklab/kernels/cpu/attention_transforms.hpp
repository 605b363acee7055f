// The elementwise pieces around the fused attention core, each with its backward:
//
//   v ──value transform──▶ v̂ ──gate on values (per key)──▶ ṽ ──core──▶ o ──gate on output──▶ y
//
// They are O(tokens·d) and touch each value or output row once, so they stay outside the
// streamed core. Gate logits are [B, heads, tokens, G] with G = 1 (per head) or d (per channel).
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/value.hpp"

namespace sinklab::kernels::cpu {

template <class T, class ValuePolicy>
struct ValueTransformGrads {
  Tensor<T> dv;
  typename ValuePolicy::template Params<T> dparams;
};

template <class T>
struct GateGrads {
  Tensor<T> dx;      // gradient at the gated tensor's input
  Tensor<T> dlogit;  // gradient at the gate logits
};

namespace detail {
template <class T>
void check_values(const char* fn, const Tensor<T>& v) {
  SINKLAB_CHECK(v.defined() && v.rank() == 4, fn, ": values must be [B, H_kv, S, d], got ",
                v.defined() ? v.shape() : Shape{});
}
template <class T, class P>
void check_value_params(const char* fn, const Tensor<T>& v, const P& params) {
  if constexpr (requires { params.theta; }) {
    SINKLAB_CHECK(params.theta.defined() && params.theta.rank() == 1 && params.theta.size(0) == v.size(1), fn,
                  ": theta of shape ", params.theta.defined() ? params.theta.shape() : Shape{}, " must be [H_kv] = [",
                  v.size(1), "] for values ", v.shape());
  }
}
}  // namespace detail

// ---------------------------------------------------------------- value transforms

template <class T>
Tensor<T> value_transform_forward(const value::Identity&, const Tensor<T>& v, const policy::NoParams<T>& = {}) {
  detail::check_values("value_transform_forward(identity)", v);
  return v;
}
template <class T>
ValueTransformGrads<T, value::Identity> value_transform_backward(const value::Identity&, const Tensor<T>& v,
                                                                 const policy::NoParams<T>&, const Tensor<T>& dvhat) {
  SINKLAB_CHECK(dvhat.shape() == v.shape(), "value_transform_backward(identity): gradient ", dvhat.shape(),
                " must have the shape of the values ", v.shape());
  return {dvhat, {}};
}

// v̂ = φ(|v|²)·v per (batch, kv head, key).
template <class T>
Tensor<T> value_transform_forward(const value::VScale& vs, const Tensor<T>& v_,
                                  const value::VScale::Params<T>& params) {
  detail::require_float<T>();
  constexpr const char* fn = "value_transform_forward(vscale)";
  detail::check_values(fn, v_);
  detail::check_value_params(fn, v_, params);
  const Tensor<T> v = v_.contiguous(), theta = params.theta.contiguous();
  const int64_t B = v.size(0), Hkv = v.size(1), S = v.size(2), d = v.size(3);
  Tensor<T> out = detail::output_zeros<T>(v.shape());
  parallel_for(0, B * Hkv * S, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t hk = (row / S) % Hkv;
      const T C = static_cast<T>(vs.constant(d, static_cast<double>(theta.data()[hk])));
      const T* x = v.data() + row * d;
      const T r = detail::dot(x, x, d);
      const T phi = value::VScale::phi(r, C);
      T* y = out.data() + row * d;
      for (int64_t c = 0; c < d; ++c) y[c] = phi * x[c];
    }
  });
  return out;
}

// dv = φ·dv̂ + 2φ'(r)(v·dv̂)·v;  dθ_h = Σ_keys (v·dv̂)·∂φ/∂C·C.
template <class T>
ValueTransformGrads<T, value::VScale> value_transform_backward(const value::VScale& vs, const Tensor<T>& v_,
                                                               const value::VScale::Params<T>& params,
                                                               const Tensor<T>& dvhat_) {
  detail::require_float<T>();
  constexpr const char* fn = "value_transform_backward(vscale)";
  detail::check_values(fn, v_);
  detail::check_value_params(fn, v_, params);
  SINKLAB_CHECK(dvhat_.shape() == v_.shape(), fn, ": gradient ", dvhat_.shape(), " must have the shape of the values ",
                v_.shape());
  const Tensor<T> v = v_.contiguous(), dvhat = dvhat_.contiguous(), theta = params.theta.contiguous();
  const int64_t B = v.size(0), Hkv = v.size(1), S = v.size(2), d = v.size(3);
  ValueTransformGrads<T, value::VScale> g;
  g.dv = detail::output_zeros<T>(v.shape());
  g.dparams = policy::zeros_like(params);
  // One task per (batch, kv head), so each θ gradient has a single owner.
  std::vector<double> dtheta(static_cast<std::size_t>(B * Hkv), 0.0);
  parallel_for(0, B * Hkv, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bk = lo; bk < hi; ++bk) {
      const int64_t hk = bk % Hkv;
      const T C = static_cast<T>(vs.constant(d, static_cast<double>(theta.data()[hk])));
      double acc = 0;
      for (int64_t j = 0; j < S; ++j) {
        const int64_t row = bk * S + j;
        const T* x = v.data() + row * d;
        const T* gy = dvhat.data() + row * d;
        const T r = detail::dot(x, x, d);
        const T vg = detail::dot(x, gy, d);
        const T phi = value::VScale::phi(r, C);
        const T two_dphi_vg = T(2) * value::VScale::dphi_dr(r, C) * vg;
        T* gx = g.dv.data() + row * d;
        for (int64_t c = 0; c < d; ++c) gx[c] = phi * gy[c] + two_dphi_vg * x[c];
        acc += static_cast<double>(vg * value::VScale::dphi_dC(r, C) * C);
      }
      dtheta[static_cast<std::size_t>(bk)] = acc;
    }
  });
  T* dth = g.dparams.theta.data();
  for (int64_t bk = 0; bk < B * Hkv; ++bk) dth[bk % Hkv] += static_cast<T>(dtheta[static_cast<std::size_t>(bk)]);
  return g;
}

// ---------------------------------------------------------------- gates

namespace detail {
template <class Gate, class T>
int64_t check_gate(const char* fn, const Tensor<T>& x, const Tensor<T>& logit) {
  static_assert(gate::is_policy_v<Gate>,
                "gate_forward/gate_backward: the first argument must be a sinklab::gate policy");
  static_assert(Gate::enabled, "gate_forward/gate_backward: gate::None has no gate to apply");
  SINKLAB_CHECK(x.defined() && x.rank() == 4, fn, ": gated tensor must be [B, heads, tokens, d], got ",
                x.defined() ? x.shape() : Shape{});
  const int64_t G = Gate::channels(x.size(3));
  const Shape want{x.size(0), x.size(1), x.size(2), G};
  SINKLAB_CHECK(logit.defined() && logit.shape() == want, fn, ": gate logits of shape ",
                logit.defined() ? logit.shape() : Shape{}, " must be ", want, " for the tensor ", x.shape(), " (",
                Gate::granularity == gate::Granularity::PerHead ? "per head" : "per channel", ")");
  return G;
}
}  // namespace detail

// y = σ(logit) ⊙ x, the gate broadcast over the channels of a head when it is per head.
template <class Gate, class T>
Tensor<T> gate_forward(const Gate&, const Tensor<T>& x_, const Tensor<T>& logit_) {
  detail::require_float<T>();
  const int64_t G = detail::check_gate<Gate>("gate_forward", x_, logit_);
  const Tensor<T> x = x_.contiguous(), logit = logit_.contiguous();
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(3)), d = x.size(3);
  Tensor<T> y = detail::output_zeros<T>(x.shape());
  parallel_for(0, rows, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x.data() + r * d;
      const T* lr = logit.data() + r * G;
      T* yr = y.data() + r * d;
      if (G == 1) {
        const T g = Gate::activation(lr[0]);
        for (int64_t c = 0; c < d; ++c) yr[c] = g * xr[c];
      } else {
        for (int64_t c = 0; c < d; ++c) yr[c] = Gate::activation(lr[c]) * xr[c];
      }
    }
  });
  return y;
}

// dx = σ(logit) ⊙ dy;  dlogit = σ'(logit) · Σ_(channels of the gate) x ⊙ dy.
template <class Gate, class T>
GateGrads<T> gate_backward(const Gate&, const Tensor<T>& x_, const Tensor<T>& logit_, const Tensor<T>& dy_) {
  detail::require_float<T>();
  const int64_t G = detail::check_gate<Gate>("gate_backward", x_, logit_);
  SINKLAB_CHECK(dy_.shape() == x_.shape(), "gate_backward: gradient ", dy_.shape(),
                " must have the shape of the gated tensor ", x_.shape());
  const Tensor<T> x = x_.contiguous(), logit = logit_.contiguous(), dy = dy_.contiguous();
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(3)), d = x.size(3);
  GateGrads<T> g{detail::output_zeros<T>(x.shape()), detail::output_zeros<T>(logit.shape())};
  parallel_for(0, rows, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x.data() + r * d;
      const T* dyr = dy.data() + r * d;
      const T* lr = logit.data() + r * G;
      T* dxr = g.dx.data() + r * d;
      T* dlr = g.dlogit.data() + r * G;
      if (G == 1) {
        const T gv = Gate::activation(lr[0]);
        for (int64_t c = 0; c < d; ++c) dxr[c] = gv * dyr[c];
        dlr[0] = Gate::activation_grad(lr[0]) * detail::dot(xr, dyr, d);
      } else {
        for (int64_t c = 0; c < d; ++c) {
          dxr[c] = Gate::activation(lr[c]) * dyr[c];
          dlr[c] = Gate::activation_grad(lr[c]) * xr[c] * dyr[c];
        }
      }
    }
  });
  return g;
}

}  // namespace sinklab::kernels::cpu
