// The attention kernels of kernels::backend<cuda>, with kernels::cpu's signatures: the fused core
// (attention.cuh's launchers), the value transform and the gates around it
// (kernels/cuda/attention_transforms.hpp), on Tensor<T, cuda>.
//
// The shape and parameter checks and the result types are every device's
// (kernels/attention_contract.hpp), so a bad call fails with the same message on either device. Strided inputs (the heads of
// a projection read in place) are gathered into dense rows first: the device kernels take
// [B, heads, L, d] rows at stride d. What stays on the CPU: the materialised reference kernel
// and the recorder's statistics (probes), and interventions (edits) on the gate — each refused
// here with a message that says so.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "sinklab/core/tensor.hpp"
#include "sinklab/cuda/attention.cuh"
#include "sinklab/cuda/attention_mma.cuh"
#include "sinklab/cuda/gemm.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/attention_contract.hpp"
#include "sinklab/kernels/cuda/attention_transforms.hpp"

namespace sinklab::kernels::cuda::host {

template <class T>
using DeviceTensor = Tensor<T, sinklab::cuda>;
template <class T>
using AttentionForward = kernels::AttentionForward<T, sinklab::cuda>;

// The block shape of the fused kernels for head size d: 128 threads (a query or key row each) and
// 32-key tiles, the fastest on an H100 at d_head 64 (docs/results/cuda-attention.md), where the
// device's shared memory holds both passes' tiles and rows; else fewer threads, then smaller tiles
// (an A100 takes float d = 64 at 64 threads; d = 128 at 32).
template <class T>
AttentionLaunch attention_launch(int64_t d) {
  int dev = 0, most = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  auto bytes = [d](int threads, int64_t block_k) {
    const std::size_t f = kernels::cuda::attention_forward_shared_bytes<T>(threads, block_k, d);
    const std::size_t b = kernels::cuda::attention_backward_shared_bytes<T>(threads, block_k, d);
    return f > b ? f : b;
  };
  for (int threads : {128, 64, 32})
    for (int64_t block_k : {32, 16, 8})
      if (bytes(threads, block_k) <= static_cast<std::size_t>(most)) return {threads, block_k, nullptr};
  ::sinklab::detail::fail("attention (cuda): head size ", d, " needs ", bytes(32, 8),
                          " bytes of shared memory even at 32 threads and 8-key tiles; the device allows ", most,
                          " per block");
}

namespace detail {

// Whether a float attention takes the tensor-core kernels (attention_mma.cuh): precision bf16
// (the tape's autocast), head size 32, 64 or 128, and a GPU of sm_80 or later.
template <class T>
bool use_mma(const kernels::AttentionOptions& opt, int64_t d) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (opt.precision != kernels::Precision::bf16 || !attention_mma_supports(d)) return false;
    int dev = 0, major = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
    return major >= 8;
  }
}
// A dense float tensor's bf16 codes, in the bf16 GEMM's scratch (gemm.cuh).
inline std::shared_ptr<uint16_t[]> bf16_codes(const DeviceTensor<float>& x) {
  return bf16_copy(x.data(), 1, 1, x.numel(), x.numel(), x.numel());
}

inline DeviceTensor<int64_t> kv_lengths_on_device(const kernels::AttentionOptions& opt) {
  if (!opt.kv_lengths.defined()) return {};
  return DeviceTensor<int64_t>::from(opt.kv_lengths.shape(), opt.kv_lengths.to_vector());
}

inline kernels::cuda::AttentionShape attention_shape(const kernels::AttentionDims& dm,
                                                     const kernels::AttentionOptions& opt,
                                                     const DeviceTensor<int64_t>& kv_lengths) {
  kernels::cuda::AttentionShape sh;
  sh.B = dm.B, sh.H = dm.H, sh.Hkv = dm.Hkv, sh.T = dm.T, sh.S = dm.S, sh.d = dm.d;
  sh.scale = kernels::contract::score_scale(opt, dm.d);
  sh.kv_lengths = kv_lengths.defined() ? kv_lengths.data() : nullptr;
  return sh;
}

// The one tensor of a policy's parameters that a row-parameter kernel accumulates into (a sink's
// logits [H], V-scale's θ [H_kv]).
template <class T, class Params>
T* single_parameter(Params& p, const char* what) {
  T* out = nullptr;
  int n = 0;
  p.parameters([&](const char*, DeviceTensor<T>& t) { out = t.data(), ++n; });
  SINKLAB_CHECK(n == 1, what, ": the CUDA backend accumulates one parameter tensor, the policy has ", n);
  return out;
}

template <class T>
void refuse_edit(const kernels::Edit<T, sinklab::cuda>& e, const char* fn) {
  SINKLAB_CHECK(!e.active(), fn, ": interventions on the gate (edits) run on the cpu device; the CUDA backend has none");
}

inline int blocks_for_rows(int64_t rows, int threads) {
  const int64_t b = (rows + threads - 1) / threads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class Value, class T>
__global__ void value_forward_kernel(Value value, typename Value::template Args<T> args, const T* v, T* vhat,
                                     int64_t rows, int64_t S, int64_t Hkv, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::value_transform_forward(ctx, value, args, v, vhat, rows, S, Hkv, d);
}
template <class Value, class T>
__global__ void value_backward_kernel(Value value, typename Value::template Args<T> args, const T* v, const T* dvhat,
                                      T* dv, T* row_grad, int64_t rows, int64_t S, int64_t Hkv, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::value_transform_backward(ctx, value, args, v, dvhat, dv, row_grad, rows, S, Hkv, d);
}
template <class T>
__global__ void value_params_kernel(const T* row_grad, T* dtheta, int64_t B, int64_t Hkv, int64_t S) {
  simt::Cuda ctx;
  kernels::cuda::value_transform_params(ctx, row_grad, dtheta, B, Hkv, S);
}
template <class Gate, class T>
__global__ void gate_forward_kernel(Gate gate, const T* x, const T* logit, T* y, int64_t rows, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::gate_forward(ctx, gate, x, logit, y, rows, d);
}
template <class Gate, class T>
__global__ void gate_backward_kernel(Gate gate, const T* x, const T* logit, const T* dy, T* dx, T* dlogit,
                                     int64_t rows, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::gate_backward(ctx, gate, x, logit, dy, dx, dlogit, rows, d);
}

}  // namespace detail

// The fused forward: out [B, H, T, d] (into `out_into`, a view of that shape, when given) and the
// row lse for the softmax family.
template <class Score, class Mask, class T>
AttentionForward<T> attention_fused_forward(const Score& score, const Mask&, const DeviceTensor<T>& q_,
                                            const DeviceTensor<T>& k_, const DeviceTensor<T>& v_,
                                            const score::params_t<Score, T, sinklab::cuda>& params,
                                            const kernels::AttentionOptions& opt = {},
                                            const DeviceTensor<T>& out_into = {}) {
  static_assert(score::is_policy_v<Score>, "attention_fused_forward: Score must be a sinklab::score policy");
  static_assert(mask::is_policy_v<Mask>, "attention_fused_forward: Mask must be a sinklab::mask policy");
  constexpr const char* kernel = "attention_fused_forward (cuda)";
  const kernels::AttentionDims dm = kernels::contract::check_shapes(kernel, q_, k_, v_, opt);
  kernels::contract::check_score_params<T, Score, sinklab::cuda>(kernel, score, params, dm);
  const DeviceTensor<T> q = q_.contiguous(), k = k_.contiguous(), v = v_.contiguous();
  const DeviceTensor<int64_t> kv = detail::kv_lengths_on_device(opt);
  AttentionForward<T> res;
  const bool dense_into = out_into.defined() && out_into.is_contiguous();
  if (out_into.defined())
    kernels::contract::check_output_view(kernel, "out", out_into, {dm.B, dm.H, dm.T, dm.d}, {&q_, &k_, &v_});
  // Every element of out is written (a row that sees no key gets zeros), so it starts empty.
  DeviceTensor<T> out = dense_into ? out_into : DeviceTensor<T>::empty({dm.B, dm.H, dm.T, dm.d});
  if constexpr (score::saves_lse_v<Score>) res.lse = DeviceTensor<T>::empty({dm.B, dm.H, dm.T});
  const bool mma = detail::use_mma<T>(opt, dm.d);
  if constexpr (std::is_same_v<T, float>) {
    if (mma) {  // bf16 operands on the tensor cores, float results
      const auto q16 = detail::bf16_codes(q), k16 = detail::bf16_codes(k), v16 = detail::bf16_codes(v);
      attention_mma_forward<simt::Bf16, Score, Mask>(score, score.args(params), q16.get(), k16.get(), v16.get(),
                                                     out.data(), res.lse.defined() ? res.lse.data() : nullptr,
                                                     detail::attention_shape(dm, opt, kv));
    }
  }
  if (!mma)
    attention_forward<Score, Mask, T>(score, score.args(params), q.data(), k.data(), v.data(), out.data(),
                                      res.lse.defined() ? res.lse.data() : nullptr,
                                      detail::attention_shape(dm, opt, kv), attention_launch<T>(dm.d));
  if (out_into.defined() && !dense_into) {
    DeviceTensor<T> view = out_into;
    view.copy_from(out);
    res.out = out_into;
  } else {
    res.out = out;
  }
  return res;
}

// dq, dk, dv and the score's parameter gradients from the forward's saved out and lse.
template <class Score, class Mask, class T>
kernels::AttentionGrads<T, Score, sinklab::cuda> attention_fused_backward(
    const Score& score, const Mask&, const DeviceTensor<T>& q_, const DeviceTensor<T>& k_, const DeviceTensor<T>& v_,
    const score::params_t<Score, T, sinklab::cuda>& params, const AttentionForward<T>& fwd,
    const DeviceTensor<T>& dout_, const kernels::AttentionOptions& opt = {}) {
  constexpr const char* kernel = "attention_fused_backward (cuda)";
  const kernels::AttentionDims dm = kernels::contract::check_shapes(kernel, q_, k_, v_, opt);
  kernels::contract::check_score_params<T, Score, sinklab::cuda>(kernel, score, params, dm);
  constexpr bool saved_lse = score::saves_lse_v<Score>;
  constexpr bool needs_D = score::row_grad_t<Score, T>::delta != score::Delta::None;
  static_assert(Score::has_sink || !score::HasRowParamGrad<Score, T>,
                "attention_fused_backward (cuda): the CUDA kernels sum row parameter gradients for a sink "
                "(has_sink) only; this score's would be lost");
  kernels::contract::check_saved(kernel, q_, dout_, fwd, dm, saved_lse);
  const DeviceTensor<T> q = q_.contiguous(), k = k_.contiguous(), v = v_.contiguous(), dout = dout_.contiguous(),
                        out = fwd.out.contiguous();
  const DeviceTensor<int64_t> kv = detail::kv_lengths_on_device(opt);
  kernels::AttentionGrads<T, Score, sinklab::cuda> g;
  g.dq = DeviceTensor<T>::empty(q.shape());
  g.dk = DeviceTensor<T>::empty(k.shape());
  g.dv = DeviceTensor<T>::empty(v.shape());
  g.dscore = policy::zeros_like(params);
  DeviceTensor<T> D, row_grad;
  if constexpr (needs_D) D = DeviceTensor<T>::empty({dm.B, dm.H, dm.T});
  T* dparam = nullptr;
  if constexpr (Score::has_sink) {
    row_grad = DeviceTensor<T>::empty({dm.B, dm.H, dm.T});
    dparam = detail::single_parameter<T>(g.dscore, kernel);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (detail::use_mma<T>(opt, dm.d)) {
      const auto q16 = detail::bf16_codes(q), k16 = detail::bf16_codes(k), v16 = detail::bf16_codes(v),
                 do16 = detail::bf16_codes(dout);
      attention_mma_backward<simt::Bf16, Score, Mask>(
          score, score.args(params), q16.get(), k16.get(), v16.get(), out.data(), saved_lse ? fwd.lse.data() : nullptr,
          do16.get(), g.dq.data(), g.dk.data(), g.dv.data(), dparam, D.defined() ? D.data() : nullptr,
          row_grad.defined() ? row_grad.data() : nullptr, detail::attention_shape(dm, opt, kv));
      return g;
    }
  }
  attention_backward<Score, Mask, T>(score, score.args(params), q.data(), k.data(), v.data(), out.data(),
                                     saved_lse ? fwd.lse.data() : nullptr, dout.data(), g.dq.data(), g.dk.data(),
                                     g.dv.data(), dparam, D.defined() ? D.data() : nullptr,
                                     row_grad.defined() ? row_grad.data() : nullptr,
                                     detail::attention_shape(dm, opt, kv), attention_launch<T>(dm.d));
  return g;
}

// The materialised kernel keeps every weight for the probes; they read it on the cpu device.
// (Declared with the CPU's result types so that the ops compile for cuda; a call fails.)
template <class Score, class Mask, class T, class... Rest>
AttentionForward<T> attention_reference_forward(const Score&, const Mask&, const DeviceTensor<T>&,
                                                const DeviceTensor<T>&, const DeviceTensor<T>&, Rest&&...) {
  ::sinklab::detail::fail("attention_reference_forward: the materialised attention (an attention recorder, or "
                          "interventions) runs on the cpu device; the CUDA backend has the fused kernels only. Probe a "
                          "copy of the model on the cpu");
}
template <class Score, class Mask, class T, class... Rest>
kernels::AttentionGrads<T, Score, sinklab::cuda> attention_reference_backward(const Score&, const Mask&,
                                                                                   const DeviceTensor<T>&, Rest&&...) {
  ::sinklab::detail::fail("attention_reference_backward: the materialised attention runs on the cpu device only");
}
template <class T>
DeviceTensor<T> row_norms(const DeviceTensor<T>&) {
  ::sinklab::detail::fail("row_norms: the attention recorder's statistics run on the cpu device only");
}
template <class Gate, class T>
DeviceTensor<T> gate_values(const Gate&, const DeviceTensor<T>&, const kernels::Edit<T, sinklab::cuda>& = {}) {
  ::sinklab::detail::fail("gate_values: the attention recorder's statistics run on the cpu device only");
}

// v̂ by the policy's forward_row; the identity returns v itself.
template <class Value, class T>
DeviceTensor<T> value_transform_forward(const Value& value, const DeviceTensor<T>& v_,
                                        const value::params_t<Value, T, sinklab::cuda>& params = {}) {
  static_assert(value::is_policy_v<Value>, "value_transform_forward: the first argument must be a sinklab::value policy");
  constexpr const char* fn = "value_transform_forward (cuda)";
  SINKLAB_CHECK(v_.defined() && v_.rank() == 4, fn, ": values must be [B, H_kv, S, d], got ",
                v_.defined() ? v_.shape() : Shape{});
  if constexpr (Value::identity) {
    return v_;
  } else {
    value.check_params(params, v_.size(1), (std::string(fn) + "(" + Value::name + ") for values " + v_.shape().str()).c_str());
    const DeviceTensor<T> v = v_.contiguous();
    const int64_t Hkv = v.size(1), S = v.size(2), d = v.size(3), rows = v.numel() / std::max<int64_t>(d, 1);
    DeviceTensor<T> out = DeviceTensor<T>::empty(v.shape());
    detail::value_forward_kernel<Value, T><<<detail::blocks_for_rows(rows, kThreads), kThreads>>>(
        value, value.args(params), v.data(), out.data(), rows, S, Hkv, d);
    check(cudaGetLastError(), "value_forward_kernel launch");
    return out;
  }
}

template <class Value, class T>
kernels::ValueTransformGrads<T, Value, sinklab::cuda> value_transform_backward(
    const Value& value, const DeviceTensor<T>& v_, const value::params_t<Value, T, sinklab::cuda>& params,
    const DeviceTensor<T>& dvhat_) {
  constexpr const char* fn = "value_transform_backward (cuda)";
  SINKLAB_CHECK(v_.defined() && v_.rank() == 4, fn, ": values must be [B, H_kv, S, d], got ",
                v_.defined() ? v_.shape() : Shape{});
  SINKLAB_CHECK(dvhat_.shape() == v_.shape(), fn, ": gradient ", dvhat_.shape(), " must have the shape of the values ",
                v_.shape());
  if constexpr (Value::identity) {
    return {dvhat_, {}};
  } else {
    value.check_params(params, v_.size(1), (std::string(fn) + "(" + Value::name + ") for values " + v_.shape().str()).c_str());
    const DeviceTensor<T> v = v_.contiguous(), dvhat = dvhat_.contiguous();
    const int64_t B = v.size(0), Hkv = v.size(1), S = v.size(2), d = v.size(3), rows = v.numel() / std::max<int64_t>(d, 1);
    kernels::ValueTransformGrads<T, Value, sinklab::cuda> g;
    g.dv = DeviceTensor<T>::empty(v.shape());
    g.dparams = policy::zeros_like(params);
    DeviceTensor<T> row_grad = DeviceTensor<T>::empty({rows});
    detail::value_backward_kernel<Value, T><<<detail::blocks_for_rows(rows, kThreads), kThreads>>>(
        value, value.args(params), v.data(), dvhat.data(), g.dv.data(), row_grad.data(), rows, S, Hkv, d);
    check(cudaGetLastError(), "value_backward_kernel launch");
    // The policies whose θ the CPU accumulates per head (add_param_grad, defined for host memory).
    if constexpr (requires(value::params_t<Value, T, sinklab::cpu>& p) { value.add_param_grad(p, int64_t{0}, 0.0); }) {
      detail::value_params_kernel<T><<<1, 32>>>(row_grad.data(), detail::single_parameter<T>(g.dparams, fn), B, Hkv, S);
      check(cudaGetLastError(), "value_params_kernel launch");
    }
    return g;
  }
}

template <class Gate, class T>
DeviceTensor<T> gate_forward(const Gate& gate, const DeviceTensor<T>& x_, const DeviceTensor<T>& logit_,
                             const kernels::Edit<T, sinklab::cuda>& edit = {}) {
  kernels::contract::check_gate<Gate>("gate_forward (cuda)", x_, logit_);
  detail::refuse_edit(edit, "gate_forward (cuda)");
  const DeviceTensor<T> x = x_.contiguous(), logit = logit_.contiguous();
  const int64_t d = x.size(3), rows = x.numel() / std::max<int64_t>(d, 1);
  DeviceTensor<T> y = DeviceTensor<T>::empty(x.shape());
  detail::gate_forward_kernel<Gate, T><<<detail::blocks_for_rows(rows, kThreads), kThreads>>>(
      gate, x.data(), logit.data(), y.data(), rows, d);
  check(cudaGetLastError(), "gate_forward_kernel launch");
  return y;
}

template <class Gate, class T>
kernels::GateGrads<T, sinklab::cuda> gate_backward(const Gate& gate, const DeviceTensor<T>& x_,
                                                        const DeviceTensor<T>& logit_, const DeviceTensor<T>& dy_,
                                                        const kernels::Edit<T, sinklab::cuda>& edit = {}) {
  kernels::contract::check_gate<Gate>("gate_backward (cuda)", x_, logit_);
  SINKLAB_CHECK(dy_.shape() == x_.shape(), "gate_backward (cuda): gradient ", dy_.shape(),
                " must have the shape of the gated tensor ", x_.shape());
  detail::refuse_edit(edit, "gate_backward (cuda)");
  const DeviceTensor<T> x = x_.contiguous(), logit = logit_.contiguous(), dy = dy_.contiguous();
  const int64_t d = x.size(3), rows = x.numel() / std::max<int64_t>(d, 1);
  kernels::GateGrads<T, sinklab::cuda> g{DeviceTensor<T>::empty(x.shape()), DeviceTensor<T>::empty(logit.shape())};
  detail::gate_backward_kernel<Gate, T><<<detail::blocks_for_rows(rows, kThreads), kThreads>>>(
      gate, x.data(), logit.data(), dy.data(), g.dx.data(), g.dlogit.data(), rows, d);
  check(cudaGetLastError(), "gate_backward_kernel launch");
  return g;
}

}  // namespace sinklab::kernels::cuda::host
