// doctest main for GPU tests: skips the whole executable (exit 77) when no device exists, unless
// SINKLAB_REQUIRE_GPU=1 says this machine must have one (a GPU runner of CI): then a missing or
// broken device is a failure, with the runtime's reason.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sinklab/cuda/device.cuh"

int main(int argc, char** argv) {
  const char* why = "";
  if (sinklab::kernels::cuda::host::device_count(&why) == 0) {
    const char* require = std::getenv("SINKLAB_REQUIRE_GPU");
    if (require && std::strcmp(require, "1") == 0) {
      std::printf("SINKLAB_REQUIRE_GPU=1 but no CUDA device is usable (%s): failing\n", why);
      return 1;
    }
    std::printf("no CUDA device found (%s): skipping GPU tests (they were compiled with nvcc; "
                "SINKLAB_REQUIRE_GPU=1 makes this a failure)\n", why);
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
