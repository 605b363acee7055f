// Round to nearest, ties to even — the rounding of every quantizer in quant/ (IEEE's default
// mode, so quantized grids carry no bias from always rounding .5 up). Independent of the
// floating-point environment's current rounding mode.
#pragma once
#include <cmath>

namespace sinklab::quant {

inline double round_half_even(double x) {
  const double r = std::round(x);  // ties away from zero
  if (std::abs(x - std::trunc(x)) == 0.5 && std::fmod(r, 2.0) != 0.0) return r - std::copysign(1.0, x);
  return r;
}

}  // namespace sinklab::quant
