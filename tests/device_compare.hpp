// Whether a device computed the host's value: relative to the larger of the two magnitudes, with
// no absolute floor, so a device 0 where the host gives 4e-18 is a failure (an absolute floor of
// "1e-12 below 1" would pass it). Two zeros, two equal infinities and two NaNs agree. Shared by
// the CUDA tests (tests/cuda/) and tested on the CPU (test_device_compare).
#pragma once
#include <algorithm>
#include <cmath>

namespace sinklab_test {

inline bool device_close(double host, double device, double rel_tol) {
  if (std::isnan(host) || std::isnan(device)) return std::isnan(host) && std::isnan(device);
  if (std::isinf(host) || std::isinf(device)) return host == device;
  if (host == device) return true;
  return std::abs(host - device) <= rel_tol * std::max(std::abs(host), std::abs(device));
}

}  // namespace sinklab_test
