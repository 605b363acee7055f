// How the GEMMs (gemm.hpp, gemm_bf16.hpp, gemm_s8.hpp) split the rows of C among the pool's
// threads: tiles that shrink, claimed in order.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sinklab::kernels::cpu::detail {

inline constexpr int64_t kMaxRowTiles = 64;

// Rows [starts[t], starts[t + 1]) of M for t < tiles, split so that the tiles shrink (sizes ∝
// tiles, tiles − 1, …, 1, multiples of `align` but the last) and are claimed in that order: the
// thread that finishes first then waits for a small tile at most, where equal tiles left it idle
// for half a tile per product on average. A tile may be empty at the end.
inline void shrinking_tiles(int64_t M, int64_t tiles, int64_t align, int64_t* starts) {
  const int64_t total = tiles * (tiles + 1) / 2;
  starts[0] = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t size = (M * (tiles - t) / total + align - 1) / align * align;
    starts[t + 1] = t + 1 == tiles ? M : std::min(M, starts[t] + std::max(size, align));
  }
}

// The split of the packed GEMMs, whose threads each pack their own rows of A: 4 tiles per thread
// (fewer where M has fewer `unit`-row groups), at most kMaxRowTiles.
struct RowTiles {
  int64_t count = 1;
  int64_t starts[kMaxRowTiles + 1] = {};
  RowTiles(int64_t M, int threads, int64_t unit) {
    count = std::clamp<int64_t>(std::min<int64_t>(4 * int64_t{threads}, (M + unit - 1) / unit), 1, kMaxRowTiles);
    shrinking_tiles(M, count, unit, starts);
  }
};

}  // namespace sinklab::kernels::cpu::detail
