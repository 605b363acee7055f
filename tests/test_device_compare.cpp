// The host-vs-device comparison of the CUDA tests (tests/device_compare.hpp) and the host side of
// the counter-based RNG they check on the device: Philox4x32-10 against the known-answer vectors
// of its reference implementation (Random123's kat_vectors), on all four output lanes with
// 64-bit keys and counters, and the uniform and normal conversions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "device_compare.hpp"
#include "sinklab/core/rng.hpp"

using namespace sinklab;
using sinklab_test::device_close;

TEST_CASE("device_close is relative all the way down: a device 0 for a host 4e-18 fails") {
  CHECK(device_close(1.0, 1.0 + 1e-13, 1e-12));
  CHECK_FALSE(device_close(1.0, 1.0 + 1e-11, 1e-12));
  CHECK_FALSE(device_close(4e-18, 0.0, 1e-12));
  CHECK_FALSE(device_close(0.0, 4e-18, 1e-12));
  CHECK(device_close(4e-18, 4e-18 * (1 + 1e-13), 1e-12));
  CHECK_FALSE(device_close(4e-18, 4e-18 * (1 + 1e-11), 1e-12));
  CHECK(device_close(0.0, -0.0, 1e-12));
  CHECK(device_close(-1e300, -1e300, 1e-12));
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(device_close(inf, inf, 1e-12));
  CHECK_FALSE(device_close(inf, -inf, 1e-12));
  CHECK_FALSE(device_close(inf, 1e308, 1e-12));
  CHECK(device_close(nan, nan, 1e-12));
  CHECK_FALSE(device_close(nan, 0.0, 1e-12));
  CHECK_FALSE(device_close(1.0, -1.0, 1e-12));
}

TEST_CASE("Philox4x32-10 gives the reference implementation's known answers on all four lanes") {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    // The 128-bit counter is (counter_lo, counter_hi), the 64-bit key one word: low words first.
    const uint64_t lo = uint64_t{k.ctr[1]} << 32 | k.ctr[0], hi = uint64_t{k.ctr[3]} << 32 | k.ctr[2];
    const uint64_t key = uint64_t{k.key[1]} << 32 | k.key[0];
    const Philox4x32::Block b = Philox4x32::generate(key, lo, hi);
    for (int lane = 0; lane < 4; ++lane) {
      INFO("lane ", lane, " key ", key, " counter ", lo, ", ", hi);
      CHECK(b.v[lane] == k.out[lane]);
    }
  }
}

TEST_CASE("Philox's conversions: uniforms in (0, 1] on the 2^-32 grid, Box-Muller normals") {
  CHECK(Philox4x32::to_unit(0) == 0x1p-32);
  CHECK(Philox4x32::to_unit(0xffffffffu) == 1.0);
  CHECK(Philox4x32::to_unit(0x7fffffffu) == 0.5);
  const Philox4x32::Block b{{0x40000000u, 0x3fffffffu, 0, 0}};  // u1 = 0.25 + 2^-32, u2 = 0.25
  double z0 = 0, z1 = 0;
  Philox4x32::normal2(b, z0, z1);
  const double u1 = 0.25 + 0x1p-32, r = std::sqrt(-2.0 * std::log(u1));
  CHECK(z0 == doctest::Approx(r * std::cos(M_PI / 2)).epsilon(1e-15));
  CHECK(std::abs(z0) < 1e-15);  // cos(π/2)
  CHECK(z1 == doctest::Approx(r).epsilon(1e-15));
}
