// Numpy-style broadcasting on shapes, the same on every device: the broadcast shape of two
// operands and the index arithmetic the elementwise kernels (kernels/cpu, kernels/cuda) lay over
// a rank-4 output.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "sinklab/core/error.hpp"
#include "sinklab/core/shape.hpp"

namespace sinklab::kernels {

// The broadcast shape of two shapes (numpy rules, aligned at the trailing axis).
inline Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  const int r = std::max(a.rank(), b.rank());
  int64_t dims[kMaxRank];
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    SINKLAB_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast (axis ", i - r,
                  ": ", da, " vs ", db, ")");
    dims[i] = da == 1 ? db : da;
  }
  return Shape::from_range(dims, dims + r);
}

// Strides of `s` (contiguous) laid over a rank-4 output index space, 0 on broadcast axes.
inline std::array<int64_t, 4> broadcast_strides(const Shape& s, const Shape& out) {
  std::array<int64_t, 4> st{0, 0, 0, 0};
  auto cs = contiguous_strides(s);
  const int pad = 4 - out.rank();
  for (int i = 0; i < s.rank(); ++i) {
    const int o = out.rank() - s.rank() + i;
    st[pad + o] = s[i] == 1 ? 0 : cs[i];
  }
  return st;
}
// The output's extents as rank 4, padded with 1s in front.
inline std::array<int64_t, 4> dims4(const Shape& out) {
  std::array<int64_t, 4> d{1, 1, 1, 1};
  for (int i = 0; i < out.rank(); ++i) d[4 - out.rank() + i] = out[i];
  return d;
}
// True when `small` equals the trailing axes of `big` (e.g. a bias [D] against [N, T, D]).
inline bool is_trailing(const Shape& small, const Shape& big) {
  if (small.rank() > big.rank()) return false;
  for (int i = 0; i < small.rank(); ++i)
    if (small[i] != big[big.rank() - small.rank() + i]) return false;
  return true;
}

}  // namespace sinklab::kernels
