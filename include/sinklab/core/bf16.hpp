// bfloat16 as raw bits: float32's sign, exponent and top 7 mantissa bits. The conversions are
// SINKLAB_HD so that the CPU's bf16 GEMM (kernels/cpu/gemm_bf16.hpp) and the CUDA backend's
// operand conversion (kernels/cuda/convert.hpp) round the same way.
#pragma once
#include <cstdint>
#include <cstring>

#include "sinklab/core/config.hpp"

namespace sinklab {

// fp32 → bf16, round to nearest even; NaN stays a (quiet) NaN; beyond bf16's range, infinity.
SINKLAB_HD inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
SINKLAB_HD inline float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
SINKLAB_HD inline float round_bf16(float f) { return from_bf16(to_bf16(f)); }

}  // namespace sinklab
