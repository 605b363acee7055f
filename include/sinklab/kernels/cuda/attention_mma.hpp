// The pieces the tensor-core attention kernels (attention_mma_forward.hpp,
// attention_mma_backward.hpp) share, written against a SIMT context and the warp's matrix
// instructions (kernels/simt_mma.hpp), so they run on a GPU (sm_80 and later) and on the emulator:
//
//   Tile<D>       a 64-row × D tile of 16-bit codes in shared memory (D = 32, 64, 128), its
//                 16-byte chunks xor-swizzled by row, so the eight row addresses of an ldmatrix
//                 fall in eight different bank groups
//   load_tile     the block copies rows [0, 64) of a [·, D] matrix into a Tile with cp.async,
//                 zero-filling rows at or past `valid` (never reading them)
//   next_kv_tile  the double buffer's step: the next key/value tiles in flight, this one waited for
//   mma_abt       a warp's acc (16 × N) += A[a0 … a0+16) · B[b0 … b0+N)ᵀ, A and B tiles of depth D
//   mma_pb        a warp's acc (16 × D) += P (16 × K, registers) · B[0 … K) of a tile
//   pack_a        the float accumulator of a 16 × K product as the A operand (K/16 register quads)
//                 of the next product, in place (FlashAttention-2's P·V without shared memory)
//   quad_max/sum  a value over the four lanes that hold one accumulator row
//
// A block is four warps (128 threads); each warp owns 16 rows of the block's 64 (queries in the
// forward and the dQ pass, keys in the dK/dV pass). The fragments' row and column of a thread's
// accumulator element x (0–3) of n-tile nt: row g + 8·(x / 2), column 8·nt + 2t + x % 2
// (g = lane / 4, t = lane % 4), the layout of mma.m16n8k16 (simt_mma.hpp).
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/kernels/simt_mma.hpp"
#include "sinklab/policy/mask.hpp"

namespace sinklab::kernels::cuda::mma {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * simt::kWarp;
inline constexpr int kRows = 64;  // rows of every tile (queries or keys)

template <int D>
struct Tile {
  static_assert(D == 32 || D == 64 || D == 128, "tensor-core attention: head size 32, 64 or 128");
  static constexpr int kElems = kRows * D;
  // The element offset of (r, c). Rows of 64 or 128 codes (8 or 16 chunks): chunk c ^ (r % 8)
  // within each group of 8; rows of 32 codes (4 chunks, two rows per 128 bytes): chunk
  // c ^ ((r / 2) % 4). Either way eight consecutive rows' chunk c lie in eight bank groups.
  SINKLAB_HD static int at(int r, int c) {
    const int chunk = c >> 3;
    const int swizzled = D == 32 ? chunk ^ ((r >> 1) & 3) : (chunk & ~7) | ((chunk ^ r) & 7);
    return r * D + swizzled * 8 + (c & 7);
  }
};

// Rows [0, 64) of src (rows D codes apart) into `tile`; rows ≥ valid become zeros. Issues the
// copies only: the caller commits and waits (cp_async_commit / cp_async_wait).
template <int D, class Ctx>
SINKLAB_HD void load_tile(Ctx& ctx, uint16_t* tile, const uint16_t* src, int64_t valid) {
  constexpr int chunks = D / 8;
  for (int x = static_cast<int>(ctx.thread()); x < kRows * chunks; x += kThreads) {
    const int r = x / chunks, c = (x % chunks) * 8;
    simt::cp_async_16(ctx, tile + Tile<D>::at(r, c), r < valid ? src + static_cast<int64_t>(r) * D + c : nullptr);
  }
}

// The double buffer of key and value tiles at step j of `tiles`: issues tile j + 1 (rows from
// (j + 1)·64 of kb, vb; zeros from `end` on) into the buffers tile j does not use, waits for tile
// j (committed by the caller before step 0, by this call before the others) and syncs the block.
// The caller syncs again once every warp is done with tile j, before step j + 1 refills its
// buffers.
template <int D, class Ctx>
SINKLAB_HD void next_kv_tile(Ctx& ctx, uint16_t* ks, uint16_t* vs, const uint16_t* kb, const uint16_t* vb, int64_t j,
                             int64_t tiles, int64_t end) {
  if (j + 1 < tiles) {
    const int free = static_cast<int>(1 - j % 2);
    const int64_t j0 = (j + 1) * kRows;
    load_tile<D>(ctx, ks + free * Tile<D>::kElems, kb + j0 * D, end - j0);
    load_tile<D>(ctx, vs + free * Tile<D>::kElems, vb + j0 * D, end - j0);
    simt::cp_async_commit(ctx);
    simt::cp_async_wait<1>(ctx);
  } else {
    simt::cp_async_wait<0>(ctx);
  }
  ctx.sync();
}

// acc (16 × N, N/8 n-tiles) += A · Bᵀ, A = rows a0 … a0+15 of tile a, B = rows b0 … b0+N−1 of
// tile b, over the depth D of both.
template <class E, int D, int N, class Ctx>
SINKLAB_HD void mma_abt(Ctx& ctx, float (&acc)[N / 8][4], const uint16_t* a, int a0, const uint16_t* b, int b0) {
  const int lane = ctx.lane(), i = lane / 8;
  for (int k0 = 0; k0 < D; k0 += 16) {
    uint32_t af[4];
    simt::ldmatrix<4>(ctx, af, a + Tile<D>::at(a0 + lane % 8 + (i % 2) * 8, k0 + (i / 2) * 8));
    for (int n0 = 0; n0 < N; n0 += 16) {
      uint32_t bf[4];  // b0, b1 of n-tile n0 / 8, then of n0 / 8 + 1
      simt::ldmatrix<4>(ctx, bf, b + Tile<D>::at(b0 + n0 + lane % 8 + (i / 2) * 8, k0 + (i % 2) * 8));
      simt::mma_16816<E>(ctx, acc[n0 / 8], af, bf[0], bf[1]);
      simt::mma_16816<E>(ctx, acc[n0 / 8 + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 × D) += P · B, P (16 × K) as K/16 A-operand quads (pack_a), B = rows b0 … b0+K−1 of tile b.
template <class E, int D, int K, class Ctx>
SINKLAB_HD void mma_pb(Ctx& ctx, float (&acc)[D / 8][4], const uint32_t (&p)[K / 16][4], const uint16_t* b, int b0) {
  const int lane = ctx.lane(), i = lane / 8;
  for (int k0 = 0; k0 < K; k0 += 16)
    for (int n0 = 0; n0 < D; n0 += 16) {
      uint32_t bf[4];  // transposed: b0, b1 of n-tile n0 / 8, then of n0 / 8 + 1
      simt::ldmatrix<4, true>(ctx, bf, b + Tile<D>::at(b0 + k0 + lane % 8 + (i % 2) * 8, n0 + (i / 2) * 8));
      simt::mma_16816<E>(ctx, acc[n0 / 8], p[k0 / 16], bf[0], bf[1]);
      simt::mma_16816<E>(ctx, acc[n0 / 8 + 1], p[k0 / 16], bf[2], bf[3]);
    }
}

// The A operand of the 16 × K accumulator s (K/8 n-tiles), rounded to E.
template <class E, int K>
SINKLAB_HD void pack_a(const float (&s)[K / 8][4], uint32_t (&p)[K / 16][4]) {
  for (int kk = 0; kk < K / 16; ++kk) {
    p[kk][0] = simt::pack2<E>(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = simt::pack2<E>(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = simt::pack2<E>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = simt::pack2<E>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

template <int N>
SINKLAB_HD void zero(float (&acc)[N][4]) {
  for (int n = 0; n < N; ++n)
    for (int x = 0; x < 4; ++x) acc[n][x] = 0.f;
}

// The max / sum of v over the four lanes of a quad (the lanes that hold one accumulator row), on
// each of them. Every lane of the warp must call it.
template <class Ctx>
SINKLAB_HD float quad_max(Ctx& ctx, float v) {
  for (int m = 1; m <= 2; m *= 2) {
    const float o = ctx.shfl_xor(v, m);
    v = v < o ? o : v;
  }
  return v;
}
template <class Ctx>
SINKLAB_HD float quad_sum(Ctx& ctx, float v) {
  for (int m = 1; m <= 2; m *= 2) v += ctx.shfl_xor(v, m);
  return v;
}

// How many of the tile's columns from `first` on a row whose keys end at `end` sees, in [0, 64]:
// the per-element visibility test is then an int compare with the column within the tile.
SINKLAB_HD inline int visible_in_tile(int64_t end, int64_t first) {
  const int64_t n = end - first;
  return static_cast<int>(n < 0 ? 0 : (n > kRows ? kRows : n));
}

// Whether any of rows [r0, r0 + n) ∩ [0, rows) sees a key at or past `from` (the same answer on
// every thread that asks, so a warp or a block may skip work together).
template <class Mask>
SINKLAB_HD bool sees_from(int64_t r0, int64_t n, int64_t rows, int64_t T, int64_t S, int64_t kvlen, int64_t from) {
  return mask::max_key_end<Mask>(r0, r0 + n < rows ? r0 + n : rows, T, S, kvlen) > from;
}

}  // namespace sinklab::kernels::cuda::mma
