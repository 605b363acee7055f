// What the CUDA backend runs around the attention core, as the CPU does
// (kernels/cpu/attention_transforms.hpp): a value transform before aggregation (value::VScale)
// and a sigmoid gate on the values or on the output, forward and backward, written against a
// SIMT context (kernels/simt.hpp) from the same value:: and gate:: policies (the row and gate
// math is the policies' SINKLAB_HD code).
//
// Tensors are [B, heads, L, d] rows: a thread per row (grid-stride over all the grid's threads),
// so each output, and each row's contribution to a parameter gradient, has one owner; the
// per-head parameter gradients are summed by a second kernel in row order (deterministic).
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/value.hpp"

namespace sinklab::kernels::cuda {

namespace detail {
template <class Ctx, class F>
SINKLAB_HD void for_each_row(Ctx& ctx, int64_t rows, F&& f) {
  for (int64_t r = ctx.block() * ctx.threads() + ctx.thread(); r < rows; r += ctx.blocks() * ctx.threads()) f(r);
}
}  // namespace detail

// v̂ [rows = B·H_kv·S, d] from v by the policy's forward_row (kv head (row / S) mod H_kv).
template <class Ctx, class Value, class T>
SINKLAB_HD void value_transform_forward(Ctx& ctx, const Value& value, const typename Value::template Args<T>& args,
                                        const T* v, T* vhat, int64_t rows, int64_t S, int64_t Hkv, int64_t d) {
  detail::for_each_row(ctx, rows, [&](int64_t r) { value.forward_row(args, (r / S) % Hkv, v + r * d, vhat + r * d, d); });
}

// dv [rows, d] by the policy's backward_row; row_grad [rows] receives each row's term of ∂L/∂θ.
template <class Ctx, class Value, class T>
SINKLAB_HD void value_transform_backward(Ctx& ctx, const Value& value, const typename Value::template Args<T>& args,
                                         const T* v, const T* dvhat, T* dv, T* row_grad, int64_t rows, int64_t S,
                                         int64_t Hkv, int64_t d) {
  detail::for_each_row(ctx, rows, [&](int64_t r) {
    row_grad[r] = static_cast<T>(value.backward_row(args, (r / S) % Hkv, v + r * d, dvhat + r * d, dv + r * d, d));
  });
}

// dtheta [H_kv] += Σ over batch and key (in that order) of row_grad [B, H_kv, S]; a thread per head.
template <class Ctx, class T>
SINKLAB_HD void value_transform_params(Ctx& ctx, const T* row_grad, T* dtheta, int64_t B, int64_t Hkv, int64_t S) {
  detail::for_each_row(ctx, Hkv, [&](int64_t hk) {
    T s = T(0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S; ++j) s += row_grad[(b * Hkv + hk) * S + j];
    dtheta[hk] += s;
  });
}

// y = act(logit) ⊙ x over rows of d; logits [rows, G] with G = Gate::channels(d) (1: per head).
template <class Ctx, class Gate, class T>
SINKLAB_HD void gate_forward(Ctx& ctx, const Gate&, const T* x, const T* logit, T* y, int64_t rows, int64_t d) {
  const int64_t G = Gate::channels(d);
  detail::for_each_row(ctx, rows, [&](int64_t r) {
    for (int64_t c = 0; c < d; ++c) y[r * d + c] = Gate::activation(logit[r * G + (G == 1 ? 0 : c)]) * x[r * d + c];
  });
}

// dx = act(logit) ⊙ dy;  dlogit = act'(logit) · Σ_(the gate's channels) x ⊙ dy.
template <class Ctx, class Gate, class T>
SINKLAB_HD void gate_backward(Ctx& ctx, const Gate&, const T* x, const T* logit, const T* dy, T* dx, T* dlogit,
                              int64_t rows, int64_t d) {
  const int64_t G = Gate::channels(d);
  detail::for_each_row(ctx, rows, [&](int64_t r) {
    T sum = T(0);
    for (int64_t c = 0; c < d; ++c) {
      const T l = logit[r * G + (G == 1 ? 0 : c)];
      dx[r * d + c] = Gate::activation(l) * dy[r * d + c];
      if (G == 1) sum += x[r * d + c] * dy[r * d + c];
      else dlogit[r * G + c] = Gate::activation_grad(l) * x[r * d + c] * dy[r * d + c];
    }
    if (G == 1) dlogit[r] = Gate::activation_grad(logit[r]) * sum;
  });
}

}  // namespace sinklab::kernels::cuda
