// doctest main for GPU tests: skips the whole executable (exit 77) when no device exists.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "sinklab/cuda/device.cuh"

int main(int argc, char** argv) {
  if (sinklab::cuda_backend::device_count() == 0) {
    std::printf("no CUDA device found: skipping GPU tests (they were compiled with nvcc)\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
