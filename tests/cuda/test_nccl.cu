// The NCCL communicator on one GPU (a job of one rank, bootstrapped without MPI): every
// collective of the interface on device memory, and host buffers staged through the device.
// Several GPUs are exercised by `mpirun -np N` runs of a data-parallel program (docs/distributed.md).
#include <doctest/doctest.h>

#include <vector>

#include "sinklab/dist/nccl.hpp"

using namespace sinklab;

TEST_CASE("nccl: a one-rank communicator's collectives leave the data as it is") {
  dist::SingleProcess boot;
  dist::NcclCommunicator c(boot);
  CHECK(c.size() == 1);
  CHECK(c.rank() == 0);
  CHECK(c.backend() == "nccl");
  const int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = 0.5f * static_cast<float>(i) - 7.f;
  float* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  c.all_reduce_sum(dev, n);
  auto pending = c.start_all_reduce_sum(dev, n);
  pending->wait();
  CHECK(pending->test());
  c.broadcast(dev, n * sizeof(float), 0);
  std::vector<float> back(n);
  REQUIRE(cudaMemcpy(back.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);
  cudaFree(dev);

  double flags[3] = {1.5, -2, 3};  // host memory: staged
  c.all_reduce_max(flags, 3);
  c.all_reduce_sum(flags, 3);
  CHECK(flags[0] == 1.5);
  CHECK(flags[1] == -2);
  int64_t word = 42;
  c.broadcast(&word, sizeof word, 0);
  CHECK(word == 42);
  c.barrier();
}

TEST_CASE("nccl: a device that does not exist is named") {
  dist::SingleProcess boot;
  CHECK_THROWS_WITH_AS(dist::NcclCommunicator(boot, 1 << 20), doctest::Contains("device 1048576 requested"), Error);
}
