// The counter-based RNG gives the same bits on the device as on the host: all four output lanes
// of Philox4x32-10 for keys and counters with their high words set, and the uniform and normal
// conversions (the host side is checked against the reference's known answers in
// test_device_compare).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "../device_compare.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/device.cuh"

using namespace sinklab;

namespace {

// 64-bit keys and counters whose high 32 bits matter (a lane or a high word dropped on the
// device shows up as a mismatch).
constexpr uint64_t kKey = 0xDEADBEEFCAFEF00Dull;
constexpr uint64_t kStream = 0x8000000100000007ull;
__host__ __device__ uint64_t counter_of(int i) { return (uint64_t{0xA5A5A5A5u} << 32) + static_cast<uint64_t>(i) * 0x100000001ull; }

__global__ void philox_kernel(uint32_t* lanes, double* conv, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Philox4x32::Block b = Philox4x32::generate(kKey, counter_of(i), kStream);
  for (int l = 0; l < 4; ++l) lanes[i * 4 + l] = b.v[l];
  double z0 = 0, z1 = 0;
  Philox4x32::normal2(b, z0, z1);
  conv[i * 4 + 0] = Philox4x32::to_unit(b.v[0]);
  conv[i * 4 + 1] = Philox4x32::to_unit(b.v[1]);
  conv[i * 4 + 2] = z0;
  conv[i * 4 + 3] = z1;
}

}  // namespace

TEST_CASE("cuda: Philox matches the host generator bit for bit on every lane, uniforms exactly, normals to 1e-14") {
  const int n = 4096;
  uint32_t* dl = nullptr;
  double* dc = nullptr;
  kernels::cuda::host::check(cudaMalloc(&dl, n * 4 * sizeof(uint32_t)), "cudaMalloc");
  kernels::cuda::host::check(cudaMalloc(&dc, n * 4 * sizeof(double)), "cudaMalloc");
  philox_kernel<<<(n + 255) / 256, 256>>>(dl, dc, n);
  kernels::cuda::host::check(cudaGetLastError(), "philox_kernel launch");
  std::vector<uint32_t> lanes(n * 4);
  std::vector<double> conv(n * 4);
  kernels::cuda::host::check(cudaMemcpy(lanes.data(), dl, lanes.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  kernels::cuda::host::check(cudaMemcpy(conv.data(), dc, conv.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(dl);
  cudaFree(dc);
  int lane_mismatches = 0, conv_mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const Philox4x32::Block b = Philox4x32::generate(kKey, counter_of(i), kStream);
    for (int l = 0; l < 4; ++l) lane_mismatches += lanes[i * 4 + l] != b.v[l];
    double z0 = 0, z1 = 0;
    Philox4x32::normal2(b, z0, z1);
    // to_unit is exact arithmetic; the normals go through log, sqrt, cos, sin (CUDA's double
    // versions are within 2 ulp of the correctly rounded result, as glibc's are).
    conv_mismatches += conv[i * 4 + 0] != Philox4x32::to_unit(b.v[0]);
    conv_mismatches += conv[i * 4 + 1] != Philox4x32::to_unit(b.v[1]);
    conv_mismatches += !sinklab_test::device_close(z0, conv[i * 4 + 2], 1e-14);
    conv_mismatches += !sinklab_test::device_close(z1, conv[i * 4 + 3], 1e-14);
  }
  CHECK(lane_mismatches == 0);
  CHECK(conv_mismatches == 0);
}
