// Device tags: the backend a tensor lives on is a template parameter.
//
// A device gives two things, each in one place:
//   - memory<Device> (this header declares it; core/storage.hpp defines it for cpu): allocation,
//     copies and fills of its buffers, and copies to and from the host. Tensor<T, Device> allocates
//     and copies only through it.
//   - kernels::backend<Device> (kernels/backend.hpp): the kernels every differentiable op calls.
// `host_memory` says whether the CPU may dereference the device's pointers; Tensor's element
// accessors (operator(), arange, for_each_offset) exist only where it may.
#pragma once
#include <type_traits>

namespace sinklab {
struct cpu {
  static constexpr const char* name = "cpu";
  static constexpr bool host_memory = true;
};
struct cuda {
  static constexpr const char* name = "cuda";
  static constexpr bool host_memory = false;
};

// Defined per device: cpu in core/storage.hpp, cuda by the CUDA backend. A device without one
// fails to compile at its first allocation, naming memory<Device>.
template <class Device>
struct memory;

template <class Device>
inline constexpr bool host_memory_v = Device::host_memory;

template <class Device>
concept HostDevice = Device::host_memory;
}  // namespace sinklab
