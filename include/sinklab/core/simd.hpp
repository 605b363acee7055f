// SIMD helpers over xsimd: element functions written once as templates over V, where V is
// a scalar (float, double) or an xsimd batch, and loops that run them vectorised with a
// scalar tail for any length.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/xsimd.hpp"

namespace sinklab::simd {

template <class T>
using batch = xsimd::batch<T>;

template <class V>
struct is_batch : std::false_type {};
template <class T, class A>
struct is_batch<xsimd::batch<T, A>> : std::true_type {};

// 1 where x > 0, else 0, for scalars and batches alike.
template <class V>
inline V positive_mask(const V& x) {
  if constexpr (is_batch<V>::value) {
    return xsimd::select(x > V(0), V(1), V(0));
  } else {
    return x > V(0) ? V(1) : V(0);
  }
}

template <class V>
SINKLAB_HD inline V vmax(const V& a, const V& b) {
  if constexpr (is_batch<V>::value) return xsimd::max(a, b);
  else return std::max(a, b);
}
template <class V>
SINKLAB_HD inline V vmin(const V& a, const V& b) {
  if constexpr (is_batch<V>::value) return xsimd::min(a, b);
  else return std::min(a, b);
}

// One vector (V a batch) or one element (V a scalar) at p, for code written once over V.
template <class V, class T>
inline V load(const T* p) {
  if constexpr (is_batch<V>::value) return V::load_unaligned(p);
  else return *p;
}
template <class V, class T>
inline void store(T* p, const V& v) {
  if constexpr (is_batch<V>::value) v.store_unaligned(p);
  else *p = v;
}
// Calls f(V{}, i) over [0, n): V is a batch on the vector body, T on the scalar tail.
template <class T, class F>
inline void loop(int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  int64_t i = 0;
  for (; i + W <= n; i += W) f(batch<T>{}, i);
  for (; i < n; ++i) f(T{}, i);
}
// Σ_i f(V{}, i), with vector accumulators.
template <class T, class F>
inline T sum_of(int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  batch<T> acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc += f(batch<T>{}, i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += f(T{}, i);
  return s;
}

// y[i] = f(x[i]) over [0, n).
template <class T, class F>
inline void apply(const T* x, T* y, int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  int64_t i = 0;
  for (; i + W <= n; i += W) f(batch<T>::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(x[i]);
}
// y[i] = x[i], inline: for the short rows of head splits and GEMM packing a memcpy call costs
// more than the copy.
template <class T>
inline void copy(const T* x, T* y, int64_t n) {
  apply(x, y, n, [](auto v) { return v; });
}
// y[i] = f(a[i], b[i]).
template <class T, class F>
inline void apply(const T* a, const T* b, T* y, int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  int64_t i = 0;
  for (; i + W <= n; i += W) f(batch<T>::load_unaligned(a + i), batch<T>::load_unaligned(b + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(a[i], b[i]);
}
// y[i] = f(a[i], b[i], c[i]).
template <class T, class F>
inline void apply(const T* a, const T* b, const T* c, T* y, int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    f(batch<T>::load_unaligned(a + i), batch<T>::load_unaligned(b + i), batch<T>::load_unaligned(c + i))
        .store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(a[i], b[i], c[i]);
}

// x[i] = f(x[i]) in place; returns Σ_i f(x[i]).
template <class T, class F>
inline T apply_sum(T* x, int64_t n, F&& f) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  batch<T> acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const batch<T> y = f(batch<T>::load_unaligned(x + i));
    y.store_unaligned(x + i);
    acc += y;
  }
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) {
    x[i] = f(x[i]);
    s += x[i];
  }
  return s;
}

// Sum, max and dot of a contiguous range (vector accumulators, then a horizontal reduction).
template <class T>
inline T sum(const T* x, int64_t n) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  batch<T> acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc += batch<T>::load_unaligned(x + i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}
template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  batch<T> acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = xsimd::fma(batch<T>::load_unaligned(a + i), batch<T>::load_unaligned(b + i), acc);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
template <class T>
inline T max(const T* x, int64_t n) {
  constexpr int64_t W = static_cast<int64_t>(batch<T>::size);
  T m = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if (n >= W) {
    batch<T> acc = batch<T>::load_unaligned(x);
    for (i = W; i + W <= n; i += W) acc = xsimd::max(acc, batch<T>::load_unaligned(x + i));
    alignas(64) T buf[W];
    acc.store_aligned(buf);
    for (int64_t k = 0; k < W; ++k) m = std::max(m, buf[k]);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

}  // namespace sinklab::simd
