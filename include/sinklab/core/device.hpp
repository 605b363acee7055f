// Device tags: the backend a tensor lives on is a template parameter.
#pragma once

namespace sinklab {
struct cpu {
  static constexpr const char* name = "cpu";
};
struct cuda {
  static constexpr const char* name = "cuda";
};
}  // namespace sinklab
