// xsimd, included once for the whole library. GCC 12 warns "'__Y' is used uninitialized" from
// its own avx512fintrin.h when xsimd's AVX-512 exp/ldexp/shift paths are inlined (the
// intrinsics' deliberate self-initialised undefined vectors); the warning names no line of
// ours and fires in every unit that instantiates them, so it is silenced for xsimd's code only.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
