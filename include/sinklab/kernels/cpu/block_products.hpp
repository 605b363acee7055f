// The fused attention's block products at a precision, with operands prepared once and read by
// every product that uses them:
//
//   C[M×N] = alpha · Σ_k A(i, k) · B[k, j] + beta · C,   A(i, k) = A[i·sai + k·sak], B row-major
//
//   fp32 (any T)  an operand is the memory itself; products are block_gemm (block_gemm.hpp)
//   bf16 (float)  operands rounded to bf16 and packed as gemm_bf16 packs them (A: bf16 pairs per
//                 row, sai or sak = 1; B: VNNI panels of 64 columns), then multiplied by its
//                 tiles: AMX, AVX512-BF16 or the emulation (rounded fp32 copies), as gemm_bf16
//                 chooses (Bf16Path). Sums stay fp32.
//
// An attention kernel multiplies each key block by every query block of a head and each query
// block by every key block, so the packing of a shared operand is worth keeping: a(), b() take a
// slot and a tag, and a slot asked again with the same tag, source and shape returns its packing
// without packing again (tag < 0: always pack). Under fp32 nothing is packed and tags are
// ignored. One BlockProducts per thread (parallel chunk); its buffers keep their size, come from
// the host block pool (core/storage.hpp: a chunk of the next call reuses them without a page
// fault) and count in AttentionMemory while alive.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "sinklab/core/bf16.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/storage.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/attention_memory.hpp"
#include "sinklab/kernels/cpu/block_gemm.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"

namespace sinklab::kernels::cpu {

// op(A) of a block product (M × k). bf16: `words` rows of pairs `ld` apart, or the emulation's
// rounded rows (`rounded`, k apart).
template <class T>
struct BlockA {
  const T* p = nullptr;
  int64_t sai = 0, sak = 0, k = 0;
  const uint32_t* words = nullptr;
  int64_t ld = 0;
  const float* rounded = nullptr;
};

// B of a block product (k × n). bf16: VNNI panels of `pair_rows` rows, or the emulation's rounded
// rows (`rounded`, n apart).
template <class T>
struct BlockB {
  const T* p = nullptr;
  int64_t ldb = 0, k = 0, n = 0;
  const uint16_t* panels = nullptr;
  int64_t pair_rows = 0;
  const float* rounded = nullptr;
};

template <class T, class Tiles = detail::amx::HardwareTiles>
class BlockProducts {
 public:
  // `path` forces a bf16 path for tests (on `Tiles` for AMX, as gemm_bf16).
  explicit BlockProducts(Precision precision, Bf16Path path = Bf16Path::Auto)
      : bf16_(std::is_same_v<T, float> && precision == Precision::bf16) {
    if (bf16_) path_ = resolve(path);
  }
  ~BlockProducts() { AttentionMemory::sub(bytes_); }
  BlockProducts(const BlockProducts&) = delete;
  BlockProducts& operator=(const BlockProducts&) = delete;

  BlockA<T> a(int64_t slot, int64_t tag, int64_t M, int64_t K, const T* A, int64_t sai, int64_t sak) {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_) return pack_a(slot, tag, M, K, A, sai, sak);
    return BlockA<T>{A, sai, sak, K};
  }

  BlockB<T> b(int64_t slot, int64_t tag, int64_t K, int64_t N, const T* B, int64_t ldb) {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_) return pack_b(slot, tag, K, N, B, ldb);
    return BlockB<T>{B, ldb, K, N};
  }

  // C = alpha · a · b + beta · C for M rows of a and N ≤ b.n columns (beta = 0: C is not read),
  // summing over a's k ≤ b.k: an operand packed for a whole key block serves its partial uses.
  void product(int64_t M, int64_t N, const BlockA<T>& a, const BlockB<T>& b, T alpha, T beta, T* C, int64_t ldc) {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_) return product_bf16(M, N, a, b, alpha, beta, C, ldc);
    block_gemm(M, N, a.k, alpha, a.p, a.sai, a.sak, b.p, b.ldb, beta, C, ldc);
  }

 private:
  // The bf16 paths, out of line (and out of every program built with sinklab::precompiled, which
  // holds BlockProducts<float>): inlined at the attention's dozen call sites they tripled its code.
  [[gnu::noinline]] static Bf16Path resolve(Bf16Path path);
  [[gnu::noinline]] BlockA<T> pack_a(int64_t slot, int64_t tag, int64_t M, int64_t K, const T* A, int64_t sai,
                                     int64_t sak);
  [[gnu::noinline]] BlockB<T> pack_b(int64_t slot, int64_t tag, int64_t K, int64_t N, const T* B, int64_t ldb);
  [[gnu::noinline]] void product_bf16(int64_t M, int64_t N, const BlockA<T>& a, const BlockB<T>& b, T alpha, T beta,
                                      T* C, int64_t ldc);

  // Uninitialised: the packers write every element a product reads.
  template <class E>
  struct Buffer {
    std::shared_ptr<E[]> p;
    int64_t n = 0;
  };
  struct Slot {
    int64_t tag = -1;
    const T* src = nullptr;
    int64_t rows = 0, k = 0, s1 = 0, s2 = 0;
    Buffer<uint32_t> words;
    Buffer<uint16_t> halves;
    Buffer<float> floats;
    void set(int64_t t, const T* p, int64_t r, int64_t kk, int64_t a, int64_t b) {
      tag = t, src = p, rows = r, k = kk, s1 = a, s2 = b;
    }
  };
  static Slot& slot_of(std::vector<Slot>& v, int64_t i) {
    if (v.size() <= static_cast<std::size_t>(i)) v.resize(static_cast<std::size_t>(i) + 1);
    return v[static_cast<std::size_t>(i)];
  }
  // At least n elements (the old contents are not kept: a slot is repacked whole when it grows).
  template <class E>
  E* grown(Buffer<E>& b, int64_t n) {
    if (b.n < n) {
      const int64_t more = (n - b.n) * static_cast<int64_t>(sizeof(E));
      b.p.reset();
      b.p = allocate_host<E>(static_cast<std::size_t>(n));
      b.n = n;
      bytes_ += more;
      AttentionMemory::add(more);
    }
    return b.p.get();
  }

  bool bf16_ = false;
  Bf16Path path_ = Bf16Path::Emulated;
  int64_t bytes_ = 0;  // the slots' buffers, counted in AttentionMemory
  std::vector<Slot> as_, bs_;
};

template <class T, class Tiles>
Bf16Path BlockProducts<T, Tiles>::resolve(Bf16Path path) {
  return detail::bf16::resolve<Tiles>("attention (bf16 block products)", path);
}

template <class T, class Tiles>
BlockA<T> BlockProducts<T, Tiles>::pack_a(int64_t slot, int64_t tag, int64_t M, int64_t K, const T* A, int64_t sai,
                                          int64_t sak) {
  BlockA<T> h{A, sai, sak, K};
  SINKLAB_CHECK(sai == 1 || sak == 1, "BlockProducts::a: A needs a unit stride along its rows or its columns, got ",
                sai, " and ", sak);
  Slot& s = slot_of(as_, slot);
  const bool fresh = !(tag >= 0 && s.tag == tag && s.src == A && s.rows == M && s.k == K && s.s1 == sai && s.s2 == sak);
  s.set(tag, A, M, K, sai, sak);
  if constexpr (std::is_same_v<T, float>) {
    if (path_ == Bf16Path::Emulated) {
      if (fresh) {
        float* r = grown(s.floats, M * K);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t k = 0; k < K; ++k) r[i * K + k] = round_bf16(A[i * sai + k * sak]);
      }
      h.rounded = s.floats.p.get();
      return h;
    }
#if defined(SINKLAB_CPUID)
    const bool amx = path_ == Bf16Path::Amx;
    const int64_t kp = (K + 1) / 2, ld = amx ? detail::amx::round_up(kp, 16) : kp;
    // AMX reads A 32 rows at a time: zero rows up to a multiple of 32.
    const int64_t rows = amx ? detail::amx::round_up(M, 32) : M;
    if (fresh) {
      uint32_t* w = grown(s.words, rows * ld);
      const bool ta = sak != 1;  // A(i, k) = A[k·sak + i]: op(A) is Aᵀ of a row-major A
      detail::bf16::pack_a_native(ta, A, ta ? sak : sai, 0, M, 0, K, w, ld);
      std::fill(w + M * ld, w + rows * ld, 0u);
    }
    h.words = s.words.p.get();
    h.ld = ld;
#endif
  }
  return h;
}

template <class T, class Tiles>
BlockB<T> BlockProducts<T, Tiles>::pack_b(int64_t slot, int64_t tag, int64_t K, int64_t N, const T* B, int64_t ldb) {
  BlockB<T> h{B, ldb, K, N};
  Slot& s = slot_of(bs_, slot);
  const bool fresh = !(tag >= 0 && s.tag == tag && s.src == B && s.rows == K && s.k == N && s.s1 == ldb);
  s.set(tag, B, K, N, ldb, 0);
  if constexpr (std::is_same_v<T, float>) {
    if (path_ == Bf16Path::Emulated) {
      if (fresh) {
        float* r = grown(s.floats, K * N);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < N; ++j) r[k * N + j] = round_bf16(B[k * ldb + j]);
      }
      h.rounded = s.floats.p.get();
      return h;
    }
#if defined(SINKLAB_CPUID)
    namespace bf = detail::bf16;
    const int64_t kp = (K + 1) / 2, rows = path_ == Bf16Path::Amx ? detail::amx::round_up(kp, 16) : kp;
    const int64_t panels = (N + bf::NR - 1) / bf::NR;
    if (fresh) {
      uint16_t* p = grown(s.halves, panels * rows * bf::NR * 2);
      for (int64_t q = 0; q < panels; ++q)
        bf::pack_b_native(false, B, ldb, 0, K, q * bf::NR, std::min(bf::NR, N - q * bf::NR), p + q * rows * bf::NR * 2,
                          rows);
    }
    h.panels = s.halves.p.get();
    h.pair_rows = rows;
#endif
  }
  return h;
}

template <class T, class Tiles>
void BlockProducts<T, Tiles>::product_bf16(int64_t M, int64_t N, const BlockA<T>& a, const BlockB<T>& b, T alpha,
                                           T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (a.rounded) {
      if (block_gemm_fits<float>(N))
        block_gemm(M, N, a.k, alpha, a.rounded, a.k, int64_t{1}, b.rounded, b.n, beta, C, ldc);
      else
        gemm(Trans::N, Trans::N, M, N, a.k, alpha, a.rounded, a.k, b.rounded, b.n, beta, C, ldc);
      return;
    }
#if defined(SINKLAB_CPUID)
    if (path_ == Bf16Path::Amx) {
      Tiles tiles{};
      detail::bf16::block_amx(tiles, M, N, a.ld, a.ld, a.words, b.panels, b.pair_rows, alpha, beta, C, ldc);
    } else {
      detail::bf16::block(M, N, (a.k + 1) / 2, a.words, a.ld, b.panels, b.pair_rows, alpha, beta, C, ldc);
    }
#endif
  }
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp). With the bf16 paths inline
// and instantiated in every program, test_attention_softmax took 16% longer to compile (14% more
// code); out of line and precompiled (gemm_bf16 too), 5% (3%).
SINKLAB_EXTERN_TEMPLATE(class BlockProducts<float>)

}  // namespace sinklab::kernels::cpu
