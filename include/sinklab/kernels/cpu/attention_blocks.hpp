// What the fused CPU attention kernels (attention_fused_forward.hpp, attention_fused_backward.hpp)
// share: the key-block geometry, the slots of their block products, and the two Blocks through
// which a score family's row update (policy/row_update.hpp) sees a block of logits — a row of
// contiguous floats (RowBlock) or a block of rows across SIMD lanes (LaneBlock).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/block_gemm.hpp"

namespace sinklab::kernels::cpu::detail {

template <class T>
inline void zero_tail(T* x, int64_t from, int64_t to) {
  if (from < to) std::fill(x + from, x + to, T(0));
}

// Visible keys of row r inside the key block [j0, j0 + cols).
inline int64_t visible_in_block(int64_t end, int64_t j0, int64_t cols) {
  return std::clamp<int64_t>(end - j0, 0, cols);
}

// The register-blocked block products (block_gemm.hpp) need the head size and the key block
// (the row stride of the score scratch) to be whole SIMD vectors; otherwise the kernels call gemm.
template <class T>
inline bool use_block_gemm(int64_t d, int64_t Bk) {
  return block_gemm_fits<T>(d) && block_gemm_fits<T>(Bk);
}
inline int64_t round_up(int64_t n, int64_t w) { return (n + w - 1) / w * w; }

// Slots of the block products' operands (block_products.hpp): one for each operand that one
// product reads at a time, three per key block for those kept across query blocks.
namespace slot {
enum : int64_t { queries, probs, dout, dout_b, queries_b, probs_t, dscores, dscores_t, per_block };
inline int64_t block(int64_t key_block, int64_t kind) { return per_block + 3 * key_block + kind; }
}  // namespace slot

// Lanes of a vector at or past n (n − i ≤ 0 for all of them: none is).
template <class T>
inline xsimd::batch_bool<T> lanes_below(int64_t n) {
  static constexpr std::array<T, simd_width<T>()> lane = [] {
    std::array<T, simd_width<T>()> a{};
    for (std::size_t k = 0; k < a.size(); ++k) a[k] = static_cast<T>(k);
    return a;
  }();
  return batch<T>::load_unaligned(lane.data()) < batch<T>(static_cast<T>(n));
}

// What both fused kernels check and derive before their loops: the policies, the shapes, the
// score's parameters, and the block sizes clamped to the head.
struct FusedGeometry {
  AttentionDims dm;
  int64_t Bq = 1, Bk = 1;
};
template <class Score, class Mask, class T, HostDevice Dev>
FusedGeometry check_fused_call(const char* kernel, const Score& score, const Tensor<T, Dev>& q,
                               const Tensor<T, Dev>& k, const Tensor<T, Dev>& v,
                               const score::params_t<Score, T, Dev>& params, const AttentionOptions& opt) {
  require_float<T>();
  static_assert(score::is_policy_v<Score>, "attention_fused_*: Score must be a sinklab::score policy");
  static_assert(mask::is_policy_v<Mask>, "attention_fused_*: Mask must be a sinklab::mask policy");
  FusedGeometry g;
  g.dm = check_shapes(kernel, q, k, v, opt);
  check_score_params<T, Score, Dev>(kernel, score, params, g.dm);
  g.Bq = std::max<int64_t>(1, std::min(opt.block_q, g.dm.T));
  g.Bk = std::max<int64_t>(1, std::min(opt.block_k, g.dm.S));
  return g;
}

// One row's logits in a key block, s[0, ne) visible and s[ne, cols) masked. With `whole`, the
// memory up to ne rounded to a vector is the row's (any values there): max() sets it to −inf, so
// max and map_sum run on whole vectors instead of a scalar tail.
template <class T>
struct RowBlock {
  T* s;
  int64_t ne, cols, n;
  bool whole;
  RowBlock(T* s_, int64_t ne_, int64_t cols_, bool whole_) : s(s_), ne(ne_), cols(cols_), n(ne_), whole(whole_) {}

  T max() {
    if (whole && ne > 0) {
      n = round_up(ne, simd_width<T>());
      for (int64_t j = ne; j < n; ++j) s[j] = -std::numeric_limits<T>::infinity();
    }
    return simd::max(s, n);
  }
  template <class F>
  void map(F&& f) {
    simd::apply(s, s, ne, f);
    zero_tail(s, ne, cols);
  }
  // Σ over the row; the last vector's masked lanes are 0 (stored and summed), as exp(−inf) gives.
  template <class F>
  T map_sum(F&& f) {
    constexpr int64_t W = simd_width<T>();
    using V = batch<T>;
    V acc(T(0));
    int64_t j = 0;
    const int64_t body = n == ne ? ne / W * W : n;
    for (; j + W <= body; j += W) {
      V y = f(V::load_unaligned(s + j));
      if (j + W > ne) y = xsimd::select(lanes_below<T>(ne - j), y, V(T(0)));
      y.store_unaligned(s + j);
      acc += y;
    }
    T sum = xsimd::hadd(acc);
    for (; j < ne; ++j) sum += (s[j] = f(s[j]));
    zero_tail(s, std::max(j, ne), cols);
    return sum;
  }
};

// A block of query rows across SIMD lanes, the logits kept transposed: key j of the lanes' rows at
// st[j·ld], cols keys, key j0 + j masked for a lane whose end ≤ j0 + j (checked only when some
// row of the block sees part of it).
template <class T>
struct LaneBlock {
  using V = batch<T>;
  T* st;
  int64_t ld, cols, j0;
  V end;
  bool masked;

  V max() {
    V mx(-std::numeric_limits<T>::infinity());
    for (int64_t j = 0; j < cols; ++j) {
      V x = V::load_unaligned(st + j * ld);
      if (masked) {
        x = xsimd::select(V(static_cast<T>(j0 + j)) >= end, V(-std::numeric_limits<T>::infinity()), x);
        x.store_unaligned(st + j * ld);
      }
      mx = xsimd::max(mx, x);
    }
    return mx;
  }
  template <class F>
  V map_sum(F&& f) {
    V sum(T(0));
    for (int64_t j = 0; j < cols; ++j) {
      V p = f(V::load_unaligned(st + j * ld));
      if (masked) p = xsimd::select(V(static_cast<T>(j0 + j)) >= end, V(T(0)), p);
      p.store_unaligned(st + j * ld);
      sum += p;
    }
    return sum;
  }
  template <class F>
  void map(F&& f) {
    (void)map_sum(f);
  }
};

}  // namespace sinklab::kernels::cpu::detail
