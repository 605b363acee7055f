// Elementwise kernels on contiguous tensors: unary functions and their derivatives (one
// template over scalar-or-batch each), parallel vectorised loops, and numpy-style
// broadcasting for binary ops with the reverse reduction (sum_to) used by their backward.
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::kernels::cpu {

// Element functions. Each has value(x) and, for the autodiff, grad(x, y, gy) = gy · f'(x)
// written with whichever of x and y = f(x) is cheaper. Activations come from policy/activation.hpp.
namespace fn {
struct Exp {
  template <class V> static V value(V x) { using std::exp; using xsimd::exp; return exp(x); }
  template <class V> static V grad(V, V y, V gy) { return gy * y; }
};
struct Log {
  template <class V> static V value(V x) { using std::log; using xsimd::log; return log(x); }
  template <class V> static V grad(V x, V, V gy) { return gy / x; }
};
// An activation of policy/activation.hpp as an element function (the derivative from y where
// the activation offers that form).
template <act::Activation A>
struct Activation {
  template <class V> static V value(V x) { return A::f(x); }
  template <class V> static V grad(V x, V y, V gy) {
    if constexpr (requires { A::df_from_output(y); }) return gy * A::df_from_output(y);
    else return gy * A::df(x);
  }
};
using Tanh = Activation<act::Tanh>;
using Sigmoid = Activation<act::Sigmoid>;
using Silu = Activation<act::SiLU>;
using Gelu = Activation<act::GELU>;
using Relu = Activation<act::ReLU>;
struct Square {
  template <class V> static V value(V x) { return x * x; }
  template <class V> static V grad(V x, V, V gy) { return V(2) * x * gy; }
};
struct Sqrt {
  template <class V> static V value(V x) { using std::sqrt; using xsimd::sqrt; return sqrt(x); }
  template <class V> static V grad(V, V y, V gy) { return V(0.5) * gy / y; }
};

struct Add { template <class V> V operator()(V a, V b) const { return a + b; } };
struct Sub { template <class V> V operator()(V a, V b) const { return a - b; } };
struct Mul { template <class V> V operator()(V a, V b) const { return a * b; } };
struct Div { template <class V> V operator()(V a, V b) const { return a / b; } };
}  // namespace fn

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

namespace detail {
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
}  // namespace detail

// out = f(a, b) with broadcasting; a and b contiguous.
template <class T, class F>
Tensor<T> broadcast_binary(const Tensor<T>& a_in, const Tensor<T>& b_in, F f, const char* op) {
  const Tensor<T> a = a_in.contiguous(), b = b_in.contiguous();
  if (a.shape() == b.shape()) {
    Tensor<T> out = Tensor<T>::empty(a.shape());
    binary(a.data(), b.data(), out.data(), a.numel(), f);
    return out;
  }
  const Shape os = broadcast_shape(a.shape(), b.shape(), op);
  Tensor<T> out = Tensor<T>::empty(os);
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
template <class T>
Tensor<T> sum_to(const Tensor<T>& g_in, const Shape& target) {
  if (g_in.shape() == target) return g_in;
  const Tensor<T> g = g_in.contiguous();
  Tensor<T> out = Tensor<T>::zeros(target);
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

}  // namespace sinklab::kernels::cpu
