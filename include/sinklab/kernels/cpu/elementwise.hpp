// Elementwise kernels on contiguous tensors: unary functions and their derivatives (one
// template over scalar-or-batch each), parallel vectorised loops, and numpy-style
// broadcasting for binary ops with the reverse reduction (sum_to) used by their backward.
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/broadcast.hpp"
#include "sinklab/policy/activation.hpp"
#include "sinklab/policy/elementwise.hpp"

namespace sinklab::kernels::cpu {

// The element functions (policy/elementwise.hpp) under their kernel-side name.
namespace fn = ::sinklab::elem;

inline constexpr int64_t kElementwiseGrain = int64_t{1} << 14;

// y = F(x) elementwise (x, y contiguous, may alias).
template <class F, class T>
void unary(const T* x, T* y, int64_t n) {
  parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    simd::apply(x + lo, y + lo, hi - lo, [](auto v) { return F::value(v); });
  });
}
// gx = F'(x)·gy, given x, y = F(x) and gy.
template <class F, class T>
void unary_grad(const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    simd::apply(x + lo, y + lo, gy + lo, gx + lo, hi - lo, [](auto a, auto b, auto c) { return F::grad(a, b, c); });
  });
}
// y = f(a, b) over equal-length contiguous ranges.
template <class T, class F>
void binary(const T* a, const T* b, T* y, int64_t n, F f) {
  parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) { simd::apply(a + lo, b + lo, y + lo, hi - lo, f); });
}
// y = f(a, s) with a scalar s.
template <class T, class F>
void binary_scalar(const T* a, T s, T* y, int64_t n, F f) {
  parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    simd::apply(a + lo, y + lo, hi - lo, [&](auto v) { return f(v, decltype(v)(s)); });
  });
}
// y += x.
template <class T>
void add_inplace(T* y, const T* x, int64_t n) {
  binary(y, x, y, n, fn::Add{});
}

using kernels::broadcast_shape;  // the shape math of every device's broadcasting (kernels/broadcast.hpp)
namespace detail {
using kernels::broadcast_strides;
using kernels::dims4;
using kernels::is_trailing;
}  // namespace detail

// out = f(a, b) with broadcasting; a and b contiguous.
template <class T, HostDevice Dev, class F>
Tensor<T, Dev> broadcast_binary(const Tensor<T, Dev>& a_in, const Tensor<T, Dev>& b_in, F f, const char* op) {
  const Tensor<T, Dev> a = a_in.contiguous(), b = b_in.contiguous();
  if (a.shape() == b.shape()) {
    Tensor<T, Dev> out = Tensor<T, Dev>::empty(a.shape());
    binary(a.data(), b.data(), out.data(), a.numel(), f);
    return out;
  }
  const Shape os = broadcast_shape(a.shape(), b.shape(), op);
  Tensor<T, Dev> out = Tensor<T, Dev>::empty(os);
  T* y = out.data();
  if (b.numel() == 1 && a.shape() == os) {
    binary_scalar(a.data(), b.data()[0], y, out.numel(), f);
    return out;
  }
  if (a.numel() == 1 && b.shape() == os) {
    const T s = a.data()[0];
    binary_scalar(b.data(), s, y, out.numel(), [&](auto v, auto sv) { return f(sv, v); });
    return out;
  }
  if (a.shape() == os && detail::is_trailing(b.shape(), os)) {
    const int64_t inner = b.numel(), rows = os.numel() / std::max<int64_t>(inner, 1);
    parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) simd::apply(a.data() + r * inner, b.data(), y + r * inner, inner, f);
    });
    return out;
  }
  if (b.shape() == os && detail::is_trailing(a.shape(), os)) {
    const int64_t inner = a.numel(), rows = os.numel() / std::max<int64_t>(inner, 1);
    parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) simd::apply(a.data(), b.data() + r * inner, y + r * inner, inner, f);
    });
    return out;
  }
  // General case: a rank-4 index walk with zero strides on broadcast axes.
  const auto d = detail::dims4(os);
  const auto sa = detail::broadcast_strides(a.shape(), os), sb = detail::broadcast_strides(b.shape(), os);
  const T* pa = a.data();
  const T* pb = b.data();
  parallel_for(0, d[0] * d[1], 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i0 = r / d[1], i1 = r % d[1];
      T* yo = y + r * d[2] * d[3];
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3) {
          const int64_t oa = i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3];
          const int64_t ob = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3];
          yo[i2 * d[3] + i3] = f(pa[oa], pb[ob]);
        }
    }
  });
  return out;
}

// Sums a gradient of the broadcast shape back to `target` (the reverse of broadcasting).
template <class T, HostDevice Dev>
Tensor<T, Dev> sum_to(const Tensor<T, Dev>& g_in, const Shape& target) {
  if (g_in.shape() == target) return g_in;
  const Tensor<T, Dev> g = g_in.contiguous();
  Tensor<T, Dev> out = Tensor<T, Dev>::zeros(target);
  T* y = out.data();
  const T* pg = g.data();
  if (detail::is_trailing(target, g.shape())) {
    const int64_t inner = target.numel(), rows = g.numel() / std::max<int64_t>(inner, 1);
    for (int64_t r = 0; r < rows; ++r) add_inplace(y, pg + r * inner, inner);
    return out;
  }
  const auto d = detail::dims4(g.shape());
  const auto st = detail::broadcast_strides(target, g.shape());
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < d[0]; ++i0)
    for (int64_t i1 = 0; i1 < d[1]; ++i1)
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3) y[i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3]] += pg[k++];
  return out;
}

// dst (any strides) += src (same shape, contiguous or not).
template <class T, HostDevice Dev>
void add_into(Tensor<T, Dev> dst, const Tensor<T, Dev>& src) {
  const Tensor<T, Dev> s = src.contiguous();
  const T* p = s.data();
  T* d = dst.data();
  int64_t k = 0;
  dst.for_each_offset([&](int64_t o) { d[o] += p[k++]; });
}

// y[i] = table[ids[i]] for rows of width D; throws on an id outside [0, V).
template <class T>
void embedding_forward(const T* table, int64_t V, int64_t D, const int32_t* ids, int64_t n, T* y) {
  for (int64_t i = 0; i < n; ++i)
    SINKLAB_CHECK(ids[i] >= 0 && ids[i] < V, "embedding: id ", ids[i], " at position ", i, " is outside [0, ", V,
                  ") for a table of shape [", V, ", ", D, "]");
  parallel_for(0, n, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::copy_n(table + ids[i] * D, D, y + i * D);
  });
}
// gtable[ids[i]] += g[i] (in order: repeated ids add up deterministically).
template <class T>
void embedding_backward(const T* g, const int32_t* ids, int64_t n, int64_t D, T* gtable) {
  for (int64_t i = 0; i < n; ++i) add_inplace(gtable + ids[i] * D, g + i * D, D);
}

// y = `times` copies of x (per elements each), back to back.
template <class T>
void repeat(const T* x, int64_t per, int64_t times, T* y) {
  for (int64_t b = 0; b < times; ++b) std::copy_n(x, per, y + b * per);
}
// gx += Σ over the copies of g (the backward of repeat).
template <class T>
void repeat_backward(const T* g, int64_t per, int64_t times, T* gx) {
  for (int64_t b = 0; b < times; ++b) add_inplace(gx, g + b * per, per);
}

// y = x^p and gx = gy · p · x^(p−1), with std::pow (exact for whole p and negative x).
template <class T>
void pow_forward(const T* x, T p, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::pow(x[i], p);
}
template <class T>
void pow_backward(const T* x, T p, const T* gy, T* gx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * p * std::pow(x[i], p - T(1));
}

}  // namespace sinklab::kernels::cpu
