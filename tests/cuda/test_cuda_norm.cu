// The CUDA backend's RMSNorm kernel bodies (kernels/cuda/rms_norm.hpp) on the device, against a
// plain loop reference in double (test_simt_emulator runs the same bodies on the CPU emulator
// against the CPU backend).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "../max_rel_diff.hpp"
#include "on_device.cuh"
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/rms_norm.hpp"

using namespace sinklab;

namespace {

template <class T>
__global__ void rms_forward_kernel(const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows, int64_t n, T eps) {
  simt::Cuda ctx;
  kernels::cuda::rms_forward(ctx, x, pre, gain, y, rstd, rows, n, eps);
}
template <class T>
__global__ void rms_backward_input_kernel(const T* x, const T* pre, const T* gain, const T* rstd, const T* gy, T* gx,
                                          T* k, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::rms_backward_input(ctx, x, pre, gain, rstd, gy, gx, static_cast<const T*>(nullptr), k, rows, n);
}
template <class T>
__global__ void rms_backward_params_kernel(const T* x, const T* pre, const T* gain, const T* rstd, const T* k,
                                           const T* gy, T* ggain, T* gpre, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::rms_backward_params(ctx, x, pre, gain, rstd, k, gy, ggain, gpre, rows, n);
}



// y, rstd, gx, ggain, gpre of pre-affine RMSNorm in double loops.
struct Reference {
  std::vector<double> y, rstd, gx, ggain, gpre;
};
template <class T>
Reference reference(const std::vector<T>& x, const std::vector<T>& pre, const std::vector<T>& gain,
                    const std::vector<T>& gy, int64_t rows, int64_t n, double eps) {
  Reference r{std::vector<double>(rows * n), std::vector<double>(rows), std::vector<double>(rows * n),
              std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0, s = 0;
    for (int64_t j = 0; j < n; ++j) ss += std::pow(double(x[i * n + j]) * pre[j], 2);
    const double rs = 1.0 / std::sqrt(ss / n + eps);
    r.rstd[i] = rs;
    for (int64_t j = 0; j < n; ++j) {
      const double z = double(x[i * n + j]) * pre[j];
      r.y[i * n + j] = z * rs * gain[j];
      s += double(gy[i * n + j]) * gain[j] * z;
    }
    const double k = rs * rs * rs * s / n;
    for (int64_t j = 0; j < n; ++j) {
      const double z = double(x[i * n + j]) * pre[j];
      const double gz = rs * gy[i * n + j] * gain[j] - z * k;
      r.gx[i * n + j] = gz * pre[j];
      r.ggain[j] += double(gy[i * n + j]) * z * rs;
      r.gpre[j] += gz * x[i * n + j];
    }
  }
  return r;
}

template <class T>
void check_rms(double tol) {
  const int64_t rows = 37, n = 300, threads = 128;
  Rng rng(3);
  const std::vector<T> x = rng.normal<double>({rows, n}).to<T>().to_vector(), gy = rng.normal<double>({rows, n}).to<T>().to_vector();
  const std::vector<T> gain = rng.normal<double>({n}, 1.0, 0.3).to<T>().to_vector(),
                       pre = rng.normal<double>({n}, 1.0, 0.3).to<T>().to_vector();
  const T eps = T(1e-6);
  const Reference ref = reference(x, pre, gain, gy, rows, n, double(eps));
  const std::vector<T> zeros_rn(rows * n, T(0)), zeros_r(rows, T(0));
  using sinklab_test::on_device;
  auto dx = on_device(x), dgy = on_device(gy), dgain = on_device(gain), dpre = on_device(pre), dy = on_device(zeros_rn),
       drstd = on_device(zeros_r), dgx = on_device(zeros_rn), dk = on_device(zeros_r);
  auto dggain = on_device(std::vector<T>(n, T(0))), dgpre = on_device(std::vector<T>(n, T(0)));
  const std::size_t shared = kernels::cuda::rms_shared_bytes<T>(threads);
  rms_forward_kernel<T><<<16, threads, shared>>>(dx.data(), dpre.data(), dgain.data(), dy.data(), drstd.data(), rows, n, eps);
  rms_backward_input_kernel<T><<<16, threads, shared>>>(dx.data(), dpre.data(), dgain.data(), drstd.data(), dgy.data(), dgx.data(), dk.data(), rows, n);
  rms_backward_params_kernel<T><<<2, threads>>>(dx.data(), dpre.data(), dgain.data(), drstd.data(), dk.data(), dgy.data(), dggain.data(), dgpre.data(), rows, n);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "RMSNorm kernels");
  CHECK(sinklab_test::max_rel_diff(dy.to_vector(), ref.y) <= tol);
  CHECK(sinklab_test::max_rel_diff(drstd.to_vector(), ref.rstd) <= tol);
  CHECK(sinklab_test::max_rel_diff(dgx.to_vector(), ref.gx) <= tol);
  CHECK(sinklab_test::max_rel_diff(dggain.to_vector(), ref.ggain) <= tol);
  CHECK(sinklab_test::max_rel_diff(dgpre.to_vector(), ref.gpre) <= tol);
}

}  // namespace

TEST_CASE("cuda: RMSNorm (pre-affine) forward and backward on the device equal the CPU backend (double)") {
  check_rms<double>(1e-12);
}
TEST_CASE("cuda: RMSNorm (pre-affine) forward and backward on the device equal the CPU backend (float)") {
  check_rms<float>(1e-5);
}
