// Tensor<T, cuda> on device memory (cuda/include/sinklab/cuda/memory.cuh): host round trips,
// fills, views made dense on the device (gather) and written through (scatter), and the block
// cache: a loop that allocates the same shapes calls cudaMalloc only in its first pass.
#include <doctest/doctest.h>

#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/cuda/memory.cuh"

using namespace sinklab;

TEST_CASE("cuda: a device tensor round-trips through the host, fills, and makes views dense like the host") {
  const Tensor<float> host = Tensor<float>::arange({3, 5, 7});
  const Tensor<float, cuda> dev = Tensor<float, cuda>::from({3, 5, 7}, host.to_vector());
  CHECK(dev.to_vector() == host.to_vector());
  CHECK(dev.transpose(0, 2).contiguous().to_vector() == host.transpose(0, 2).contiguous().to_vector());
  CHECK(dev.slice(1, 1, 4).to_vector() == host.slice(1, 1, 4).to_vector());
  CHECK(Tensor<double, cuda>::full({1000}, 2.5).to_vector() == std::vector<double>(1000, 2.5));

  Tensor<float, cuda> target = Tensor<float, cuda>::zeros({3, 5, 7});
  Tensor<float> host_target = Tensor<float>::zeros({3, 5, 7});
  const Tensor<float> src = Tensor<float>::arange({3, 7, 5}, 100.f);
  target.transpose(1, 2).copy_from(Tensor<float, cuda>::from({3, 7, 5}, src.to_vector()));
  host_target.transpose(1, 2).copy_from(src);
  CHECK(target.to_vector() == host_target.to_vector());
}

TEST_CASE("cuda: the device block cache serves a repeated allocation pattern without cudaMalloc") {
  auto step = [] {
    Tensor<float, cuda> a = Tensor<float, cuda>::zeros({256, 1024});
    Tensor<float, cuda> b = Tensor<float, cuda>::full({17, 33}, 1.f);
    return a.numel() + b.numel();
  };
  step();
  const std::size_t misses = kernels::cuda::host::DevicePool::instance().misses();
  for (int i = 0; i < 10; ++i) step();
  CHECK(kernels::cuda::host::DevicePool::instance().misses() == misses);
}
