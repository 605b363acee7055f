// The emulator's warp matrix instructions (kernels/simt_mma.hpp) against the PTX ISA, each on its
// own: ldmatrix and mma.m16n8k16 against the ISA's fragment tables written out independently in
// mma_cases.hpp, cp.async's groups against wait_group's rule, pack2's half order, and fp16
// conversion (core/f16.hpp) against the compiler's _Float16. A tensor-core kernel tested on the
// emulator is only as right as these; tests/cuda/test_cuda_mma runs the same bodies on a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mma_cases.hpp"
#include "skip.hpp"

using namespace sinklab;
using namespace mma_cases;

namespace {

template <int N, bool Trans>
void check_ldmatrix(bool misaligned_ignored) {
  CAPTURE(N);
  CAPTURE(Trans);
  CAPTURE(misaligned_ignored);
  const int64_t at = first_difference(emulated_ldmatrix<N, Trans>(misaligned_ignored), ldmatrix_expected(N, Trans));
  INFO("the first wrong register: lane ", at / N, ", r[", at % N, "]");
  CHECK(at == -1);
}

}  // namespace

TEST_CASE("simt::ldmatrix x1, x2, x4, plain and .trans: every lane's registers are the PTX ISA's, rows at permuted addresses") {
  check_ldmatrix<1, false>(false);
  check_ldmatrix<2, false>(false);
  check_ldmatrix<4, false>(false);
  check_ldmatrix<1, true>(false);
  check_ldmatrix<2, true>(false);
  check_ldmatrix<4, true>(false);
}

TEST_CASE("simt::ldmatrix x1, x2: the addresses of lanes 8N and up are ignored, misaligned ones included") {
  check_ldmatrix<1, false>(true);
  check_ldmatrix<2, false>(true);
  check_ldmatrix<1, true>(true);
  check_ldmatrix<2, true>(true);
}

TEST_CASE_TEMPLATE("simt::mma_16816 from fragments built per the PTX ISA's table gives A·B + C", E, simt::Bf16, simt::F16) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    const Operands o = random_operands<E>(seed);
    CHECK(max_rel(gather_d(emulated_mma<E>(o, Form::Fragments)), reference<E>(o)) <= 1e-6);
  }
}

TEST_CASE_TEMPLATE("simt::mma_16816 composes with ldmatrix: A by .x4, B by .x2 from [n][k] or .x2.trans from [k][n]", E,
                   simt::Bf16, simt::F16) {
  const Operands o = random_operands<E>(4);
  const std::vector<float> by_hand = emulated_mma<E>(o, Form::Fragments);
  for (Form form : {Form::Ldmatrix, Form::LdmatrixTrans}) {
    CAPTURE(static_cast<int>(form));
    const std::vector<float> acc = emulated_mma<E>(o, form);
    CHECK(max_rel(gather_d(acc), reference<E>(o)) <= 1e-6);
    CHECK(acc == by_hand);  // the same registers, so the same arithmetic
  }
}

TEST_CASE("simt::cp_async_16: a copy lands only when wait_group completes its group; src null fills zeros") {
  const std::vector<Chunk> global = cp_async_sources();
  const std::vector<uint32_t> out = emulated_cp_async(global);
  int wrong = 0;
  for (int state = 0; state < kStates; ++state)
    for (int c = 0; c < kChunks; ++c)
      for (int l = 0; l < 32; ++l)
        for (int w = 0; w < 4; ++w) {
          const uint32_t want = cp_async_complete(state, c) ? cp_async_expected(global, c, l, w) : kSentinel;
          if (out[((state * kChunks + c) * 32 + l) * 4 + w] != want && wrong++ == 0) {
            INFO("state ", state, " chunk ", c, " lane ", l, " word ", w);
            CHECK(out[((state * kChunks + c) * 32 + l) * 4 + w] == want);
          }
        }
  CHECK(wrong == 0);
}

TEST_CASE("simt::pack2 puts lo in the low 16 bits, rounded to nearest even; unpack_lo / unpack_hi undo it") {
  CHECK(simt::pack2<simt::Bf16>(1.0f, -2.0f) == 0xc0003f80u);
  CHECK(simt::pack2<simt::F16>(1.0f, -2.0f) == 0xc0003c00u);
  // bf16 ties: 1 + 2^-8 rounds down to 1 (even), 1 + 3·2^-8 up to 1 + 2^-6.
  CHECK(simt::pack2<simt::Bf16>(1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f) == 0x3f823f80u);
  // fp16: the largest finite value and the smallest subnormal.
  CHECK(simt::pack2<simt::F16>(65504.0f, 0x1p-24f) == 0x00017bffu);
  CHECK(simt::unpack_lo<simt::Bf16>(0xc0003f80u) == 1.0f);
  CHECK(simt::unpack_hi<simt::Bf16>(0xc0003f80u) == -2.0f);
  CHECK(simt::unpack_lo<simt::F16>(0xc0003c00u) == 1.0f);
  CHECK(simt::unpack_hi<simt::F16>(0xc0003c00u) == -2.0f);
}

TEST_CASE("to_f16 / from_f16 at the edges of fp16, by hand") {
  CHECK(to_f16(0.0f) == 0x0000);
  CHECK(to_f16(-0.0f) == 0x8000);
  CHECK(to_f16(1.0f) == 0x3c00);
  CHECK(to_f16(0x1p-14f) == 0x0400);                        // the smallest normal
  CHECK(to_f16(0x1p-14f - 0x1p-24f) == 0x03ff);             // the largest subnormal
  CHECK(to_f16(0x1p-24f) == 0x0001);                        // the smallest subnormal
  CHECK(to_f16(0x1p-25f) == 0x0000);                        // its half: a tie, to even (0)
  CHECK(to_f16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);  // above the tie
  CHECK(to_f16(3 * 0x1p-25f) == 0x0002);                    // 1.5 units: a tie, to even (2)
  CHECK(to_f16(65504.0f) == 0x7bff);
  CHECK(to_f16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);  // below the overflow tie
  CHECK(to_f16(65520.0f) == 0x7c00);                        // the tie rounds to even: infinity
  CHECK(to_f16(-65520.0f) == 0xfc00);
  CHECK(to_f16(1.0f + 0x1p-11f) == 0x3c00);                 // tie between 1 and 1 + 2^-10: to even
  CHECK(to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(std::isnan(from_f16(to_f16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(from_f16(0x0001) == 0x1p-24f);
  CHECK(from_f16(0x83ff) == -(0x1p-14f - 0x1p-24f));
  CHECK(from_f16(0x7bff) == 65504.0f);
  CHECK(from_f16(0xfc00) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("to_f16 / from_f16 equal the compiler's _Float16 conversions" * sinklab_test::optional()) {
#if defined(__FLT16_MAX__)
  auto bits_of = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  int wrong = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    _Float16 x;
    const auto code = static_cast<uint16_t>(h);
    std::memcpy(&x, &code, 2);
    const float want = static_cast<float>(x), got = from_f16(code);
    const bool ok = std::isnan(want) ? std::isnan(got) : bits_of(got) == bits_of(want);
    if (!ok && wrong++ == 0) {
      INFO("from_f16(", h, ") = ", got, ", _Float16 gives ", want);
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);

  std::vector<float> floats = rounding_probes();
  std::mt19937 gen(11);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t u = static_cast<uint32_t>(gen());
    float f;
    std::memcpy(&f, &u, 4);
    floats.push_back(f);
  }
  wrong = 0;
  for (float f : floats) {
    const _Float16 x = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &x, 2);
    const uint16_t got = to_f16(f);
    const bool ok = std::isnan(f) ? std::isnan(from_f16(got)) : got == want;
    if (!ok && wrong++ == 0) {
      INFO("to_f16 of the float with bits ", bits_of(f), " (", f, ") = ", got, ", _Float16 gives ", want);
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
#else
  SINKLAB_SKIP("this compiler has no _Float16 to compare with");
#endif
}
