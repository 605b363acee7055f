// The counter-based RNG gives the same bits on the device as on the host.
#include <doctest/doctest.h>

#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/device.cuh"

using namespace sinklab;

__global__ void philox_kernel(uint64_t key, uint64_t stream, uint32_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Philox4x32::generate(key, static_cast<uint64_t>(i), stream).v[0];
}

TEST_CASE("cuda: Philox matches the host generator bit for bit") {
  const int n = 4096;
  uint32_t* d = nullptr;
  cuda_backend::check(cudaMalloc(&d, n * sizeof(uint32_t)), "cudaMalloc");
  philox_kernel<<<(n + 255) / 256, 256>>>(1234, 5, d, n);
  cuda_backend::check(cudaGetLastError(), "philox_kernel launch");
  std::vector<uint32_t> h(n);
  cuda_backend::check(cudaMemcpy(h.data(), d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d);
  for (int i = 0; i < n; ++i) CHECK(h[i] == Philox4x32::generate(1234, static_cast<uint64_t>(i), 5).v[0]);
}
