// The CUDA backend's Thrust reductions (cuda/include/sinklab/cuda/reduce.hpp) on Thrust's host
// system (thrust::cpp::par; built with THRUST_DEVICE_SYSTEM=CPP by a host compiler), against the
// CPU's gradient-clipping sum (optim/clip.hpp) and loops in double. test_cuda_reduce runs the
// same code on a GPU.
#include <doctest/doctest.h>

#include <thrust/system/cpp/execution_policy.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/reduce.hpp"
#include "sinklab/optim/clip.hpp"

using namespace sinklab;

TEST_CASE("Thrust reductions on the host system: sum of squares and max |x| as the CPU computes them") {
  for (int64_t n : {0, 1, 7, 4096, 100003}) {
    const std::vector<float> x = Rng(static_cast<uint64_t>(n) + 3).normal<float>({n > 0 ? n : 1}, 0.f, 2.f).to_vector();
    const float* p = x.data();
    double want_max = 0;
    for (int64_t i = 0; i < n; ++i) want_max = std::max(want_max, std::abs(double(p[i])));
    const double got = kernels::cuda::host::sum_of_squares(thrust::cpp::par, p, n);
    const double want = kernels::cpu::sum_of_squares(p, n);
    INFO("n = ", n);
    CHECK(std::abs(got - want) <= 1e-13 * want);
    CHECK(kernels::cuda::host::max_abs(thrust::cpp::par, p, n) == want_max);
  }
}

TEST_CASE("Thrust max |x| on the host system: a NaN anywhere gives NaN, an infinity gives infinity") {
  std::vector<double> x(1000, 0.5);
  x[10] = -3.0;
  CHECK(kernels::cuda::host::max_abs(thrust::cpp::par, x.data(), int64_t{1000}) == 3.0);
  x[999] = -std::numeric_limits<double>::infinity();
  CHECK(kernels::cuda::host::max_abs(thrust::cpp::par, x.data(), int64_t{1000}) == std::numeric_limits<double>::infinity());
  x[500] = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(kernels::cuda::host::max_abs(thrust::cpp::par, x.data(), int64_t{1000})));
  x[500] = 1.0;
  x[0] = std::numeric_limits<double>::quiet_NaN();  // first and last positions too
  CHECK(std::isnan(kernels::cuda::host::max_abs(thrust::cpp::par, x.data(), int64_t{1000})));
}
