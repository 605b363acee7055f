// Row-wise kernels over the last axis: softmax, log-softmax and their backward passes.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::kernels::cpu {

// y = softmax(x) per row of length n.
template <class T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = simd::max(xr, n);
      simd::apply(xr, yr, n, [m](auto v) {
        using std::exp; using xsimd::exp;
        return exp(v - decltype(v)(m));
      });
      const T inv = T(1) / simd::sum(yr, n);
      simd::apply(yr, yr, n, [inv](auto v) { return v * decltype(v)(inv); });
    }
  });
}

// y = log_softmax(x) per row.
template <class T>
void log_softmax_rows(const T* x, T* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = simd::max(xr, n);
      simd::apply(xr, yr, n, [m](auto v) {
        using std::exp; using xsimd::exp;
        return exp(v - decltype(v)(m));
      });
      const T lse = m + std::log(simd::sum(yr, n));
      simd::apply(xr, yr, n, [lse](auto v) { return v - decltype(v)(lse); });
    }
  });
}

// gx += y ⊙ (gy − ⟨gy, y⟩) per row (softmax backward, accumulating).
template <class T>
void softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * n;
      const T* gr = gy + r * n;
      T* out = gx + r * n;
      const T d = simd::dot(yr, gr, n);
      simd::apply(yr, gr, out, out, n, [d](auto yv, auto gv, auto ov) { return ov + yv * (gv - decltype(yv)(d)); });
    }
  });
}

// gx += gy − softmax(x) · Σ gy per row (log-softmax backward, accumulating), with y = log_softmax(x).
template <class T>
void log_softmax_rows_backward(const T* y, const T* gy, T* gx, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * n;
      const T* gr = gy + r * n;
      T* out = gx + r * n;
      const T s = simd::sum(gr, n);
      simd::apply(yr, gr, out, out, n, [s](auto yv, auto gv, auto ov) {
        using std::exp; using xsimd::exp;
        return ov + gv - exp(yv) * decltype(yv)(s);
      });
    }
  });
}

namespace detail {
// Σ_j exp(x_j − m), vectorised.
template <class T>
T sum_exp(const T* x, int64_t n, T m) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  int64_t j = 0;
  for (; j + W <= n; j += W) acc += xsimd::exp(B::load_unaligned(x + j) - B(m));
  T s = xsimd::hadd(acc);
  for (; j < n; ++j) s += std::exp(x[j] - m);
  return s;
}
inline int64_t cross_entropy_grain(int64_t V) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)); }
}  // namespace detail

// Targets of N rows over V classes that count (not ignore_index); throws on one outside [0, V).
inline int64_t cross_entropy_count(const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index) {
  int64_t count = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (targets[r] == ignore_index) continue;
    SINKLAB_CHECK(targets[r] >= 0 && targets[r] < V, "cross_entropy: target ", targets[r], " at row ", r,
                  " is outside [0, ", V, ") (ignore_index is ", ignore_index, ")");
    ++count;
  }
  return count;
}

// Σ over counted rows of lse_r − x[r, target_r], with lse_r (the row's logsumexp) saved for the
// backward; ignored rows contribute 0 and leave lse_r unset.
template <class T>
T cross_entropy_forward(const T* x, const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index, T* lse) {
  std::vector<T> row_loss(static_cast<std::size_t>(N), T(0));
  parallel_for(0, N, detail::cross_entropy_grain(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (targets[r] == ignore_index) continue;
      const T* xr = x + r * V;
      const T m = simd::max(xr, V);
      lse[r] = m + std::log(detail::sum_exp(xr, V, m));
      row_loss[r] = lse[r] - xr[targets[r]];
    }
  });
  T total = 0;
  for (T l : row_loss) total += l;  // in row order: the same sum on any thread count
  return total;
}

// gx[r] += scale · (softmax(x[r]) − onehot(target_r)) for counted rows, the softmax recomputed
// from the saved lse.
template <class T>
void cross_entropy_backward(const T* x, const int32_t* targets, const T* lse, int64_t N, int64_t V,
                            int32_t ignore_index, T scale, T* gx) {
  parallel_for(0, N, detail::cross_entropy_grain(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (targets[r] == ignore_index) continue;
      const T l = lse[r];
      T* gr = gx + r * V;
      simd::apply(x + r * V, gr, gr, V, [l, scale](auto xv, auto gv) {
        using std::exp;
        using xsimd::exp;
        using B = decltype(xv);
        return B(scale) * exp(xv - B(l)) + gv;
      });
      gr[targets[r]] -= scale;
    }
  });
}

}  // namespace sinklab::kernels::cpu
