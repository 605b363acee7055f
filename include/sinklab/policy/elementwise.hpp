// Element functions, written once over a scalar or a SIMD batch V: each has value(x) and, for the
// autodiff, grad(x, y, gy) = gy · f'(x) written with whichever of x and y = f(x) is cheaper; binary
// ones are plain functors. Device-neutral: every backend's elementwise kernels take them as
// template arguments. Activations come from policy/activation.hpp.
#pragma once
#include <cmath>

#include "sinklab/core/simd.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/policy/activation.hpp"
#include "sinklab/policy/math.hpp"

namespace sinklab::elem {

struct Exp {
  template <class V> SINKLAB_HD static V value(V x) { using std::exp; using xsimd::exp; return exp(x); }
  template <class V> SINKLAB_HD static V grad(V, V y, V gy) { return gy * y; }
};
struct Log {
  template <class V> SINKLAB_HD static V value(V x) { using std::log; using xsimd::log; return log(x); }
  template <class V> SINKLAB_HD static V grad(V x, V, V gy) { return gy / x; }
};
// An activation of policy/activation.hpp as an element function (the derivative from y where
// the activation offers that form).
template <act::Activation A>
struct Activation {
  template <class V> SINKLAB_HD static V value(V x) { return A::f(x); }
  template <class V> SINKLAB_HD static V grad(V x, V y, V gy) {
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
  template <class V> SINKLAB_HD static V value(V x) { return x * x; }
  template <class V> SINKLAB_HD static V grad(V x, V, V gy) { return V(2) * x * gy; }
};
struct Sqrt {
  template <class V> SINKLAB_HD static V value(V x) { using std::sqrt; using xsimd::sqrt; return sqrt(x); }
  template <class V> SINKLAB_HD static V grad(V, V y, V gy) { return V(0.5) * gy / y; }
};

struct Add { template <class V> SINKLAB_HD V operator()(V a, V b) const { return a + b; } };
struct Sub { template <class V> SINKLAB_HD V operator()(V a, V b) const { return a - b; } };
struct Mul { template <class V> SINKLAB_HD V operator()(V a, V b) const { return a * b; } };
struct Div { template <class V> SINKLAB_HD V operator()(V a, V b) const { return a / b; } };
struct NegMul { template <class V> SINKLAB_HD V operator()(V a, V b) const { return -(a * b); } };
// x·a + c with a the kernel's scalar operand and c carried here (autodiff::affine).
template <class T>
struct MulAdd {
  T c;
  template <class V> SINKLAB_HD V operator()(V x, V a) const { return x * a + V(c); }
};

// clip(x, c) = min(max(x, −c), c), and its backward: the gradient passes where |x| ≤ c (the
// boundary included, torch.clamp's convention) and is zero where the value was clipped.
struct Clamp {
  template <class V> SINKLAB_HD V operator()(V x, V c) const { return simd::vmin(simd::vmax(x, -c), c); }
};
template <class T>
struct ClampGrad {
  T c;
  template <class V> SINKLAB_HD V operator()(V x, V g) const {
    using std::abs;
    using policy::math::select;  // unqualified: batches find xsimd::select
    return select(abs(x) <= V(c), g, V(0));
  }
};

}  // namespace sinklab::elem
