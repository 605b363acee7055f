// The CUDA backend's value transform and gates (kernels/cuda/attention_transforms.hpp) on the
// device against the same policy rows run on the host (test_cuda_transforms_emulated checks the
// bodies against the CPU backend on the emulator).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "../device_compare.hpp"
#include "sinklab/core/rng.hpp"
#include "on_device.cuh"
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/attention_transforms.hpp"

using namespace sinklab;

namespace {

using Gate = gate::FromInput<gate::per_channel, gate::on_output>;

__global__ void transforms_kernel(value::VScale vs, value::VScale::Args<double> args, const double* v, const double* dvhat,
                                  double* vhat, double* dv, double* row_grad, const double* logit, double* y,
                                  double* dlogit, int64_t rows, int64_t S, int64_t Hkv, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::value_transform_forward(ctx, vs, args, v, vhat, rows, S, Hkv, d);
  kernels::cuda::value_transform_backward(ctx, vs, args, v, dvhat, dv, row_grad, rows, S, Hkv, d);
  kernels::cuda::gate_forward(ctx, Gate{}, v, logit, y, rows, d);
  kernels::cuda::gate_backward(ctx, Gate{}, v, logit, dvhat, dv + rows * d, dlogit, rows, d);
}

}  // namespace

TEST_CASE("cuda: V-scale and a per-channel gate on the device equal the policies' rows on the host") {
  const int64_t B = 2, Hkv = 3, S = 50, d = 16, rows = B * Hkv * S;
  Rng rng(8);
  const std::vector<double> v = rng.normal<double>({rows * d}).to_vector(), dvhat = rng.normal<double>({rows * d}).to_vector(),
                            logit = rng.normal<double>({rows * d}, 0.0, 2.0).to_vector(),
                            theta = rng.normal<double>({Hkv}, 0.0, 0.5).to_vector();
  const value::VScale vs{};
  using sinklab_test::on_device;
  auto dv_ = on_device(v), ddvhat = on_device(dvhat), dlogit_in = on_device(logit), dtheta = on_device(theta);
  auto dvhat_out = on_device(std::vector<double>(rows * d)), dgrad = on_device(std::vector<double>(2 * rows * d)),
       drow = on_device(std::vector<double>(rows)), dy = on_device(std::vector<double>(rows * d)),
       ddlogit = on_device(std::vector<double>(rows * d));
  transforms_kernel<<<4, 64>>>(vs, {dtheta.data()}, dv_.data(), ddvhat.data(), dvhat_out.data(), dgrad.data(),
                               drow.data(), dlogit_in.data(), dy.data(), ddlogit.data(), rows, S, Hkv, d);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "transforms_kernel");
  const auto vhat = dvhat_out.to_vector(), grad = dgrad.to_vector(), row = drow.to_vector(), y = dy.to_vector(),
             dl = ddlogit.to_vector();

  const value::VScale::Args<double> host_args{theta.data()};
  int mismatches = 0;
  std::vector<double> out(d), dvr(d);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t hk = (r / S) % Hkv;
    vs.forward_row(host_args, hk, v.data() + r * d, out.data(), d);
    const double g = vs.backward_row(host_args, hk, v.data() + r * d, dvhat.data() + r * d, dvr.data(), d);
    mismatches += !sinklab_test::device_close(g, row[r], 1e-12);
    for (int64_t c = 0; c < d; ++c) {
      const double l = logit[r * d + c];
      mismatches += !sinklab_test::device_close(out[c], vhat[r * d + c], 1e-12);
      mismatches += !sinklab_test::device_close(dvr[c], grad[r * d + c], 1e-12);
      mismatches += !sinklab_test::device_close(Gate::activation(l) * v[r * d + c], y[r * d + c], 1e-12);
      mismatches += !sinklab_test::device_close(Gate::activation(l) * dvhat[r * d + c], grad[rows * d + r * d + c], 1e-12);
      mismatches += !sinklab_test::device_close(Gate::activation_grad(l) * v[r * d + c] * dvhat[r * d + c], dl[r * d + c], 1e-12);
    }
  }
  CHECK(mismatches == 0);
}
