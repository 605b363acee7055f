// The warp's matrix instructions for tensor-core kernels written against a SIMT context
// (kernels/simt.hpp), with the semantics the PTX ISA gives them (sm_80 and later), so the same
// kernel body runs on a GPU and on the emulator:
//
//   ldmatrix<N, Trans>(ctx, r, row)   ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: lanes
//                                     8i … 8i+7 give the 16-byte rows of 8×8 matrix i (N = 1, 2, 4);
//                                     lane l receives in r[i] the two elements of row l/4, columns
//                                     2(l%4), 2(l%4)+1 of matrix i (of its transpose with Trans)
//   mma_16816<E>(ctx, acc, a, b0, b1)  mma.sync.aligned.m16n8k16.row.col.f32.E.E.f32: acc += A·B
//                                     for A 16×16, B 16×8 of E (Bf16, F16), in the fragments below
//   cp_async_16(ctx, dst, src)        cp.async.cg.shared.global, 16 bytes (src null: 16 zero bytes)
//   cp_async_commit(ctx) / cp_async_wait<N>(ctx)   commit_group / wait_group N
//
// Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4; a register holds two elements, the
// lower index in the low 16 bits):
//   A (row-major 16×16)  a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]
//                        a[2] = A[g][2t+8, +9]   a[3] = A[g+8][2t+8, +9]
//   B (col-major 16×8)   b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
//   C, D (16×8 float)    acc[0..1] = C[g][2t, 2t+1]   acc[2..3] = C[g+8][2t, 2t+1]
// So ldmatrix.x4 of a row-major 16×16 tile (matrices: rows 0–7 / 8–15 × columns 0–7 / 8–15 in
// the order (0,0) (8,0) (0,8) (8,8)) gives A's fragment, and the float accumulator of a 16×16
// product (two n-tiles) packs into the A fragment of the next product without moving a value
// (FlashAttention-2's P·V).
//
// The emulator's versions exchange the lanes' operands through the warp (Emulated::warp_exchange)
// and check what the hardware requires and would not report: ldmatrix rows and cp.async
// destinations 16-byte aligned and inside the block's shared memory (a violation aborts with a
// message: a throw would leave the warp at its barrier). The mma sums the 16 exact products of
// each element in double and rounds once to float; the tensor cores' own summation order is not
// specified, so kernels are tested with bf16/fp16 tolerances. cp.async copies are queued per
// thread and performed only when a wait_group lets their group complete, so a kernel that reads
// a tile before waiting for it reads stale data here, as it may on a GPU.
#pragma once
#include <cstdint>
#include <type_traits>

#include "sinklab/core/bf16.hpp"
#include "sinklab/core/config.hpp"
#include "sinklab/core/f16.hpp"
#include "sinklab/kernels/simt.hpp"

#if !defined(__CUDACC__)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#endif

namespace sinklab::simt {

// Operand element types of the tensor cores: 16-bit codes of a float, packed two to a register.
struct Bf16 {
  static constexpr const char* name = "bf16";
  SINKLAB_HD static uint16_t from_float(float f) { return to_bf16(f); }
  SINKLAB_HD static float to_float(uint16_t h) { return from_bf16(h); }
};
struct F16 {
  static constexpr const char* name = "fp16";
  SINKLAB_HD static uint16_t from_float(float f) { return to_f16(f); }
  SINKLAB_HD static float to_float(uint16_t h) { return from_f16(h); }
};

// Two floats as one register of E (lo in the low half), rounded to nearest even.
template <class E>
SINKLAB_HD inline uint32_t pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  if constexpr (std::is_same_v<E, Bf16>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return uint32_t{E::from_float(lo)} | (uint32_t{E::from_float(hi)} << 16);
#endif
}
template <class E>
SINKLAB_HD inline float unpack_lo(uint32_t r) {
  return E::to_float(static_cast<uint16_t>(r & 0xffffu));
}
template <class E>
SINKLAB_HD inline float unpack_hi(uint32_t r) {
  return E::to_float(static_cast<uint16_t>(r >> 16));
}

#if defined(__CUDACC__)
// ---------------------------------------------------------------- on the GPU (PTX)
//
// The instructions need sm_80 (ldmatrix sm_75); a build for an older GPU compiles them to a trap,
// and the host code never launches a tensor-core kernel there (kernels::cuda::host::detail::use_mma).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SINKLAB_MMA_PTX(...) __trap()
#else
#define SINKLAB_MMA_PTX(...) asm volatile(__VA_ARGS__)
#endif

namespace detail {
__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// What a zero-filling cp.async names as its source: a valid global address it does not read.
static __device__ __align__(16) const unsigned char zero_source[16] = {};
}  // namespace detail

template <int N, bool Trans = false>
__device__ inline void ldmatrix(const Cuda&, uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix: x1, x2 or x4");
  const unsigned a = detail::shared_address(row);
  if constexpr (N == 1) {
    if constexpr (Trans)
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
    else
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
  } else if constexpr (N == 2) {
    if constexpr (Trans)
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    else
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  } else {
    if constexpr (Trans)
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                      : "r"(a));
    else
      SINKLAB_MMA_PTX("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                      : "r"(a));
  }
}

template <class E>
__device__ inline void mma_16816(const Cuda&, float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<E, Bf16>)
    SINKLAB_MMA_PTX(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    SINKLAB_MMA_PTX(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cp_async_16 and cp_async_commit are templates, like ldmatrix and mma_16816, only so that a
// SINKLAB_HD kernel body may call them: nvcc rejects a call from a __host__ __device__ template
// to a plain __device__ function, not to a __device__ function template.
template <int = 0>
__device__ inline void cp_async_16(const Cuda&, void* dst, const void* src) {
  // src-size 0 fills the 16 bytes with zeros and reads nothing from the (valid) source named.
  [[maybe_unused]] const int bytes = src ? 16 : 0;  // unused where the instruction is a trap
  SINKLAB_MMA_PTX("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(detail::shared_address(dst)),
                  "l"(src ? src : static_cast<const void*>(detail::zero_source)), "r"(bytes)
                  : "memory");
}
template <int = 0>
__device__ inline void cp_async_commit(const Cuda&) { SINKLAB_MMA_PTX("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ inline void cp_async_wait(const Cuda&) {
  SINKLAB_MMA_PTX("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#undef SINKLAB_MMA_PTX

#else
// ---------------------------------------------------------------- on the emulator

namespace detail {
[[noreturn]] inline void misuse(const char* what, const void* p) {
  std::fprintf(stderr, "simt emulator: %s (address %p)\n", what, p);
  std::abort();
}
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
inline uint16_t element(uint64_t row_address, int c) {
  uint16_t h;
  std::memcpy(&h, reinterpret_cast<const unsigned char*>(row_address) + 2 * c, 2);
  return h;
}
}  // namespace detail

template <int N, bool Trans = false>
inline void ldmatrix(const Emulated& ctx, uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix: x1, x2 or x4");
  const int l = ctx.lane();
  // Only lanes 0 … 8N−1 give addresses; the others' are ignored, as on the device.
  if (l < 8 * N) {
    if (!detail::aligned16(row)) detail::misuse("ldmatrix: a row address is not 16-byte aligned", row);
    if (!ctx.in_shared(row, 16)) detail::misuse("ldmatrix: a row lies outside the block's shared memory", row);
  }
  const uint64_t mine = reinterpret_cast<uintptr_t>(row);
  ctx.warp_exchange(&mine, 1, [&](const uint64_t* w) {
    for (int i = 0; i < N; ++i) {
      uint16_t lo, hi;
      if constexpr (!Trans) {  // row l/4 of matrix i, columns 2(l%4), 2(l%4)+1
        const uint64_t at = w[(8 * i + l / 4) * Emulated::kWords];
        lo = detail::element(at, 2 * (l % 4));
        hi = detail::element(at, 2 * (l % 4) + 1);
      } else {  // rows 2(l%4), 2(l%4)+1 of matrix i, column l/4
        lo = detail::element(w[(8 * i + 2 * (l % 4)) * Emulated::kWords], l / 4);
        hi = detail::element(w[(8 * i + 2 * (l % 4) + 1) * Emulated::kWords], l / 4);
      }
      r[i] = uint32_t{lo} | (uint32_t{hi} << 16);
    }
  });
}

template <class E>
inline void mma_16816(const Emulated& ctx, float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint64_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  const int g = ctx.lane() / 4, t = ctx.lane() % 4;
  ctx.warp_exchange(mine, 6, [&](const uint64_t* w) {
    auto half = [](uint64_t word, int k) {
      return E::to_float(static_cast<uint16_t>(k % 2 ? (word >> 16) & 0xffffu : word & 0xffffu));
    };
    // A[row][k]: lane (row % 8)·4 + (k % 8)/2, register (row ≥ 8) + 2(k ≥ 8), half k % 2.
    auto A = [&](int row, int k) {
      return half(w[((row % 8) * 4 + (k % 8) / 2) * Emulated::kWords + (row >= 8) + 2 * (k >= 8)], k);
    };
    // B[k][col]: lane col·4 + (k % 8)/2, register 4 + (k ≥ 8), half k % 2.
    auto B = [&](int k, int col) { return half(w[(col * 4 + (k % 8) / 2) * Emulated::kWords + 4 + (k >= 8)], k); };
    for (int x = 0; x < 4; ++x) {
      const int row = g + 8 * (x / 2), col = 2 * t + x % 2;
      double s = 0.0;
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A(row, k)) * static_cast<double>(B(k, col));
      acc[x] = static_cast<float>(s + static_cast<double>(acc[x]));
    }
  });
}

inline void cp_async_16(Emulated& ctx, void* dst, const void* src) {
  if (!detail::aligned16(dst) || (src && !detail::aligned16(src)))
    detail::misuse("cp.async: a 16-byte copy needs 16-byte aligned addresses", src ? src : dst);
  if (!ctx.in_shared(dst, 16)) detail::misuse("cp.async: the destination lies outside the block's shared memory", dst);
  ctx.async_copies().open.push_back({dst, src, 16});
}
inline void cp_async_commit(Emulated& ctx) {
  auto& q = ctx.async_copies();
  q.groups.push_back(std::move(q.open));
  q.open.clear();
}
// Completes every committed group but the newest N (copies issued since the last commit are
// not in any group and stay pending).
template <int N>
inline void cp_async_wait(Emulated& ctx) {
  auto& q = ctx.async_copies();
  while (q.groups.size() > static_cast<std::size_t>(N)) {
    for (const auto& c : q.groups.front()) {
      if (c.src)
        std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.bytes));
      else
        std::memset(c.dst, 0, static_cast<std::size_t>(c.bytes));
    }
    q.groups.erase(q.groups.begin());
  }
}
#endif

}  // namespace sinklab::simt
