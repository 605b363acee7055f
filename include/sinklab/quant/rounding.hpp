// Round to nearest, ties to even — the rounding of every quantizer in quant/ (IEEE's default
// mode, so quantized grids carry no bias from always rounding .5 up). Independent of the
// floating-point environment's current rounding mode. Written once over V, a double or an xsimd
// batch of doubles (policy/math.hpp's convention), so a row of activations quantizes a vector
// at a time with the same integers as one value at a time.
#pragma once
#include <cmath>

#include "sinklab/policy/math.hpp"

namespace sinklab::quant {

template <class V>
V round_half_even(V x) {
  using policy::math::select;
  using std::copysign;
  using std::floor;
  const V f = floor(x), d = x - f;  // d in [0, 1), exact
  const V half(0.5), one(1.0);
  const V r = select(d < half, f, select(d > half, f + one, select(floor(f * half) + floor(f * half) == f, f, f + one)));
  return copysign(r, x);  // −0.4 → −0, as IEEE's roundToIntegralTiesToEven gives
}

}  // namespace sinklab::quant
