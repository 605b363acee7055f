// The elementwise pieces around the fused attention core, each with its backward:
//
//   v ──value transform──▶ v̂ ──gate on values (per key)──▶ ṽ ──core──▶ o ──gate on output──▶ y
//
// They are O(tokens·d) and touch each value or output row once, so they stay outside the
// streamed core. Gate logits are [B, heads, tokens, G] with G = 1 (per head) or d (per channel).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/value.hpp"

namespace sinklab::kernels::cpu {

using kernels::GateGrads;
using kernels::ValueTransformGrads;

namespace detail {
template <class T, HostDevice Dev>
void check_values(const char* fn, const Tensor<T, Dev>& v) {
  SINKLAB_CHECK(v.defined() && v.rank() == 4, fn, ": values must be [B, H_kv, S, d], got ",
                v.defined() ? v.shape() : Shape{});
}
// "kernel(policy) for values [B, H_kv, S, d]", where errors in a policy's parameters point.
template <class T, HostDevice Dev>
std::string value_where(const char* fn, const char* policy, const Tensor<T, Dev>& v) {
  return std::string(fn) + "(" + policy + ") for values " + v.shape().str();
}
}  // namespace detail

// ---------------------------------------------------------------- value transforms

// v̂ per (batch, kv head, key) by the policy's forward_row; the identity returns v itself.
template <class Value, class T, HostDevice Dev>
Tensor<T, Dev> value_transform_forward(const Value& value, const Tensor<T, Dev>& v_,
                                  const value::params_t<Value, T, Dev>& params = {}) {
  static_assert(value::is_policy_v<Value>, "value_transform_forward: the first argument must be a sinklab::value policy");
  constexpr const char* fn = "value_transform_forward";
  detail::check_values(fn, v_);
  if constexpr (Value::identity) {
    return v_;
  } else {
    detail::require_float<T>();
    value.check_params(params, v_.size(1), detail::value_where(fn, Value::name, v_).c_str());
    const Tensor<T, Dev> v = v_.contiguous();
    const int64_t Hkv = v.size(1), S = v.size(2), d = v.size(3);
    const auto args = value.args(params);
    Tensor<T, Dev> out = detail::output_zeros<T, Dev>(v.shape());
    parallel_for(0, v.size(0) * Hkv * S, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row)
        value.forward_row(args, (row / S) % Hkv, v.data() + row * d, out.data() + row * d, d);
    });
    return out;
  }
}

// dv by the policy's backward_row; parameter gradients summed per (batch, kv head) task, each
// with one owner, and added in a fixed order.
template <class Value, class T, HostDevice Dev>
ValueTransformGrads<T, Value, Dev> value_transform_backward(const Value& value, const Tensor<T, Dev>& v_,
                                                       const value::params_t<Value, T, Dev>& params,
                                                       const Tensor<T, Dev>& dvhat_) {
  constexpr const char* fn = "value_transform_backward";
  detail::check_values(fn, v_);
  SINKLAB_CHECK(dvhat_.shape() == v_.shape(), fn, ": gradient ", dvhat_.shape(), " must have the shape of the values ",
                v_.shape());
  if constexpr (Value::identity) {
    return {dvhat_, {}};
  } else {
    detail::require_float<T>();
    value.check_params(params, v_.size(1), detail::value_where(fn, Value::name, v_).c_str());
    const Tensor<T, Dev> v = v_.contiguous(), dvhat = dvhat_.contiguous();
    const int64_t B = v.size(0), Hkv = v.size(1), S = v.size(2), d = v.size(3);
    const auto args = value.args(params);
    ValueTransformGrads<T, Value, Dev> g;
    g.dv = detail::output_zeros<T, Dev>(v.shape());
    g.dparams = policy::zeros_like(params);
    std::vector<double> dparam(static_cast<std::size_t>(B * Hkv), 0.0);
    parallel_for(0, B * Hkv, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t bk = lo; bk < hi; ++bk) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) {
          const int64_t row = bk * S + j;
          acc += static_cast<double>(value.backward_row(args, bk % Hkv, v.data() + row * d, dvhat.data() + row * d,
                                                        g.dv.data() + row * d, d));
        }
        dparam[static_cast<std::size_t>(bk)] = acc;
      }
    });
    if constexpr (requires { value.add_param_grad(g.dparams, int64_t{0}, 0.0); })
      for (int64_t bk = 0; bk < B * Hkv; ++bk) value.add_param_grad(g.dparams, bk % Hkv, dparam[static_cast<std::size_t>(bk)]);
    return g;
  }
}

// ---------------------------------------------------------------- gates

namespace detail {
using contract::check_gate;  // shapes only: every device's gate kernels

// The gate value at logit index i: act(logit[i]), or scale[i]·act(logit[i]) + shift[i] under an
// active edit (scale and shift null without one).
template <class Gate, class T>
T gate_value(const T* logit, const T* scale, const T* shift, int64_t i) {
  const T g = Gate::activation(logit[i]);
  return scale ? scale[i] * g + shift[i] : g;
}
template <class T, class Dev>
const T* edit_scale(const Edit<T, Dev>& e) {
  return e.active() ? e.scale.data() : nullptr;
}
template <class T, class Dev>
const T* edit_shift(const Edit<T, Dev>& e) {
  return e.active() ? e.shift.data() : nullptr;
}
}  // namespace detail

// y = σ(logit) ⊙ x, the gate broadcast over the channels of a head when it is per head. An active
// edit replaces the gate values σ(logit) by scale ⊙ σ(logit) + shift (shapes of the logits).
template <class Gate, class T, HostDevice Dev>
Tensor<T, Dev> gate_forward(const Gate&, const Tensor<T, Dev>& x_, const Tensor<T, Dev>& logit_,
                            const Edit<T, Dev>& edit = {}) {
  detail::require_float<T>();
  const int64_t G = detail::check_gate<Gate>("gate_forward", x_, logit_);
  detail::check_edit("gate_forward", edit, logit_.shape());
  const Tensor<T, Dev> x = x_.contiguous(), logit = logit_.contiguous();
  const T *es = detail::edit_scale(edit), *eb = detail::edit_shift(edit);
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(3)), d = x.size(3);
  Tensor<T, Dev> y = detail::output_zeros<T, Dev>(x.shape());
  parallel_for(0, rows, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x.data() + r * d;
      T* yr = y.data() + r * d;
      if (G == 1) {
        const T g = detail::gate_value<Gate>(logit.data(), es, eb, r);
        for (int64_t c = 0; c < d; ++c) yr[c] = g * xr[c];
      } else {
        for (int64_t c = 0; c < d; ++c) yr[c] = detail::gate_value<Gate>(logit.data(), es, eb, r * G + c) * xr[c];
      }
    }
  });
  return y;
}

// dx = g ⊙ dy;  dlogit = s ⊙ σ'(logit) · Σ_(channels of the gate) x ⊙ dy, with g the (edited) gate
// values and s the edit's scale (1 without an edit).
template <class Gate, class T, HostDevice Dev>
GateGrads<T, Dev> gate_backward(const Gate&, const Tensor<T, Dev>& x_, const Tensor<T, Dev>& logit_,
                                const Tensor<T, Dev>& dy_, const Edit<T, Dev>& edit = {}) {
  detail::require_float<T>();
  const int64_t G = detail::check_gate<Gate>("gate_backward", x_, logit_);
  SINKLAB_CHECK(dy_.shape() == x_.shape(), "gate_backward: gradient ", dy_.shape(),
                " must have the shape of the gated tensor ", x_.shape());
  detail::check_edit("gate_backward", edit, logit_.shape());
  const Tensor<T, Dev> x = x_.contiguous(), logit = logit_.contiguous(), dy = dy_.contiguous();
  const T *es = detail::edit_scale(edit), *eb = detail::edit_shift(edit);
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(3)), d = x.size(3);
  GateGrads<T, Dev> g{detail::output_zeros<T, Dev>(x.shape()), detail::output_zeros<T, Dev>(logit.shape())};
  parallel_for(0, rows, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x.data() + r * d;
      const T* dyr = dy.data() + r * d;
      const T* lr = logit.data() + r * G;
      T* dxr = g.dx.data() + r * d;
      T* dlr = g.dlogit.data() + r * G;
      if (G == 1) {
        const T gv = detail::gate_value<Gate>(logit.data(), es, eb, r);
        for (int64_t c = 0; c < d; ++c) dxr[c] = gv * dyr[c];
        dlr[0] = (es ? es[r] : T(1)) * Gate::activation_grad(lr[0]) * simd::dot(xr, dyr, d);
      } else {
        for (int64_t c = 0; c < d; ++c) {
          dxr[c] = detail::gate_value<Gate>(logit.data(), es, eb, r * G + c) * dyr[c];
          dlr[c] = (es ? es[r * G + c] : T(1)) * Gate::activation_grad(lr[c]) * xr[c] * dyr[c];
        }
      }
    }
  });
  return g;
}

// What the attention recorder keeps: |x_j| per row of [B, heads, L, d] → [B, heads, L].
template <class T, HostDevice Dev>
Tensor<T, Dev> row_norms(const Tensor<T, Dev>& x_) {
  const Tensor<T, Dev> x = x_.contiguous();
  const int64_t d = x.size(3), rows = x.numel() / std::max<int64_t>(d, 1);
  Tensor<T, Dev> n = Tensor<T, Dev>::empty({x.size(0), x.size(1), x.size(2)});
  for (int64_t r = 0; r < rows; ++r) n.data()[r] = std::sqrt(simd::dot(x.data() + r * d, x.data() + r * d, d));
  return n;
}
// ... and the gate's values (edited, when the edit is active), elementwise over the logits.
template <class Gate, class T, HostDevice Dev>
Tensor<T, Dev> gate_values(const Gate&, const Tensor<T, Dev>& logit_, const Edit<T, Dev>& edit = {}) {
  const Tensor<T, Dev> logit = logit_.contiguous();
  detail::check_edit("gate_values", edit, logit.shape());
  const T *es = detail::edit_scale(edit), *eb = detail::edit_shift(edit);
  Tensor<T, Dev> s = Tensor<T, Dev>::empty(logit.shape());
  for (int64_t i = 0; i < logit.numel(); ++i) s.data()[i] = detail::gate_value<Gate>(logit.data(), es, eb, i);
  return s;
}

}  // namespace sinklab::kernels::cpu
