// Element functions shared by the attention policies, written once as templates over V:
// V is float or double (host, gradient checks, CUDA kernels) or an xsimd batch (CPU loops).
// Calls are unqualified after `using std::exp;` etc., so a batch finds xsimd's overloads by
// argument-dependent lookup and a scalar finds the std (or CUDA device) ones. Nothing here
// allocates, throws or branches on data except through select().
#pragma once
#include <algorithm>
#include <cmath>

#include "sinklab/core/config.hpp"

namespace sinklab::policy::math {

// Scalar form of xsimd::select (a batch_bool does not convert to bool, so batches pick xsimd's).
template <class T>
SINKLAB_HD constexpr T select(bool c, T a, T b) {
  return c ? a : b;
}

template <class V>
SINKLAB_HD V relu(V x) {
  using std::max;
  return max(x, V(0));
}
// d relu / dx, with the convention relu'(0) = 0.
template <class V>
SINKLAB_HD V step(V x) {
  return select(x > V(0), V(1), V(0));
}

// 1 / (1 + e^{-x}); saturates to exactly 0 or 1 for |x| large (no inf/inf).
template <class V>
SINKLAB_HD V sigmoid(V x) {
  using std::exp;
  return V(1) / (V(1) + exp(-x));
}
template <class V>
SINKLAB_HD V sigmoid_grad(V x) {
  const V s = sigmoid(x);
  return s * (V(1) - s);
}

// log(1 + e^x) in the overflow-free form max(x, 0) + log1p(e^{-|x|}).
template <class V>
SINKLAB_HD V softplus(V x) {
  using std::abs;
  using std::exp;
  using std::log1p;
  using std::max;
  return max(x, V(0)) + log1p(exp(-abs(x)));
}

// Φ(x), the standard normal CDF, as erfc(−x/√2)/2: the textbook (1 + erf(x/√2))/2 cancels for
// negative x (at x = −3 a float keeps four digits, at −6 none), erfc does not.
template <class V>
SINKLAB_HD V normal_cdf(V x) {
  using std::erfc;
  return V(0.5) * erfc(x * V(-0.70710678118654752440));
}

// Exact GELU x·Φ(x) (torch's default, the erf form, computed through erfc), and its derivative
// Φ(x) + x·φ(x).
template <class V>
SINKLAB_HD V gelu(V x) {
  return x * normal_cdf(x);
}
template <class V>
SINKLAB_HD V gelu_grad(V x) {
  using std::exp;
  return normal_cdf(x) + x * V(0.39894228040143267794) * exp(V(-0.5) * x * x);
}

// x^p for an integer p >= 0 by repeated multiplication (defined for negative x, unlike pow).
template <class V>
SINKLAB_HD V ipow(V x, int p) {
  V r(1);
  for (int i = 0; i < p; ++i) r = r * x;
  return r;
}

template <class V>
SINKLAB_HD V clamp01(V x) {
  using std::max;
  using std::min;
  return min(max(x, V(0)), V(1));
}

}  // namespace sinklab::policy::math
