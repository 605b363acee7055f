// Integer GEMM of W8A8 inference: asymmetric uint8 activations against symmetric int8 weights,
//
//   C[i, j] = scale · Σ_k (A[i, k] − za) · B[k, j]          (or the int32 sum itself)
//
// A uint8 [M, K] row-major with zero point za, B int8 [K, N] row-major, packed once per weight
// (PackedS8). The sum is exact in int32: |(a − za)·b| ≤ 255·128, so K ≤ 65,536 terms cannot
// overflow; the float result is that integer times `scale` (s_A·s_B), rounded once. That is
// what fake quantization (quant/uniform.hpp) computes in real arithmetic, so the two agree up to
// the float rounding of the fake-quantized products, and the accumulators agree exactly.
//
// Paths, chosen once per process (cpu_features()):
//  - AMX-INT8: tdpbusd, 16 quadruples of k into a 16 × 16 int32 tile per instruction, run by the
//    loop of amx.hpp on the VNNI path's operands padded to whole tiles (A: rows to 32, quadruples
//    to 16; B's quad panels: quadruples to 16 rows), the zero point and scale applied by the
//    VNNI path's epilogue. Not yet run on AMX hardware (the project's machine has none): tested
//    through amx.hpp's model of the tile unit, and checked once per process to give the VNNI
//    path's integers before Auto takes it (s8_amx_available()).
//  - AVX512-VNNI: vpdpbusd, 64 multiply-adds of uint8 × int8 into 16 int32 lanes per
//    instruction. Rows of A are read as uint32 words of four consecutive k (as stored, no zero
//    point), broadcast to a register; B is packed into panels of NQ = 64 columns, each quadruple
//    of k one 256-byte row [b(4p..4p+3, j)] for j < 64; a 4 × 64 tile of C stays in 16 registers
//    (with 6 rows GCC spilled the 24 accumulators); 395–430 GOP/s on one Zen 4 core, 85–92% of
//    the instruction's peak. The whole K runs in one pass per tile: blocking k so a panel's slice
//    stays in L1 measured 5–10% slower (the partial sums' trips to memory cost more than reading
//    B from L2).
//    The zero point comes off at the end through B's column sums: Σ (a − za)·b = Σ a·b − za·Σ b.
//    Every partial sum stays below 255·128·65,536 < 2³¹, so nothing overflows for K ≤ kMaxK.
//  - AVX2: vpmaddwd on pairs of k. op(A) − za is packed into int16 pairs, one 32-bit word per row
//    and pair of k, broadcast to a register; B into panels of NR = 16 columns, each pair of k one
//    64-byte row [b(2p, j), b(2p+1, j)] for j < 16. A 6 × 16 tile of C stays in 12 registers.
//    Exact but not faster than the fp32 GEMM: vpmaddwd does 16 multiply-adds into 8 lanes and
//    needs a separate add to accumulate, 8 per instruction like an fp32 FMA (vpmaddubsw would do
//    more, but its int16 sums saturate on uint8 × int8).
//  - elsewhere, the pairs summed by plain loops (identical integers).
// The AVX512-VNNI and AVX2 kernels carry function-level target attributes, so a program built
// without -march=native still has them (AMX needs no target: its instructions are asm statements).
//
// Hand-written because no library on this platform's list has a u8·s8 GEMM (Eigen's integer
// products widen to int32 before multiplying and do not vectorise them; OpenBLAS has none).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "sinklab/core/config.hpp"
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/storage.hpp"
#include "sinklab/kernels/cpu/amx.hpp"
#include "sinklab/kernels/cpu/row_tiles.hpp"

#if defined(SINKLAB_CPUID)
#include <immintrin.h>
#endif

namespace sinklab::kernels::cpu {

// Amx: tdpbusd tiles (on gemm_u8s8's tile unit); Vnni: vpdpbusd; Avx2: vpmaddwd; Scalar: plain loops.
enum class S8Path { Auto, Amx, Vnni, Avx2, Scalar };

inline bool s8_avx2_available() { return cpu_features().avx2; }
inline bool s8_vnni_available() { return cpu_features().avx512_vnni; }

namespace detail::s8 {
constexpr int64_t MR = 6, NR = 16, NQ = 64, MRQ = 4;
constexpr int64_t kMaxK = 65536;  // beyond this an int32 sum of (a − za)·b could overflow
}  // namespace detail::s8

// B [K, N] int8 as the kernels read it, in both packings (a weight is packed once; the path is
// chosen per call): panels of NR columns, each pair of k one row of NR int16 pairs, zero-padded
// to an even K and a whole panel; and panels of NQ columns, each quadruple of k one row of NQ
// int8 quadruples, zero-padded to a multiple of 4, to whole AMX tiles (16 quadruples) and a whole
// panel, with the column sums Σ_k b.
struct PackedS8 {
  int64_t K = 0, N = 0;
  std::shared_ptr<int16_t[]> data;
  std::shared_ptr<int8_t[]> quads;
  std::shared_ptr<int32_t[]> colsum;  // [quad_panels() · NQ]

  int64_t pairs() const { return (K + 1) / 2; }
  int64_t panels() const { return (N + detail::s8::NR - 1) / detail::s8::NR; }
  const int16_t* panel(int64_t p) const { return data.get() + p * pairs() * detail::s8::NR * 2; }
  int64_t quadruples() const { return (K + 3) / 4; }
  int64_t quad_rows() const { return (quadruples() + 15) / 16 * 16; }
  int64_t quad_panels() const { return (N + detail::s8::NQ - 1) / detail::s8::NQ; }
  const int8_t* quad_panel(int64_t p) const { return quads.get() + p * quad_rows() * detail::s8::NQ * 4; }
};

inline PackedS8 pack_s8(const int8_t* B, int64_t ldb, int64_t K, int64_t N) {
  using namespace detail::s8;
  SINKLAB_CHECK(K >= 1 && N >= 1 && ldb >= N, "kernels::cpu::pack_s8: expected K, N >= 1 and ldb >= N, got K = ", K,
                ", N = ", N, ", ldb = ", ldb);
  SINKLAB_CHECK(K <= kMaxK, "kernels::cpu::pack_s8: K = ", K, " exceeds ", kMaxK,
                ", beyond which an int32 accumulator could overflow");
  PackedS8 p;
  p.K = K, p.N = N;
  const std::size_t n = static_cast<std::size_t>(p.panels() * p.pairs() * NR * 2);
  p.data = allocate_host<int16_t>(n);
  std::memset(p.data.get(), 0, n * sizeof(int16_t));
  for (int64_t q = 0; q < p.panels(); ++q) {
    int16_t* panel = p.data.get() + q * p.pairs() * NR * 2;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < NR && q * NR + j < N; ++j)
        panel[(k / 2) * NR * 2 + 2 * j + (k & 1)] = B[k * ldb + q * NR + j];
  }
  const std::size_t nq = static_cast<std::size_t>(p.quad_panels() * p.quad_rows() * NQ * 4);
  p.quads = allocate_host<int8_t>(nq);
  std::memset(p.quads.get(), 0, nq);
  p.colsum = allocate_host<int32_t>(static_cast<std::size_t>(p.quad_panels() * NQ));
  std::memset(p.colsum.get(), 0, static_cast<std::size_t>(p.quad_panels() * NQ) * sizeof(int32_t));
  for (int64_t q = 0; q < p.quad_panels(); ++q) {
    int8_t* panel = p.quads.get() + q * p.quad_rows() * NQ * 4;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < NQ && q * NQ + j < N; ++j) {
        const int8_t b = B[k * ldb + q * NQ + j];
        panel[(k / 4) * NQ * 4 + 4 * j + (k & 3)] = b;
        p.colsum[q * NQ + j] += b;
      }
  }
  return p;
}

namespace detail::s8 {

// Rows [i0, i0 + m) of A, minus the zero point, as one int32 word per row and pair of k (low half:
// even k); an odd K's last pair has 0 in its high half.
inline void pack_a(const uint8_t* A, int64_t lda, int32_t za, int64_t i0, int64_t m, int64_t K, uint32_t* Ap) {
  const int64_t kp = (K + 1) / 2;
  for (int64_t i = 0; i < m; ++i) {
    const uint8_t* a = A + (i0 + i) * lda;
    for (int64_t p = 0; p < kp; ++p) {
      const auto lo = static_cast<uint16_t>(static_cast<int16_t>(int32_t{a[2 * p]} - za));
      const auto hi = 2 * p + 1 < K ? static_cast<uint16_t>(static_cast<int16_t>(int32_t{a[2 * p + 1]} - za)) : uint16_t{0};
      Ap[i * kp + p] = uint32_t{lo} | (uint32_t{hi} << 16);
    }
  }
}

// Rows [i0, i0 + m) of A as they are, one uint32 word per row and quadruple of k (byte t: k = 4p + t),
// rows `ld` ≥ ⌈K/4⌉ words apart; the bytes past K are zeros (B's padding is zero too).
inline void pack_a_quads(const uint8_t* A, int64_t lda, int64_t i0, int64_t m, int64_t K, uint32_t* Ap, int64_t ld) {
  for (int64_t i = 0; i < m; ++i) {
    const uint8_t* a = A + (i0 + i) * lda;
    std::memcpy(Ap + i * ld, a, static_cast<std::size_t>(K));
    std::memset(reinterpret_cast<uint8_t*>(Ap + i * ld) + K, 0, static_cast<std::size_t>(4 * ld - K));
  }
}

// The int32 sums of one tile leave through here: as they are, or times `scale` as floats.
struct Out {
  int32_t* i32 = nullptr;
  float* f32 = nullptr;
  int64_t ld = 0;
  float scale = 1.f;
  void put(int64_t r, int64_t c, int32_t v) const {
    if (i32) i32[r * ld + c] = v;
    else f32[r * ld + c] = static_cast<float>(static_cast<double>(v) * static_cast<double>(scale));
  }
};

// The portable path: the same packed operands, summed one column at a time.
inline void block_scalar(int64_t m, int64_t kp, const uint32_t* Ap, const PackedS8& B, const Out& out, int64_t r0) {
  for (int64_t q = 0; q < B.panels(); ++q) {
    const int16_t* panel = B.panel(q);
    const int64_t ncols = std::min(NR, B.N - q * NR);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ncols; ++j) {
        int32_t acc = 0;
        for (int64_t p = 0; p < kp; ++p) {
          const uint32_t w = Ap[i * kp + p];
          const auto a0 = static_cast<int16_t>(w & 0xffffu), a1 = static_cast<int16_t>(w >> 16);
          acc += int32_t{a0} * panel[p * NR * 2 + 2 * j] + int32_t{a1} * panel[p * NR * 2 + 2 * j + 1];
        }
        out.put(r0 + i, q * NR + j, acc);
      }
  }
}

#if defined(SINKLAB_CPUID)
#define SINKLAB_TARGET_AVX2 __attribute__((target("avx2")))

template <int R>
SINKLAB_TARGET_AVX2 void tile_avx2(int64_t kp, const uint32_t* Ap, const int16_t* Bp, const Out& out, int64_t r0,
                                   int64_t c0, int64_t ncols) {
  __m256i acc[R][2];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < kp; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp + p * NR * 2));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp + p * NR * 2 + 16));
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m256i a = _mm256_set1_epi32(static_cast<int>(Ap[r * kp + p]));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(a, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(a, b1));
    }
  }
  alignas(32) int32_t lanes[NR];
  for (int r = 0; r < R; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 8), acc[r][1]);
    for (int64_t j = 0; j < ncols; ++j) out.put(r0 + r, c0 + j, lanes[j]);
  }
}

SINKLAB_TARGET_AVX2 inline void block_avx2(int64_t m, int64_t kp, const uint32_t* Ap, const PackedS8& B, const Out& out,
                                           int64_t r0) {
  for (int64_t q = 0; q < B.panels(); ++q) {
    const int16_t* panel = B.panel(q);
    const int64_t ncols = std::min(NR, B.N - q * NR), c0 = q * NR;
    int64_t i = 0;
    for (; i + MR <= m; i += MR) tile_avx2<MR>(kp, Ap + i * kp, panel, out, r0 + i, c0, ncols);
    const uint32_t* a = Ap + i * kp;
    switch (m - i) {
      case 5: tile_avx2<5>(kp, a, panel, out, r0 + i, c0, ncols); break;
      case 4: tile_avx2<4>(kp, a, panel, out, r0 + i, c0, ncols); break;
      case 3: tile_avx2<3>(kp, a, panel, out, r0 + i, c0, ncols); break;
      case 2: tile_avx2<2>(kp, a, panel, out, r0 + i, c0, ncols); break;
      case 1: tile_avx2<1>(kp, a, panel, out, r0 + i, c0, ncols); break;
      default: break;
    }
  }
}
#undef SINKLAB_TARGET_AVX2

#define SINKLAB_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

// acc + the 4-byte dot products of a (uint8) and b (int8) in each lane. In asm because GCC 12,
// given the intrinsic, copies the tile's 16 accumulators to other registers (and one through the
// stack) on every k and folds each B load into all four of its uses: 320 GOP/s on a Zen 4 core
// instead of 395–430.
SINKLAB_TARGET_VNNI inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// Columns [c, c + min(left, 16)) of row r of C from 16 raw sums Σ a·b: Σ a·b − za·Σ b in wrapping
// 32-bit arithmetic (the result fits int32 even where a term alone might not); floats leave as
// Out::put writes them, the int32 times the scale in double, rounded once.
SINKLAB_TARGET_VNNI inline void emit16(__m512i acc, const int32_t* colsum, int32_t za, const Out& out, int64_t r,
                                       int64_t c, int64_t left) {
  const __mmask16 keep = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
  const __m512i sum = _mm512_sub_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(za), _mm512_loadu_si512(colsum)));
  const int64_t at = r * out.ld + c;
  if (out.i32) {
    _mm512_mask_storeu_epi32(out.i32 + at, keep, sum);
    return;
  }
  const __m512d scale = _mm512_set1_pd(static_cast<double>(out.scale));
  const __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(sum)), scale));
  const __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(sum, 1)), scale));
  const __m512d both = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1);
  _mm512_mask_storeu_ps(out.f32 + at, keep, _mm512_castpd_ps(both));
}

template <int R>
SINKLAB_TARGET_VNNI void tile_vnni(int64_t kq, const uint32_t* Ap, const int8_t* Bq, const int32_t* colsum, int32_t za,
                                   const Out& out, int64_t r0, int64_t c0, int64_t ncols) {
  __m512i acc[R][4];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_si512();
  for (int64_t p = 0; p < kq; ++p) {
    const int8_t* b = Bq + p * NQ * 4;
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64), b2 = _mm512_loadu_si512(b + 128),
                  b3 = _mm512_loadu_si512(b + 192);
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(Ap[r * kq + p]));
      acc[r][0] = dpbusd(acc[r][0], a, b0);
      acc[r][1] = dpbusd(acc[r][1], a, b1);
      acc[r][2] = dpbusd(acc[r][2], a, b2);
      acc[r][3] = dpbusd(acc[r][3], a, b3);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4 && 16 * v < ncols; ++v)
      emit16(acc[r][v], colsum + 16 * v, za, out, r0 + r, c0 + 16 * v, ncols - 16 * v);
}

SINKLAB_TARGET_VNNI inline void block_vnni(int64_t m, int64_t kq, const uint32_t* Ap, const PackedS8& B, int32_t za,
                                           const Out& out, int64_t r0) {
  for (int64_t q = 0; q < B.quad_panels(); ++q) {
    const int8_t* panel = B.quad_panel(q);
    const int32_t* colsum = B.colsum.get() + q * NQ;
    const int64_t ncols = std::min(NQ, B.N - q * NQ), c0 = q * NQ;
    int64_t i = 0;
    for (; i + MRQ <= m; i += MRQ) tile_vnni<MRQ>(kq, Ap + i * kq, panel, colsum, za, out, r0 + i, c0, ncols);
    const uint32_t* a = Ap + i * kq;
    switch (m - i) {
      case 3: tile_vnni<3>(kq, a, panel, colsum, za, out, r0 + i, c0, ncols); break;
      case 2: tile_vnni<2>(kq, a, panel, colsum, za, out, r0 + i, c0, ncols); break;
      case 1: tile_vnni<1>(kq, a, panel, colsum, za, out, r0 + i, c0, ncols); break;
      default: break;
    }
  }
}

// The AMX path: m rows of A's quadruples (rows `ld` words apart, ld a multiple of 16, zero rows up
// to a multiple of 32) against every quad panel, 32 rows × 32 columns per product_32x32 (amx.hpp);
// the sums leave through a 32 × 32 scratch to the VNNI path's epilogue.
template <class Tiles>
SINKLAB_TARGET_VNNI void block_amx(Tiles& t, int64_t m, int64_t ld, const uint32_t* Ap, const PackedS8& B, int32_t za,
                                   const Out& out, int64_t r0) {
  const amx::TileScope<Tiles> scope(t);
  alignas(64) int32_t acc[32 * 32];
  const auto* a = reinterpret_cast<const unsigned char*>(Ap);
  for (int64_t q = 0; q < B.quad_panels(); ++q) {
    const auto* panel = reinterpret_cast<const unsigned char*>(B.quad_panel(q));
    const int32_t* colsum = B.colsum.get() + q * NQ;
    const int64_t ncols = std::min(NQ, B.N - q * NQ);
    for (int64_t i = 0; i < m; i += 32)
      for (int64_t h = 0; h < ncols; h += 32) {  // a quad-row of the panel is NQ·4 bytes
        amx::product_32x32<true>(t, ld / 16, a + i * ld * 4, ld * 4, panel + h * 4, NQ * 4, 16 * 4, acc);
        for (int64_t r = 0; r < std::min<int64_t>(32, m - i); ++r)
          for (int64_t v = 0; v < 2 && h + 16 * v < ncols; ++v)
            emit16(_mm512_load_si512(acc + r * 32 + 16 * v), colsum + h + 16 * v, za, out, r0 + i + r,
                   q * NQ + h + 16 * v, ncols - h - 16 * v);
      }
  }
}
#undef SINKLAB_TARGET_VNNI
#endif

template <class Tiles = amx::HardwareTiles>
void run(int64_t M, const uint8_t* A, int64_t lda, int32_t za, const PackedS8& B, const Out& out, S8Path path);

#if defined(SINKLAB_CPUID)
// Whether the AMX path gives the VNNI path's integers on a product with edges in every dimension
// and the zero point in use; says why on stderr if not.
inline bool amx_self_check() {
  const int64_t M = 45, N = 83, K = 300;
  std::vector<uint8_t> a(static_cast<std::size_t>(M * K));
  std::vector<int8_t> b(static_cast<std::size_t>(K * N));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((i * 7919) % 256);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(int((i * 104729) % 256) - 128);
  const PackedS8 packed = pack_s8(b.data(), N, K, N);
  std::vector<int32_t> amx_c(static_cast<std::size_t>(M * N)), vnni_c(amx_c.size());
  Out o;
  o.i32 = amx_c.data(), o.ld = N;
  run(M, a.data(), K, 77, packed, o, S8Path::Amx);
  o.i32 = vnni_c.data();
  run(M, a.data(), K, 77, packed, o, S8Path::Vnni);
  for (std::size_t i = 0; i < amx_c.size(); ++i)
    if (amx_c[i] != vnni_c[i]) {
      std::fprintf(stderr,
                   "sinklab: the AMX int8 GEMM gave %d where the AVX512-VNNI path gives %d (element %zu of a 45 x 83 "
                   "x 300 self-check); int8 products use AVX512-VNNI in this process. Please report this with the "
                   "CPU's model.\n",
                   amx_c[i], vnni_c[i], i);
      return false;
    }
  return true;
}
#endif

}  // namespace detail::s8

// Whether Auto takes AMX (amx_usable, once per process; its epilogue is AVX512-VNNI code).
inline bool s8_amx_available() {
#if defined(SINKLAB_CPUID)
  static const bool ok =
      amx_usable(cpu_features().amx_int8 && s8_vnni_available(), [] { return detail::s8::amx_self_check(); });
  return ok;
#else
  return false;
#endif
}

namespace detail::s8 {

// The AMX path runs on Tiles: the hardware, or amx::EmulatedTiles in tests (see gemm_bf16).
template <class Tiles>
void run(int64_t M, const uint8_t* A, int64_t lda, int32_t za, const PackedS8& B, const Out& out, S8Path path) {
  SINKLAB_CHECK(B.data && M >= 0 && lda >= B.K, "kernels::cpu::gemm_u8s8: expected a packed B and lda >= K = ", B.K,
                ", got lda = ", lda);
  SINKLAB_CHECK(za >= 0 && za <= 255, "kernels::cpu::gemm_u8s8: zero point ", za, " is outside [0, 255]");
  if (path == S8Path::Auto)
    path = s8_amx_available()    ? S8Path::Amx
           : s8_vnni_available() ? S8Path::Vnni
           : s8_avx2_available() ? S8Path::Avx2
                                 : S8Path::Scalar;
  const bool amx = path == S8Path::Amx;
  if constexpr (std::is_same_v<Tiles, amx::HardwareTiles>)
    SINKLAB_CHECK(!amx || (cpu_features().amx_int8 && cpu_features().amx_permitted),
                  "kernels::cpu::gemm_u8s8: the AMX path was asked for, but this CPU and OS (",
                  cpu_features().summary(), ") do not offer AMX-INT8");
  SINKLAB_CHECK(!(amx || path == S8Path::Vnni) || s8_vnni_available(), "kernels::cpu::gemm_u8s8: the ",
                amx ? "AMX path (whose epilogue is AVX512-VNNI code)" : "AVX512-VNNI path",
                " was asked for, but this CPU (", cpu_features().summary(), ") does not have AVX512-VNNI");
  SINKLAB_CHECK(path != S8Path::Avx2 || s8_avx2_available(),
                "kernels::cpu::gemm_u8s8: the AVX2 path was asked for, but this CPU (", cpu_features().summary(),
                ") does not have it");
  if (M == 0) return;
  const int64_t kp = B.pairs(), ld = amx ? B.quad_rows() : B.quadruples();
  // Shrinking tiles of rows (row_tiles.hpp), as the float GEMMs split theirs: equal blocks left a
  // thread idle for half a block per product. Each tile goes in blocks of at most `rows`, whose
  // packed A stays in L2 over all panels.
  const int threads = in_parallel_region() ? 1 : num_threads();
  const int64_t unit = amx ? 32 : path == S8Path::Vnni ? MRQ : MR, rows = 32 * MR;  // a multiple of each unit
  const RowTiles tiles_of_c(M, threads, unit);
  const int64_t* starts = tiles_of_c.starts;
  parallel_for(0, tiles_of_c.count, 1, [&](int64_t t0, int64_t t1) {
    std::shared_ptr<uint32_t[]> Ap = allocate_host<uint32_t>(static_cast<std::size_t>(rows * std::max(kp, ld)));
#if defined(SINKLAB_CPUID)
    Tiles tiles{};  // configured by block_amx for each block, on the AMX path only
#endif
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t i0 = starts[t]; i0 < starts[t + 1]; i0 += rows) {
        const int64_t m = std::min(rows, starts[t + 1] - i0);
#if defined(SINKLAB_CPUID)
        if (amx) {
          pack_a_quads(A, lda, i0, m, B.K, Ap.get(), ld);
          std::fill(Ap.get() + m * ld, Ap.get() + amx::round_up(m, 32) * ld, 0u);  // whole 16-row tiles
          block_amx(tiles, m, ld, Ap.get(), B, za, out, i0);
          continue;
        }
        if (path == S8Path::Vnni) {
          pack_a_quads(A, lda, i0, m, B.K, Ap.get(), ld);
          block_vnni(m, ld, Ap.get(), B, za, out, i0);
          continue;
        }
#endif
        pack_a(A, lda, za, i0, m, B.K, Ap.get());
#if defined(SINKLAB_CPUID)
        if (path == S8Path::Avx2) {
          block_avx2(m, kp, Ap.get(), B, out, i0);
          continue;
        }
#endif
        block_scalar(m, kp, Ap.get(), B, out, i0);
      }
  });
}

}  // namespace detail::s8

// C[i, j] = Σ_k (A[i, k] − za) · B[k, j], exactly, as int32. `Tiles`: the AMX path's tile unit
// (amx::EmulatedTiles in tests on a CPU without AMX).
template <class Tiles = detail::amx::HardwareTiles>
void gemm_u8s8_i32(int64_t M, const uint8_t* A, int64_t lda, int32_t za, const PackedS8& B, int32_t* C, int64_t ldc,
                   S8Path path = S8Path::Auto) {
  SINKLAB_CHECK(ldc >= B.N, "kernels::cpu::gemm_u8s8_i32: ldc ", ldc, " < N = ", B.N);
  detail::s8::Out out;
  out.i32 = C, out.ld = ldc;
  detail::s8::run<Tiles>(M, A, lda, za, B, out, path);
}

// C[i, j] = scale · Σ_k (A[i, k] − za) · B[k, j] as floats (scale = s_A · s_B).
template <class Tiles = detail::amx::HardwareTiles>
void gemm_u8s8(int64_t M, const uint8_t* A, int64_t lda, int32_t za, const PackedS8& B, float scale, float* C,
               int64_t ldc, S8Path path = S8Path::Auto) {
  SINKLAB_CHECK(ldc >= B.N, "kernels::cpu::gemm_u8s8: ldc ", ldc, " < N = ", B.N);
  detail::s8::Out out;
  out.f32 = C, out.ld = ldc, out.scale = scale;
  detail::s8::run<Tiles>(M, A, lda, za, B, out, path);
}

}  // namespace sinklab::kernels::cpu
