// IEEE binary16 (fp16) as raw bits, for the tensor-core attention's fp16 operands
// (kernels/simt_mma.hpp). The conversions are SINKLAB_HD so that a kernel body rounds the same
// way on the SIMT emulator as on a GPU (cvt.rn.f16.f32: round to nearest even, subnormals kept).
// Written by hand: the CUDA headers' __half exists only under nvcc, and the emulator needs the
// same bits from a host compiler.
#pragma once
#include <cstdint>
#include <cstring>

#include "sinklab/core/config.hpp"

namespace sinklab {

// fp32 → fp16, round to nearest even; NaN stays a quiet NaN; |f| ≥ 65520 (beyond the largest
// fp16 once rounded) becomes infinity.
SINKLAB_HD inline uint16_t to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // a normal fp16: rebias the exponent (127 → 15), round 13 bits away
    const uint32_t r = a - (112u << 23);
    return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24 (a subnormal, or the smallest normal after rounding).
  const uint32_t e = a >> 23;
  const int shift = 126 - static_cast<int>(e);  // m · 2^(e−150) = (m >> shift) · 2^-24
  if (shift > 24) return sign;                    // below 2^-25 (or zero): rounds to ±0
  const uint32_t m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

SINKLAB_HD inline float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0x1fu) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else {  // zero or subnormal: m · 2^-24, exact in float
    const float f = static_cast<float>(m) * 5.9604644775390625e-8f;
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace sinklab
