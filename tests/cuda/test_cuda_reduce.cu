// The CUDA backend's Thrust reductions (cuda/include/sinklab/cuda/reduce.hpp) on the device
// against loops in double; test_cuda_reduce_host runs the same code on Thrust's host system.
#include <doctest/doctest.h>

#include <thrust/execution_policy.h>

#include <cmath>
#include <limits>
#include <vector>

#include "on_device.cuh"
#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/reduce.hpp"

using namespace sinklab;

TEST_CASE("cuda: Thrust sum of squares and max |x| on the device equal loops in double") {
  for (int64_t n : {1, 7, 4096, 1000003}) {
    std::vector<float> x = Rng(static_cast<uint64_t>(n)).normal<float>({n}, 0.f, 2.f).to_vector();
    double want = 0, want_max = 0;
    for (float v : x) want += double(v) * double(v), want_max = std::max(want_max, std::abs(double(v)));
    const auto d = sinklab_test::on_device(x);
    INFO("n = ", n);
    CHECK(std::abs(kernels::cuda::host::sum_of_squares(thrust::device, d.data(), n) - want) <= 1e-12 * want);
    CHECK(kernels::cuda::host::max_abs(thrust::device, d.data(), n) == want_max);
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(kernels::cuda::host::max_abs(thrust::device, sinklab_test::on_device(x).data(), n)));
  }
}
