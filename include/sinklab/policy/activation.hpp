// act:: — the one vocabulary of activation functions. Each is a struct with SINKLAB_HD static
// templates over V (float, double, an xsimd batch, or a CUDA thread's scalar):
//   f(x)    the value
//   df(x)   the derivative
// and optionally
//   eval(x, f, df)        both at once, sharing work (SiLU and GELU share σ or Φ)
//   df_from_output(y)     the derivative from y = f(x) when that is cheaper (sigmoid, tanh)
// Every user of an activation takes it from here: the point-wise attention scores (score::fn is
// this namespace), the gate-activation node of the GLU feed-forwards and GatedNorm
// (autodiff::act_mul<act::SiLU>), and the elementwise autodiff ops (autodiff::gelu, ...).
// A user-defined activation is any struct with f and df (the Activation concept).
#pragma once
#include <cmath>
#include <concepts>

#include "sinklab/core/config.hpp"
#include "sinklab/policy/math.hpp"

namespace sinklab::act {

struct Identity {
  static constexpr const char* name = "identity";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return x;
  }
  template <class V>
  SINKLAB_HD static V df(V /*x*/) {
    return V(1);
  }
};

struct ReLU {
  static constexpr const char* name = "relu";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return policy::math::relu(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    return policy::math::step(x);
  }
};

// relu(x)²
struct ReLU2 {
  static constexpr const char* name = "relu2";
  template <class V>
  SINKLAB_HD static V f(V x) {
    const V r = policy::math::relu(x);
    return r * r;
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    return V(2) * policy::math::relu(x);
  }
};

// Exact GELU x·Φ(x) (PyTorch's default; Φ through erfc, policy::math::normal_cdf).
struct GELU {
  static constexpr const char* name = "gelu";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return policy::math::gelu(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    return policy::math::gelu_grad(x);
  }
  template <class V>
  SINKLAB_HD static void eval(V x, V& f, V& df) {
    using std::exp;
    const V cdf = policy::math::normal_cdf(x);
    f = x * cdf;
    df = cdf + x * V(0.39894228040143267794) * exp(V(-0.5) * x * x);
  }
};

struct Softplus {
  static constexpr const char* name = "softplus";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return policy::math::softplus(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    return policy::math::sigmoid(x);
  }
};

struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return policy::math::sigmoid(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    return policy::math::sigmoid_grad(x);
  }
  template <class V>
  SINKLAB_HD static void eval(V x, V& f, V& df) {
    const V s = policy::math::sigmoid(x);
    f = s;
    df = s * (V(1) - s);
  }
  template <class V>
  SINKLAB_HD static V df_from_output(V y) {
    return y * (V(1) - y);
  }
};

// x·σ(x) (swish with β = 1; SwiGLU's activation).
struct SiLU {
  static constexpr const char* name = "silu";
  template <class V>
  SINKLAB_HD static V f(V x) {
    return x * policy::math::sigmoid(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    const V s = policy::math::sigmoid(x);
    return s * (V(1) + x * (V(1) - s));
  }
  template <class V>
  SINKLAB_HD static void eval(V x, V& f, V& df) {
    const V s = policy::math::sigmoid(x);
    f = x * s;
    df = s * (V(1) + x * (V(1) - s));
  }
};

struct Tanh {
  static constexpr const char* name = "tanh";
  template <class V>
  SINKLAB_HD static V f(V x) {
    using std::tanh;
    return tanh(x);
  }
  template <class V>
  SINKLAB_HD static V df(V x) {
    const V y = f(x);
    return V(1) - y * y;
  }
  template <class V>
  SINKLAB_HD static V df_from_output(V y) {
    return V(1) - y * y;
  }
};

// What every activation provides.
template <class A>
concept Activation = requires(double x) {
  { A::name } -> std::convertible_to<const char*>;
  { A::f(x) } -> std::convertible_to<double>;
  { A::df(x) } -> std::convertible_to<double>;
};

// f and df together: A::eval when it has one, else the two calls.
template <Activation A, class V>
SINKLAB_HD void eval(V x, V& f, V& df) {
  if constexpr (requires { A::eval(x, f, df); }) {
    A::eval(x, f, df);
  } else {
    f = A::f(x);
    df = A::df(x);
  }
}

}  // namespace sinklab::act
