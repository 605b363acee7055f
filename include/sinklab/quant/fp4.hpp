// FP4 E2M1 (OCP MX / NVFP4 element format): 1 sign, 2 exponent, 1 mantissa bit, no inf/NaN.
// Magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Rounding is to the nearest magnitude; a tie goes to the
// code with an even mantissa bit (IEEE round-half-even at the bit level), i.e. to the grid point
// with an even index: 0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4. Magnitudes above 6
// saturate to 6. The sign is kept (−0 is returned as 0).
#pragma once
#include <array>
#include <cmath>

namespace sinklab::quant {

inline constexpr std::array<double, 8> kE2M1Grid = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
inline constexpr double kE2M1Max = 6.0;

inline double round_to_e2m1(double x) {
  const double a = std::abs(x);
  int idx = 7;
  for (int i = 0; i < 7; ++i) {
    const double mid = 0.5 * (kE2M1Grid[i] + kE2M1Grid[i + 1]);
    if (a < mid) {
      idx = i;
      break;
    }
    if (a == mid) {
      idx = (i % 2 == 0) ? i : i + 1;  // even mantissa bit
      break;
    }
  }
  const double m = kE2M1Grid[idx];
  return m == 0.0 ? 0.0 : std::copysign(m, x);
}

inline bool on_e2m1_grid(double x) {
  for (double g : kE2M1Grid)
    if (std::abs(x) == g) return true;
  return false;
}

}  // namespace sinklab::quant
