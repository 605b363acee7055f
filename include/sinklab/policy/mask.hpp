// mask:: — which keys a query sees. Both masks, combined with per-batch key lengths (padding),
// leave query i a prefix [0, key_end) of the keys, which is what lets the fused kernels skip
// whole key blocks. A row with key_end = 0 (e.g. bidirectional with key length 0) is fully
// masked: its output is 0 and it passes zero gradients.
#pragma once
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "sinklab/core/config.hpp"

namespace sinklab::mask {

// Query i of T sees keys j ≤ i + (S − T): aligned at the end when T ≠ S (the convention of
// FlashAttention-2 with a KV cache); T = S gives the usual j ≤ i.
struct Causal {
  static constexpr bool causal = true;
  static constexpr const char* name = "causal";
  static constexpr bool nondecreasing = true;  // key_end(i) ≤ key_end(i + 1)
  SINKLAB_HD static int64_t key_end(int64_t i, int64_t T, int64_t S, int64_t kv_len) {
    int64_t e = i + (S - T) + 1;
    e = e < kv_len ? e : kv_len;
    return e > 0 ? e : 0;
  }
};

struct Bidirectional {
  static constexpr bool causal = false;
  static constexpr const char* name = "bidirectional";
  static constexpr bool nondecreasing = true;
  SINKLAB_HD static int64_t key_end(int64_t /*i*/, int64_t /*T*/, int64_t /*S*/, int64_t kv_len) {
    return kv_len > 0 ? kv_len : 0;
  }
};

// What a mask provides: key_end(i, T, S, kv_len), the end of query i's visible prefix of keys
// (SINKLAB_HD; a prefix is what lets the fused kernels skip whole key blocks), `causal` and a name.
// Optional: `nondecreasing = true` when key_end never falls as i grows, so the last row of a block
// of queries sees the furthest (max_key_end reads one row instead of all).
template <class M>
concept Policy = requires(int64_t n) {
  { M::causal } -> std::convertible_to<bool>;
  { M::name } -> std::convertible_to<const char*>;
  { M::key_end(n, n, n, n) } -> std::convertible_to<int64_t>;
};

template <class M>
inline constexpr bool is_policy_v = Policy<M>;

// The furthest key end over rows [r0, r1) (0 for no rows).
template <class M>
SINKLAB_HD int64_t max_key_end(int64_t r0, int64_t r1, int64_t T, int64_t S, int64_t kv_len) {
  if (r1 <= r0) return 0;
  if constexpr (requires { requires M::nondecreasing; }) {
    return M::key_end(r1 - 1, T, S, kv_len);
  } else {
    int64_t e = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t x = M::key_end(r, T, S, kv_len);
      e = x > e ? x : e;
    }
    return e;
  }
}

}  // namespace sinklab::mask
