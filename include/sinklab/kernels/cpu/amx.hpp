// The AMX tile unit as the bf16 and int8 GEMMs use it, and a software model of it.
//
// Every kernel here configures the eight tile registers alike (16 rows × 64 bytes; TileScope) and
// runs one loop, product_32x32: a 32 × 32 block of fp32 or int32 sums in tmm0–3, two 16-row slices of A in
// tmm4–5 and two 16-column slices of B in tmm6–7, 16 pairs (bf16, tdpbf16ps) or quadruples
// (uint8 × int8, tdpbusd) of k per step. The loop is written once over a tile unit:
//
//   HardwareTiles  the instructions (x86-64 with GCC or Clang; the assembler must know AMX).
//                  Linux grants the tile state per process (cpu_features() asks for it).
//   EmulatedTiles  the eight registers as 8 KiB of memory and each instruction as the Intel SDM's
//                  pseudo-code: tdpbf16ps keeps two fp32 sums per element, of the even-k and of
//                  the odd-k products (fused multiply-adds, round to nearest even, bf16 denormal
//                  inputs read as 0, denormal results flushed to 0), and adds their sum to the
//                  element; tdpbusd sums the four uint8 × int8 products of a quadruple into each
//                  int32 with wrapping adds.
//
// The emulator lets the kernels' packing, strides, padding and edges be tested on a CPU without
// AMX; how closely it follows the silicon (the fp32 rounding order inside tdpbf16ps) only an
// AMX machine can show, which is why the GEMMs compare their AMX path with their AVX-512 path
// once per process before using it (gemm_bf16.hpp, gemm_s8.hpp). SINKLAB_NO_AMX=1 turns AMX off.
//
// Hand-written because GCC's and Clang's tile intrinsics take the register number as a literal
// token (they paste it into inline assembly), so a kernel written once over register numbers
// cannot use them (nor can a program whose assembler predates AMX), and no library on this
// platform's list has AMX kernels.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/error.hpp"

namespace sinklab::kernels::cpu {

// Whether SINKLAB_NO_AMX asks for the AVX-512 paths even where AMX is present.
inline bool amx_disabled_by_env() {
  const char* v = std::getenv("SINKLAB_NO_AMX");
  return v && *v && std::string(v) != "0";
}

// Whether a GEMM may take its AMX path: the CPU has the instructions (`feature`: amx_bf16 or
// amx_int8), the OS granted the tile state, SINKLAB_NO_AMX is unset, and the kernel's own
// self-check against its AVX-512 path passed (run only when the rest holds).
template <class SelfCheck>
bool amx_usable(bool feature, SelfCheck&& self_check) {
  return feature && cpu_features().amx_permitted && !amx_disabled_by_env() && self_check();
}

namespace detail::amx {

constexpr int64_t kRows = 16, kRowBytes = 64;  // every tile register: 16 rows × 64 bytes

// ldtilecfg's 64-byte operand: palette 1, tiles 0–7 at 16 × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {kRowBytes, kRowBytes, kRowBytes, kRowBytes, kRowBytes, kRowBytes, kRowBytes, kRowBytes};
  uint8_t rows[16] = {kRows, kRows, kRows, kRows, kRows, kRows, kRows, kRows};
};
static_assert(sizeof(TileConfig) == 64);

#if defined(SINKLAB_CPUID)
// Each instruction as its bytes (so any assembler takes them, AMX-aware or not: binutils before 2.36
// is not), with the memory operands in fixed registers: base in rax, stride in rdx. Checked
// against GNU as 2.40's encodings of the mnemonics; objdump shows them as the instructions.
struct HardwareTiles {
  void configure() {
    static const TileConfig cfg{};
    asm volatile(".byte 0xc4, 0xe2, 0x78, 0x49, 0x00" ::"a"(&cfg) : "memory");  // ldtilecfg (%rax)
  }
  void release() { asm volatile(".byte 0xc4, 0xe2, 0x78, 0x49, 0xc0" ::: "memory"); }  // tilerelease
  template <int t>
  void zero() {
    asm volatile(".byte 0xc4, 0xe2, 0x7b, 0x49, %c0" ::"n"(0xc0 | t << 3));  // tilezero %tmm<t>
  }
  template <int t>
  void load(const void* base, int64_t stride) {  // tileloadd (%rax,%rdx,1), %tmm<t>
    asm volatile(".byte 0xc4, 0xe2, 0x7b, 0x4b, %c2, 0x10" ::"a"(base), "d"(stride), "n"(0x04 | t << 3) : "memory");
  }
  template <int t>
  void store(void* base, int64_t stride) {  // tilestored %tmm<t>, (%rax,%rdx,1)
    asm volatile(".byte 0xc4, 0xe2, 0x7a, 0x4b, %c2, 0x10" ::"a"(base), "d"(stride), "n"(0x04 | t << 3) : "memory");
  }
  template <int c, int a, int b>
  void dpbf16() {  // tdpbf16ps %tmm<b>, %tmm<a>, %tmm<c>: VEX.vvvv names b (inverted), ModRM reg c, rm a
    asm volatile(".byte 0xc4, 0xe2, %c0, 0x5c, %c1" ::"n"((~b & 15) << 3 | 0x02), "n"(0xc0 | c << 3 | a));
  }
  template <int c, int a, int b>
  void dpbusd() {  // tdpbusd %tmm<b>, %tmm<a>, %tmm<c>
    asm volatile(".byte 0xc4, 0xe2, %c0, 0x5e, %c1" ::"n"((~b & 15) << 3 | 0x01), "n"(0xc0 | c << 3 | a));
  }
};
#else
struct HardwareTiles;  // the GEMMs' default tile unit; their AMX paths exist only on x86-64
#endif

// Configures the tile unit for as long as it lives (an exception included): the code inside may
// not call anything that configures or releases the tiles itself.
template <class Tiles>
struct TileScope {
  explicit TileScope(Tiles& t) : tiles(t) { tiles.configure(); }
  ~TileScope() { tiles.release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
  Tiles& tiles;
};

// One tile unit per thread, as in the hardware: a nested kernel's release() unconfigures its
// caller's tiles here too, so the tests see that mistake.
class EmulatedTiles {
 public:
  void configure() { unit().configured = true; }
  void release() { unit().configured = false; }
  template <int t>
  void zero() {
    std::memset(reg(t), 0, kRows * kRowBytes);
  }
  template <int t>
  void load(const void* base, int64_t stride) {
    for (int64_t r = 0; r < kRows; ++r)
      std::memcpy(reg(t) + r * kRowBytes, static_cast<const unsigned char*>(base) + r * stride, kRowBytes);
  }
  template <int t>
  void store(void* base, int64_t stride) {
    for (int64_t r = 0; r < kRows; ++r)
      std::memcpy(static_cast<unsigned char*>(base) + r * stride, reg(t) + r * kRowBytes, kRowBytes);
  }
  template <int c, int a, int b>
  void dpbf16() {
    for (int64_t m = 0; m < kRows; ++m)
      for (int64_t n = 0; n < kRowBytes / 4; ++n) {
        float even = 0, odd = 0;  // the SDM's two partial sums per element, each fused multiply-adds
        for (int64_t k = 0; k < kRowBytes / 4; ++k) {
          even = flush(std::fma(input(get<uint16_t>(a, m, 2 * k)), input(get<uint16_t>(b, k, 2 * n)), even));
          odd = flush(std::fma(input(get<uint16_t>(a, m, 2 * k + 1)), input(get<uint16_t>(b, k, 2 * n + 1)), odd));
        }
        set(c, m, n, flush(get<float>(c, m, n) + flush(even + odd)));
      }
  }
  template <int c, int a, int b>
  void dpbusd() {
    for (int64_t m = 0; m < kRows; ++m)
      for (int64_t k = 0; k < kRowBytes / 4; ++k)
        for (int64_t n = 0; n < kRowBytes / 4; ++n) {
          uint32_t s = static_cast<uint32_t>(get<int32_t>(c, m, n));
          for (int64_t e = 0; e < 4; ++e)
            s += static_cast<uint32_t>(int32_t{get<uint8_t>(a, m, 4 * k + e)} * int32_t{get<int8_t>(b, k, 4 * n + e)});
          set(c, m, n, static_cast<int32_t>(s));
        }
  }

 private:
  struct Unit {
    bool configured = false;
    alignas(64) unsigned char reg[8][kRows * kRowBytes] = {};
  };
  static Unit& unit() {
    thread_local Unit u;
    return u;
  }
  static unsigned char* reg(int t) {
    SINKLAB_CHECK(unit().configured, "amx::EmulatedTiles: a tile instruction while the tiles are not configured",
                  " (the hardware would fault)");
    return unit().reg[t];
  }
  template <class E>
  static E get(int t, int64_t row, int64_t i) {
    E e;
    std::memcpy(&e, reg(t) + row * kRowBytes + i * int64_t{sizeof(E)}, sizeof(E));
    return e;
  }
  template <class E>
  static void set(int t, int64_t row, int64_t i, E e) {
    std::memcpy(reg(t) + row * kRowBytes + i * int64_t{sizeof(E)}, &e, sizeof(E));
  }
  static float input(uint16_t h) {  // bf16 → fp32, denormals read as zero
    const uint32_t u = (h & 0x7f80u) == 0 ? uint32_t{h & 0x8000u} << 16 : uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static float flush(float f) {  // denormal results become zero of the same sign
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// acc[32][32] (fp32 for bf16, int32 for int8; rows 128 bytes apart) = the sum over `steps` k steps
// of A · B: A's 32 rows `a_stride` bytes apart, each k step 64 bytes further along them; B's k
// step is 16 rows `b_stride` bytes apart starting 16·b_stride bytes after the previous one, its
// second 16 columns `half` bytes after the first.
template <bool Int8, class Tiles>
inline void product_32x32(Tiles& t, int64_t steps, const unsigned char* a, int64_t a_stride, const unsigned char* b,
                          int64_t b_stride, int64_t half, void* acc) {
  t.template zero<0>(), t.template zero<1>(), t.template zero<2>(), t.template zero<3>();
  for (int64_t s = 0; s < steps; ++s) {
    const unsigned char* as = a + s * kRowBytes;
    const unsigned char* bs = b + s * kRows * b_stride;
    t.template load<4>(as, a_stride);
    t.template load<5>(as + kRows * a_stride, a_stride);
    t.template load<6>(bs, b_stride);
    t.template load<7>(bs + half, b_stride);
    if constexpr (Int8) {
      t.template dpbusd<0, 4, 6>(), t.template dpbusd<1, 4, 7>();
      t.template dpbusd<2, 5, 6>(), t.template dpbusd<3, 5, 7>();
    } else {
      t.template dpbf16<0, 4, 6>(), t.template dpbf16<1, 4, 7>();
      t.template dpbf16<2, 5, 6>(), t.template dpbf16<3, 5, 7>();
    }
  }
  auto* out = static_cast<unsigned char*>(acc);
  constexpr int64_t ld = 32 * 4;
  t.template store<0>(out, ld);
  t.template store<1>(out + kRowBytes, ld);
  t.template store<2>(out + kRows * ld, ld);
  t.template store<3>(out + kRows * ld + kRowBytes, ld);
}

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace detail::amx

}  // namespace sinklab::kernels::cpu
