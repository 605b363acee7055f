// Every attention policy's element math compiles as device code and gives the host's values.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "../device_compare.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/score.hpp"
#include "sinklab/policy/value.hpp"

using namespace sinklab;

namespace {

constexpr int kOutputs = 32;

// All policy math at one input x, written to out[0..kOutputs). Runs on the host and the device.
template <class T>
struct EvalPolicies {
  SINKLAB_HD void operator()(T x, T* out) const {
    int n = 0;
    auto act = [&](auto h) {
      out[n++] = decltype(h)::f(x);
      out[n++] = decltype(h)::df(x);
    };
    act(score::fn::ReLU{});
    act(score::fn::ReLU2{});
    act(score::fn::GELU{});
    act(score::fn::Softplus{});
    act(score::fn::Identity{});

    const T p = policy::math::sigmoid(x);  // a probability in (0, 1)
    const score::Softmax sm{};
    const score::SoftmaxSink sink{};
    const score::ClippedSoftmax clip{1.1, -0.2};
    out[n++] = sm.weight(p);
    out[n++] = sink.weight_grad(p);
    out[n++] = clip.weight(p);
    out[n++] = clip.weight_grad(p);

    const score::Sigmoid sig{};
    const score::RowConstants rs = sig.row(3, 8);
    out[n++] = static_cast<T>(rs.bias);
    out[n++] = sig.weight(x, static_cast<T>(rs.scale), static_cast<T>(rs.bias));
    out[n++] = sig.weight_grad(x, static_cast<T>(rs.scale), static_cast<T>(rs.bias));
    const score::Pointwise<score::fn::GELU> pw{{}, 0.5};
    const score::RowConstants rp = pw.row(4, 9);
    out[n++] = static_cast<T>(rp.scale);
    out[n++] = pw.weight(x, static_cast<T>(rp.scale), T(0));
    out[n++] = score::ReLU{}.weight_grad(x, T(0.25), T(0));
    const score::Polynomial poly{};
    const score::RowConstants rq = poly.row(16, 16);
    out[n++] = poly.weight(x, static_cast<T>(rq.scale), T(0));
    out[n++] = poly.weight_grad(x, static_cast<T>(rq.scale), T(0));

    const value::VScale vs{};
    const T C = static_cast<T>(vs.constant(64, 0.01 * static_cast<double>(x)));
    const T r = x * x;
    out[n++] = C;
    out[n++] = value::VScale::phi(r, C);
    out[n++] = value::VScale::dphi_dr(r, C);
    out[n++] = value::VScale::dphi_dC(r, C);

    using G = gate::FromValue<gate::per_head, gate::on_values>;
    out[n++] = G::activation(x);
    out[n++] = G::activation_grad(x);
    out[n++] = static_cast<T>(G::channels(64));
    out[n++] = static_cast<T>(mask::Causal::key_end(static_cast<int64_t>(x < 0 ? -x : x), 5, 7, 6));
    out[n++] = static_cast<T>(mask::Bidirectional::key_end(0, 5, 7, 6));
    while (n < kOutputs) out[n++] = T(0);
  }
};

template <class T>
__global__ void eval_policies_kernel(const T* x, T* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) EvalPolicies<T>{}(x[i], out + i * kOutputs);
}

// Relative to the larger magnitude, with no absolute floor (device_compare.hpp): x = −40 gives
// σ(x) ≈ 4e-18 in double, and a device 0 there fails.
template <class T>
void compare_with_host(double tol) {
  std::vector<T> xs;
  for (double v : {-1e4, -40.0, -3.0, -1.0, -0.25, 0.0, 1e-7, 1e-3, 0.5, 1.0, 2.0, 6.0, 35.0, 1e4})
    xs.push_back(static_cast<T>(v));
  const int n = static_cast<int>(xs.size());
  T *dx = nullptr, *dout = nullptr;
  kernels::cuda::host::check(cudaMalloc(&dx, n * sizeof(T)), "cudaMalloc");
  kernels::cuda::host::check(cudaMalloc(&dout, n * kOutputs * sizeof(T)), "cudaMalloc");
  kernels::cuda::host::check(cudaMemcpy(dx, xs.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  eval_policies_kernel<T><<<1, 64>>>(dx, dout, n);
  kernels::cuda::host::check(cudaGetLastError(), "eval_policies_kernel launch");
  std::vector<T> dev(n * kOutputs);
  kernels::cuda::host::check(cudaMemcpy(dev.data(), dout, dev.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(dx);
  cudaFree(dout);
  std::vector<T> host(kOutputs);
  for (int i = 0; i < n; ++i) {
    EvalPolicies<T>{}(xs[i], host.data());
    for (int j = 0; j < kOutputs; ++j) {
      const double h = static_cast<double>(host[j]), d = static_cast<double>(dev[i * kOutputs + j]);
      INFO("x = ", static_cast<double>(xs[i]), ", output ", j, ": host ", h, ", device ", d);
      CHECK(sinklab_test::device_close(h, d, tol));
    }
  }
}

}  // namespace

TEST_CASE("cuda: attention policy math on the device equals the host (double)") { compare_with_host<double>(1e-12); }

TEST_CASE("cuda: attention policy math on the device equals the host (float)") { compare_with_host<float>(2e-6); }
