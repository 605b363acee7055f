// Differentiable elementwise operations: unary functions, broadcasting binary arithmetic
// and scalar arithmetic, with the usual operators on Var.
#pragma once
#include <type_traits>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"

namespace sinklab::autodiff {

namespace detail {
template <class F, class T>
Var<T> unary(Var<T> x) {
  const Tensor<T>& xv = x.value();
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::cpu::unary<F>(xv.data(), y.data(), xv.numel());
  return x.tape->record(y, {x}, [x, xv, y](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(xv.shape());
    kernels::cpu::unary_grad<F>(xv.data(), y.data(), g.data(), gx.data(), xv.numel());
    t.accumulate(x, std::move(gx));
  });
}
inline void check_same_tape(const void* a, const void* b, const char* op) {
  SINKLAB_CHECK(a == b && a != nullptr, op, ": operands come from different tapes (or are undefined)");
}
}  // namespace detail

template <class T> Var<T> exp(Var<T> x) { return detail::unary<kernels::cpu::fn::Exp>(x); }
template <class T> Var<T> log(Var<T> x) { return detail::unary<kernels::cpu::fn::Log>(x); }
template <class T> Var<T> tanh(Var<T> x) { return detail::unary<kernels::cpu::fn::Tanh>(x); }
template <class T> Var<T> sigmoid(Var<T> x) { return detail::unary<kernels::cpu::fn::Sigmoid>(x); }
template <class T> Var<T> silu(Var<T> x) { return detail::unary<kernels::cpu::fn::Silu>(x); }
template <class T> Var<T> gelu(Var<T> x) { return detail::unary<kernels::cpu::fn::Gelu>(x); }
template <class T> Var<T> relu(Var<T> x) { return detail::unary<kernels::cpu::fn::Relu>(x); }
template <class T> Var<T> square(Var<T> x) { return detail::unary<kernels::cpu::fn::Square>(x); }
template <class T> Var<T> sqrt(Var<T> x) { return detail::unary<kernels::cpu::fn::Sqrt>(x); }

template <class T>
Var<T> add(Var<T> a, Var<T> b) {
  detail::check_same_tape(a.tape, b.tape, "add");
  Tensor<T> y = kernels::cpu::broadcast_binary(a.value(), b.value(), kernels::cpu::fn::Add{}, "add");
  return a.tape->record(y, {a, b}, [a, b](Tape<T>& t, const Tensor<T>& g) {
    if (a.requires_grad()) t.accumulate(a, kernels::cpu::sum_to(g, a.shape()));
    if (b.requires_grad()) t.accumulate(b, kernels::cpu::sum_to(g, b.shape()));
  });
}

template <class T>
Var<T> sub(Var<T> a, Var<T> b) {
  detail::check_same_tape(a.tape, b.tape, "sub");
  Tensor<T> y = kernels::cpu::broadcast_binary(a.value(), b.value(), kernels::cpu::fn::Sub{}, "sub");
  return a.tape->record(y, {a, b}, [a, b](Tape<T>& t, const Tensor<T>& g) {
    if (a.requires_grad()) t.accumulate(a, kernels::cpu::sum_to(g, a.shape()));
    if (b.requires_grad()) {
      Tensor<T> gb = kernels::cpu::sum_to(g, b.shape()).clone();
      kernels::cpu::binary_scalar(gb.data(), T(-1), gb.data(), gb.numel(), kernels::cpu::fn::Mul{});
      t.accumulate(b, std::move(gb));
    }
  });
}

template <class T>
Var<T> mul(Var<T> a, Var<T> b) {
  detail::check_same_tape(a.tape, b.tape, "mul");
  const Tensor<T> av = a.value(), bv = b.value();
  Tensor<T> y = kernels::cpu::broadcast_binary(av, bv, kernels::cpu::fn::Mul{}, "mul");
  return a.tape->record(y, {a, b}, [a, b, av, bv](Tape<T>& t, const Tensor<T>& g) {
    using kernels::cpu::broadcast_binary;
    if (a.requires_grad()) t.accumulate(a, kernels::cpu::sum_to(broadcast_binary(g, bv, kernels::cpu::fn::Mul{}, "mul"), av.shape()));
    if (b.requires_grad()) t.accumulate(b, kernels::cpu::sum_to(broadcast_binary(g, av, kernels::cpu::fn::Mul{}, "mul"), bv.shape()));
  });
}

template <class T>
Var<T> div(Var<T> a, Var<T> b) {
  detail::check_same_tape(a.tape, b.tape, "div");
  const Tensor<T> av = a.value(), bv = b.value();
  Tensor<T> y = kernels::cpu::broadcast_binary(av, bv, kernels::cpu::fn::Div{}, "div");
  return a.tape->record(y, {a, b}, [a, b, bv, y](Tape<T>& t, const Tensor<T>& g) {
    using kernels::cpu::broadcast_binary;
    const Tensor<T> gb = broadcast_binary(g, bv, kernels::cpu::fn::Div{}, "div");  // g / b
    if (a.requires_grad()) t.accumulate(a, kernels::cpu::sum_to(gb, a.shape()));
    if (b.requires_grad()) {
      // d(a/b)/db = −(a/b)/b, so gb_b = −(g/b)·y
      Tensor<T> gy = broadcast_binary(gb, y, [](auto p, auto q) { return -(p * q); }, "div");
      t.accumulate(b, kernels::cpu::sum_to(gy, bv.shape()));
    }
  });
}

// y = a·x + c with scalars a and c.
template <class T>
Var<T> affine(Var<T> x, T a, T c) {
  const Tensor<T>& xv = x.value();
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::cpu::binary_scalar(xv.data(), a, y.data(), xv.numel(),
                              [c](auto v, auto s) { return v * s + decltype(v)(c); });
  return x.tape->record(y, {x}, [x, a](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(g.shape());
    kernels::cpu::binary_scalar(g.data(), a, gx.data(), g.numel(), kernels::cpu::fn::Mul{});
    t.accumulate(x, std::move(gx));
  });
}

// y = x^p for a constant exponent (x > 0 unless p is a whole number).
template <class T>
Var<T> pow(Var<T> x, T p) {
  const Tensor<T>& xv = x.value();
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  const T* xs = xv.data();
  T* ys = y.data();
  for (int64_t i = 0; i < xv.numel(); ++i) ys[i] = std::pow(xs[i], p);
  return x.tape->record(y, {x}, [x, xv, p](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(g.shape());
    const T* xs = xv.data();
    for (int64_t i = 0; i < g.numel(); ++i) gx.data()[i] = g.data()[i] * p * std::pow(xs[i], p - T(1));
    t.accumulate(x, std::move(gx));
  });
}

template <class T> Var<T> operator+(Var<T> a, Var<T> b) { return add(a, b); }
template <class T> Var<T> operator-(Var<T> a, Var<T> b) { return sub(a, b); }
template <class T> Var<T> operator*(Var<T> a, Var<T> b) { return mul(a, b); }
template <class T> Var<T> operator/(Var<T> a, Var<T> b) { return div(a, b); }
template <class T> Var<T> operator-(Var<T> a) { return affine(a, T(-1), T(0)); }

template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator*(Var<T> a, S s) { return affine(a, static_cast<T>(s), T(0)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator*(S s, Var<T> a) { return affine(a, static_cast<T>(s), T(0)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator/(Var<T> a, S s) { return affine(a, T(1) / static_cast<T>(s), T(0)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator+(Var<T> a, S s) { return affine(a, T(1), static_cast<T>(s)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator+(S s, Var<T> a) { return affine(a, T(1), static_cast<T>(s)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator-(Var<T> a, S s) { return affine(a, T(1), -static_cast<T>(s)); }
template <class T, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T> operator-(S s, Var<T> a) { return affine(a, T(-1), static_cast<T>(s)); }

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> exp(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> log(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> tanh(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> sigmoid(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> silu(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> gelu(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> relu(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> square(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> sqrt(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> add(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> sub(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> mul(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> div(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> affine(Var<float>, float, float))
SINKLAB_EXTERN_TEMPLATE(Var<float> pow(Var<float>, float))

}  // namespace sinklab::autodiff
