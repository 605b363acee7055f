// The warp matrix instructions of kernels/simt_mma.hpp as small kernel bodies over a SIMT
// context, with their inputs and the PTX ISA's fragment tables written out here independently of
// the header: test_simt_mma runs the bodies on the emulator against the tables, and
// tests/cuda/test_cuda_mma runs the same bodies on a GPU against the tables and the emulator
// (whose results tests/cuda/mma_cases_cpu.cpp computes: nvcc builds leave the emulator out).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sinklab/kernels/simt_mma.hpp"

namespace mma_cases {

using namespace sinklab;

// ---------------------------------------------------------------- ldmatrix

// Shared memory of the ldmatrix case: kSlots rows of 8 distinct 16-bit codes.
inline constexpr int kSlots = 64;
inline constexpr std::size_t kLdmatrixShared = kSlots * 16;

// Distinct codes with every bit in use (an odd multiplier is a bijection mod 2^16), so a half
// taken from the wrong column, row or register never passes for the right one.
SINKLAB_HD inline uint16_t code(int slot, int col) {
  return static_cast<uint16_t>(static_cast<uint32_t>(slot * 8 + col) * 40503u + 0x1234u);
}
// The row lane l addresses: a permutation (13 is odd, so l ↦ 13l + 5 is one on 0 … 63), so no
// matrix row sits where consecutive addresses would put it.
SINKLAB_HD inline int slot_of(int lane) { return (lane * 13 + 5) % kSlots; }

// Every lane gives a row address, and out[l · N + i] receives lane l's r[i]. Lanes 8N and up
// give rows of their own, which ldmatrix must ignore; with `misaligned_ignored` those lanes give
// misaligned addresses instead (the emulator must not even check them; a GPU of sm_75 or older
// would need valid ones, so the device test keeps them valid).
template <int N, bool Trans, class Ctx>
SINKLAB_HD void ldmatrix_case(Ctx& ctx, uint32_t* out, bool misaligned_ignored) {
  uint16_t* sh = ctx.template shared<uint16_t>();
  for (int64_t e = ctx.thread(); e < kSlots * 8; e += ctx.threads()) sh[e] = code(static_cast<int>(e / 8), static_cast<int>(e % 8));
  ctx.sync();
  const int l = ctx.lane();
  const void* row = sh + 8 * slot_of(l);
  if (misaligned_ignored && l >= 8 * N) row = reinterpret_cast<const unsigned char*>(sh) + 2 * l + 1;
  uint32_t r[N];
  simt::ldmatrix<N, Trans>(ctx, r, row);
  for (int i = 0; i < N; ++i) out[l * N + i] = r[i];
}

// The registers the PTX ISA gives (ldmatrix, "fragment layout"): row r of matrix i is the 16
// bytes lane 8i + r addresses, and thread l holds elements (l/4, 2(l%4)) and (l/4, 2(l%4) + 1)
// of each matrix, of its transpose with .trans, the lower column in the low half. Written as a
// scatter of every matrix element to its holder, the inverse of the header's gather.
inline std::vector<uint32_t> ldmatrix_expected(int n, bool trans) {
  std::vector<uint32_t> r(static_cast<std::size_t>(32 * n), 0);
  for (int i = 0; i < n; ++i)
    for (int row = 0; row < 8; ++row)
      for (int col = 0; col < 8; ++col) {
        const int fr = trans ? col : row, fc = trans ? row : col;  // its place in the fragment
        r[static_cast<std::size_t>((4 * fr + fc / 2) * n + i)] |= uint32_t{code(slot_of(8 * i + row), col)} << (16 * (fc % 2));
      }
  return r;
}

// The index of the first element where a and b differ, or -1.
template <class T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(a.size());
}

// ---------------------------------------------------------------- mma.m16n8k16

// A 16×16 (row-major), B 16×8 (row-major [k][n]) as codes of E, C 16×8 floats.
struct Operands {
  std::vector<uint16_t> a, b;
  std::vector<float> c;
};

template <class E>
Operands random_operands(uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Operands o{std::vector<uint16_t>(256), std::vector<uint16_t>(128), std::vector<float>(128)};
  for (auto& x : o.a) x = E::from_float(normal(gen));
  for (auto& x : o.b) x = E::from_float(normal(gen));
  for (auto& x : o.c) x = normal(gen);
  return o;
}

// A·B + C in double: every product of two 16-bit floats is exact, so the emulator's one rounding
// to float is all that separates it from this.
template <class E>
std::vector<double> reference(const Operands& o) {
  std::vector<double> d(128);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double s = o.c[m * 8 + n];
      for (int k = 0; k < 16; ++k) s += double(E::to_float(o.a[m * 16 + k])) * double(E::to_float(o.b[k * 8 + n]));
      d[m * 8 + n] = s;
    }
  return d;
}

// The fragments of mma.m16n8k16 with .f16/.bf16 operands and .f32 accumulators, in the PTX ISA's
// words (groupID g = lane >> 2, threadID_in_group t = lane % 4; element i of a fragment is half
// i % 2 of register i / 2):
//   A a0 … a7: row g for 0 ≤ i < 2 or 4 ≤ i < 6, else g + 8; column 2t + (i & 1), + 8 for i ≥ 4
//   B b0 … b3: row 2t + (i & 1), + 8 for i ≥ 2; column g
//   C c0 … c3: row g for i < 2, else g + 8; column 2t + (i & 1)
inline std::vector<uint32_t> a_fragments(const std::vector<uint16_t>& a) {
  std::vector<uint32_t> f(32 * 4, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const int g = lane >> 2, t = lane % 4;
      const int row = (i < 2 || (4 <= i && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      f[lane * 4 + i / 2] |= uint32_t{a[row * 16 + col]} << (16 * (i % 2));
    }
  return f;
}
inline std::vector<uint32_t> b_fragments(const std::vector<uint16_t>& b) {
  std::vector<uint32_t> f(32 * 2, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const int g = lane >> 2, t = lane % 4;
      const int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0), col = g;
      f[lane * 2 + i / 2] |= uint32_t{b[row * 8 + col]} << (16 * (i % 2));
    }
  return f;
}
inline int c_index(int lane, int i) {  // the element of the 16×8 C (row-major) that c_i of `lane` is
  const int g = lane >> 2, t = lane % 4;
  return ((i < 2) ? g : g + 8) * 8 + 2 * t + (i & 1);
}
inline std::vector<float> c_fragments(const std::vector<float>& c) {
  std::vector<float> f(32 * 4);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) f[lane * 4 + i] = c[c_index(lane, i)];
  return f;
}
inline std::vector<float> gather_d(const std::vector<float>& acc) {
  std::vector<float> d(128);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) d[c_index(lane, i)] = acc[lane * 4 + i];
  return d;
}

// max |d − ref| / max |ref|.
inline double max_rel(const std::vector<float>& d, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    diff = std::max(diff, std::abs(double(d[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / scale;
}

// How the operands reach their registers: built on the host per the table above, or loaded from
// row-major tiles in shared memory by ldmatrix (A by .x4; B by .x2 from [n][k], i.e. B stored
// column by column, or by .x2.trans from [k][n]).
enum class Form { Fragments, Ldmatrix, LdmatrixTrans };

// acc (32 lanes × 4) += A·B from fragments a (32 × 4), b (32 × 2).
template <class E, class Ctx>
SINKLAB_HD void mma_fragments_case(Ctx& ctx, const uint32_t* a, const uint32_t* b, float* acc) {
  const int l = ctx.lane();
  const uint32_t af[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]};
  float d[4] = {acc[4 * l], acc[4 * l + 1], acc[4 * l + 2], acc[4 * l + 3]};
  simt::mma_16816<E>(ctx, d, af, b[2 * l], b[2 * l + 1]);
  for (int x = 0; x < 4; ++x) acc[4 * l + x] = d[x];
}

// Rows of the shared tiles kStride elements apart: 16-byte aligned and not contiguous, as in a
// kernel's padded tiles.
inline constexpr int kStride = 24;
inline constexpr std::size_t kMmaShared = 2 * 16 * kStride * sizeof(uint16_t);

// acc += A·B with A (16×16 row-major) and B (BTrans: [k = 16][n = 8]; else [n = 8][k = 16])
// copied to shared memory and brought to the fragments by ldmatrix.
template <class E, bool BTrans, class Ctx>
SINKLAB_HD void mma_ldmatrix_case(Ctx& ctx, const uint16_t* a, const uint16_t* b, float* acc) {
  uint16_t* sa = ctx.template shared<uint16_t>();
  uint16_t* sb = sa + 16 * kStride;
  const int b_cols = BTrans ? 8 : 16;
  for (int64_t e = ctx.thread(); e < 256; e += ctx.threads()) sa[(e / 16) * kStride + e % 16] = a[e];
  for (int64_t e = ctx.thread(); e < 128; e += ctx.threads()) sb[(e / b_cols) * kStride + e % b_cols] = b[e];
  ctx.sync();
  const int l = ctx.lane();
  // x4: lane l addresses row l % 8 of matrix l / 8, the quarters of A at (row, column)
  // (0, 0) (8, 0) (0, 8) (8, 8), which are a0a1, a2a3, a4a5, a6a7.
  uint32_t af[4], bf[2];
  simt::ldmatrix<4>(ctx, af, sa + (l % 8 + 8 * (l / 8 % 2)) * kStride + 8 * (l / 16));
  // x2: matrix i covers k = 8i … 8i + 7; lanes 16 … 31 repeat the addresses of 0 … 15.
  const int i = l / 8 % 2, r = l % 8;
  if constexpr (BTrans)
    simt::ldmatrix<2, true>(ctx, bf, sb + (8 * i + r) * kStride);  // row k = 8i + r
  else
    simt::ldmatrix<2>(ctx, bf, sb + r * kStride + 8 * i);  // row n = r, columns k = 8i …
  float d[4] = {acc[4 * l], acc[4 * l + 1], acc[4 * l + 2], acc[4 * l + 3]};
  simt::mma_16816<E>(ctx, d, af, bf[0], bf[1]);
  for (int x = 0; x < 4; ++x) acc[4 * l + x] = d[x];
}

// The B tile mma_ldmatrix_case reads for a form.
inline std::vector<uint16_t> b_tile(const Operands& o, Form form) {
  if (form == Form::LdmatrixTrans) return o.b;
  std::vector<uint16_t> bt(128);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) bt[n * 16 + k] = o.b[k * 8 + n];
  return bt;
}

// ---------------------------------------------------------------- cp.async

struct alignas(16) Chunk {
  uint32_t w[4];
};
inline constexpr uint32_t kSentinel = 0xdeadbeefu;
inline constexpr int kChunks = 3;   // per lane: a copy, a zero fill, a copy committed late
inline constexpr int kStates = 4;   // snapshots of the chunks between the steps
inline constexpr std::size_t kCpAsyncShared = kChunks * 32 * sizeof(Chunk);

template <class Ctx>
SINKLAB_HD void snapshot(Ctx& ctx, Chunk* const (&s)[kChunks], int state, uint32_t* out) {
  for (int c = 0; c < kChunks; ++c)
    for (int w = 0; w < 4; ++w) out[((state * kChunks + c) * 32 + ctx.lane()) * 4 + w] = s[c]->w[w];
}

// Each lane: chunk 0 ← global[l] (group 1), chunk 1 ← zeros (group 2), chunk 2 ← global[32 + l]
// issued but left uncommitted; snapshots before any wait, after wait_group 1, after wait_group 0
// (the uncommitted copy is in no group), and after committing it and waiting again. A lane reads
// only its own chunks, which wait_group alone makes visible to it.
template <class Ctx>
SINKLAB_HD void cp_async_case(Ctx& ctx, const Chunk* global, uint32_t* out) {
  Chunk* sh = ctx.template shared<Chunk>();
  const int l = ctx.lane();
  Chunk* const s[kChunks] = {sh + l, sh + 32 + l, sh + 64 + l};
  for (int c = 0; c < kChunks; ++c)
    for (int w = 0; w < 4; ++w) s[c]->w[w] = kSentinel;
  simt::cp_async_16(ctx, s[0], global + l);
  simt::cp_async_commit(ctx);
  simt::cp_async_16(ctx, s[1], nullptr);
  simt::cp_async_commit(ctx);
  simt::cp_async_16(ctx, s[2], global + 32 + l);
  snapshot(ctx, s, 0, out);
  simt::cp_async_wait<1>(ctx);
  snapshot(ctx, s, 1, out);
  simt::cp_async_wait<0>(ctx);
  snapshot(ctx, s, 2, out);
  simt::cp_async_commit(ctx);
  simt::cp_async_wait<0>(ctx);
  snapshot(ctx, s, 3, out);
}

inline std::vector<Chunk> cp_async_sources() {
  std::vector<Chunk> g(64);
  for (int j = 0; j < 64; ++j)
    for (int w = 0; w < 4; ++w) g[j].w[w] = 0x01000193u * static_cast<uint32_t>(4 * j + w + 1);
  return g;
}
// Whether the PTX ISA guarantees chunk c complete in `state`: a wait_group N completes every
// committed group but the newest N. Where it does not, the emulator (which performs a copy only
// when its group completes) still shows the sentinel; a GPU may show either.
inline bool cp_async_complete(int state, int c) { return state > c; }
inline uint32_t cp_async_expected(const std::vector<Chunk>& g, int c, int lane, int w) {
  return c == 0 ? g[lane].w[w] : c == 1 ? 0u : g[32 + lane].w[w];
}

// ---------------------------------------------------------------- pack2

// out[i] = pack2<E>(x[2i], x[2i + 1]), a thread per pair.
template <class E, class Ctx>
SINKLAB_HD void pack2_case(Ctx& ctx, const float* x, uint32_t* out, int64_t n) {
  for (int64_t i = ctx.block() * ctx.threads() + ctx.thread(); i < n; i += ctx.blocks() * ctx.threads())
    out[i] = simt::pack2<E>(x[2 * i], x[2 * i + 1]);
}

// Floats where rounding to bf16 or fp16 is delicate: every bf16 code with low halves 0, just
// below, at and just above the tie; every fp16 value with its neighbours and the ties between
// consecutive values (fp16 subnormals, 65504 and the 65520 overflow tie among them); and random
// bit patterns (float subnormals, infinities and NaNs among them).
inline std::vector<float> rounding_probes() {
  std::vector<uint32_t> bits;
  for (uint32_t h = 0; h < 0x10000u; ++h)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u}) bits.push_back(h << 16 | low);
  auto as_bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float v = from_f16(static_cast<uint16_t>(h));
    const double next = h + 1 == 0x7c00u ? 65536.0 : double(from_f16(static_cast<uint16_t>(h + 1)));
    const float mid = static_cast<float>((double(v) + next) / 2);  // exact: fp16 has 11 bits
    for (float f : {v, std::nextafter(v, 0.f), std::nextafter(v, 1e30f), mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e30f)}) {
      bits.push_back(as_bits(f));
      bits.push_back(as_bits(-f));
    }
  }
  std::mt19937 gen(7);
  for (int i = 0; i < (1 << 18); ++i) bits.push_back(static_cast<uint32_t>(gen()));
  if (bits.size() % 2) bits.push_back(0);
  std::vector<float> f(bits.size());
  std::memcpy(f.data(), bits.data(), bits.size() * 4);
  return f;
}

// ---------------------------------------------------------------- on the emulator
#if !defined(__CUDACC__)
template <int N, bool Trans>
std::vector<uint32_t> emulated_ldmatrix(bool misaligned_ignored) {
  std::vector<uint32_t> out(32 * N);
  simt::emulate(1, 32, kLdmatrixShared,
                [&](simt::Emulated& ctx) { ldmatrix_case<N, Trans>(ctx, out.data(), misaligned_ignored); });
  return out;
}

// The accumulators (32 lanes × 4) of C + A·B.
template <class E>
std::vector<float> emulated_mma(const Operands& o, Form form) {
  std::vector<float> acc = c_fragments(o.c);
  if (form == Form::Fragments) {
    const std::vector<uint32_t> a = a_fragments(o.a), b = b_fragments(o.b);
    simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) { mma_fragments_case<E>(ctx, a.data(), b.data(), acc.data()); });
  } else {
    const std::vector<uint16_t> b = b_tile(o, form);
    simt::emulate(1, 32, kMmaShared, [&](simt::Emulated& ctx) {
      if (form == Form::LdmatrixTrans)
        mma_ldmatrix_case<E, true>(ctx, o.a.data(), b.data(), acc.data());
      else
        mma_ldmatrix_case<E, false>(ctx, o.a.data(), b.data(), acc.data());
    });
  }
  return acc;
}

inline std::vector<uint32_t> emulated_cp_async(const std::vector<Chunk>& global) {
  std::vector<uint32_t> out(kStates * kChunks * 32 * 4);
  simt::emulate(1, 32, kCpAsyncShared, [&](simt::Emulated& ctx) { cp_async_case(ctx, global.data(), out.data()); });
  return out;
}
#endif

}  // namespace mma_cases
