// A 16 × 16 matrix of 32-bit elements transposed in AVX-512 registers: unpack pairs of rows, then
// shuffle 2-, 4- and 8-element groups. Pure data movement, so it serves floats and packed words
// alike (the attention's transposed keys and values, gemm_bf16's packing of Aᵀ into bf16 pairs).
// A function-level target, so kernels chosen at run time use it in programs built without
// -march=native too.
#pragma once
#include "sinklab/core/cpu_features.hpp"

#if defined(SINKLAB_CPUID)
#include <immintrin.h>

namespace sinklab::kernels::cpu::detail {

// r[i] holds row i; afterwards r[j] holds column j. Float shuffles move bits unchanged, so words
// ride along cast to __m512. GCC 12 warns, inside a function with a target attribute, that the
// intrinsics' own placeholder operand (_mm512_undefined_ps) is uninitialised: silenced here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
__attribute__((target("avx512f"))) inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
      t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xDD);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xDD);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace sinklab::kernels::cpu::detail
#endif
