// The CUDA backend's value transform and gates (kernels/cuda/attention_transforms.hpp) on the SIMT
// emulator against the CPU backend (kernels/cpu/attention_transforms.hpp): V-scale forward and
// backward with its per-kv-head θ gradient, and the sigmoid gate per head and per channel,
// forward and backward (the placement only decides which tensor is gated; the kernels are the same).
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"

#include <cmath>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cuda/attention_transforms.hpp"
#include "sinklab/kernels/simt.hpp"

using namespace sinklab;

namespace {

template <class T>
void check_vscale(double tol) {
  const int64_t B = 2, Hkv = 3, S = 9, d = 8, rows = B * Hkv * S;
  Rng rng(2);
  const Tensor<T> v = rng.normal<double>({B, Hkv, S, d}).to<T>(), dvhat = rng.normal<double>({B, Hkv, S, d}).to<T>();
  const value::VScale vs{};
  auto params = vs.template make_params<T>(Hkv);
  params.theta = rng.normal<double>({Hkv}, 0.0, 0.5).to<T>();
  const Tensor<T> want = kernels::cpu::value_transform_forward(vs, v, params);
  const auto grads = kernels::cpu::value_transform_backward(vs, v, params, dvhat);

  const auto args = vs.args(params);
  Tensor<T> vhat = Tensor<T>::zeros(v.shape()), dv = Tensor<T>::zeros(v.shape()), row_grad = Tensor<T>::zeros({rows}),
            dtheta = Tensor<T>::zeros({Hkv});
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::value_transform_forward(ctx, vs, args, v.data(), vhat.data(), rows, S, Hkv, d);
  });
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::value_transform_backward(ctx, vs, args, v.data(), dvhat.data(), dv.data(), row_grad.data(), rows, S,
                                            Hkv, d);
  });
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::value_transform_params(ctx, row_grad.data(), dtheta.data(), B, Hkv, S);
  });
  CHECK(sinklab_test::max_rel_diff(vhat, want) <= tol);
  CHECK(sinklab_test::max_rel_diff(dv, grads.dv) <= tol);
  CHECK(sinklab_test::max_rel_diff(dtheta, grads.dparams.theta) <= tol);
}

template <class Gate, class T>
void check_gate(double tol) {
  const int64_t B = 2, H = 3, L = 7, d = 4, rows = B * H * L, G = Gate::channels(d);
  Rng rng(4);
  const Tensor<T> x = rng.normal<double>({B, H, L, d}).to<T>(), dy = rng.normal<double>({B, H, L, d}).to<T>();
  const Tensor<T> logit = rng.normal<double>({B, H, L, G}, 0.0, 2.0).to<T>();
  const Gate gate{};
  const Tensor<T> want = kernels::cpu::gate_forward(gate, x, logit);
  const auto grads = kernels::cpu::gate_backward(gate, x, logit, dy);
  Tensor<T> y = Tensor<T>::zeros(x.shape()), dx = Tensor<T>::zeros(x.shape()), dl = Tensor<T>::zeros(logit.shape());
  simt::emulate(1, 64, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::gate_forward(ctx, gate, x.data(), logit.data(), y.data(), rows, d);
  });
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {  // fewer threads than rows
    kernels::cuda::gate_backward(ctx, gate, x.data(), logit.data(), dy.data(), dx.data(), dl.data(), rows, d);
  });
  CHECK(sinklab_test::max_rel_diff(y, want) <= tol);
  CHECK(sinklab_test::max_rel_diff(dx, grads.dx) <= tol);
  CHECK(sinklab_test::max_rel_diff(dl, grads.dlogit) <= tol);
}

}  // namespace

TEST_CASE("CUDA V-scale on the emulator equals the CPU backend (forward, dv, dθ)") {
  check_vscale<double>(1e-13);
  check_vscale<float>(2e-6);
}

TEST_CASE("CUDA gates on the emulator equal the CPU backend (per head and per channel, forward and backward)") {
  check_gate<gate::FromValue<gate::per_head, gate::on_values>, double>(1e-13);
  check_gate<gate::FromInput<gate::per_channel, gate::on_output>, double>(1e-13);
  check_gate<gate::FromValue<gate::per_head, gate::on_values>, float>(2e-6);
  check_gate<gate::FromInput<gate::per_channel, gate::on_output>, float>(2e-6);
}
