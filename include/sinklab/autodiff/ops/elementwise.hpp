// Differentiable elementwise operations: unary functions, broadcasting binary arithmetic
// and scalar arithmetic, with the usual operators on Var.
#pragma once
#include <type_traits>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

namespace detail {
template <class F, class T, class D>
Var<T, D> unary(Var<T, D> x) {
  const Tensor<T, D>& xv = x.value();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::template unary<F>(xv.data(), y.data(), xv.numel());
  return x.tape->record(y, {x}, [x, xv, y](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx = Tensor<T, D>::empty(xv.shape());
    backend<D>::template unary_grad<F>(xv.data(), y.data(), g.data(), gx.data(), xv.numel());
    t.accumulate(x, std::move(gx));
  });
}
inline void check_same_tape(const void* a, const void* b, const char* op) {
  SINKLAB_CHECK(a == b && a != nullptr, op, ": operands come from different tapes (or are undefined)");
}
}  // namespace detail

template <class T, class D> Var<T, D> exp(Var<T, D> x) { return detail::unary<elem::Exp>(x); }
template <class T, class D> Var<T, D> log(Var<T, D> x) { return detail::unary<elem::Log>(x); }
template <class T, class D> Var<T, D> tanh(Var<T, D> x) { return detail::unary<elem::Tanh>(x); }
template <class T, class D> Var<T, D> sigmoid(Var<T, D> x) { return detail::unary<elem::Sigmoid>(x); }
template <class T, class D> Var<T, D> silu(Var<T, D> x) { return detail::unary<elem::Silu>(x); }
template <class T, class D> Var<T, D> gelu(Var<T, D> x) { return detail::unary<elem::Gelu>(x); }
template <class T, class D> Var<T, D> relu(Var<T, D> x) { return detail::unary<elem::Relu>(x); }
template <class T, class D> Var<T, D> square(Var<T, D> x) { return detail::unary<elem::Square>(x); }
template <class T, class D> Var<T, D> sqrt(Var<T, D> x) { return detail::unary<elem::Sqrt>(x); }

template <class T, class D>
Var<T, D> add(Var<T, D> a, Var<T, D> b) {
  detail::check_same_tape(a.tape, b.tape, "add");
  Tensor<T, D> y = backend<D>::broadcast_binary(a.value(), b.value(), elem::Add{}, "add");
  return a.tape->record(y, {a, b}, [a, b](Tape<T, D>& t, const Tensor<T, D>& g) {
    if (a.requires_grad()) t.accumulate(a, backend<D>::sum_to(g, a.shape()));
    if (b.requires_grad()) t.accumulate(b, backend<D>::sum_to(g, b.shape()));
  });
}

template <class T, class D>
Var<T, D> sub(Var<T, D> a, Var<T, D> b) {
  detail::check_same_tape(a.tape, b.tape, "sub");
  Tensor<T, D> y = backend<D>::broadcast_binary(a.value(), b.value(), elem::Sub{}, "sub");
  return a.tape->record(y, {a, b}, [a, b](Tape<T, D>& t, const Tensor<T, D>& g) {
    if (a.requires_grad()) t.accumulate(a, backend<D>::sum_to(g, a.shape()));
    if (b.requires_grad()) {
      Tensor<T, D> gb = backend<D>::sum_to(g, b.shape()).clone();
      backend<D>::binary_scalar(gb.data(), T(-1), gb.data(), gb.numel(), elem::Mul{});
      t.accumulate(b, std::move(gb));
    }
  });
}

template <class T, class D>
Var<T, D> mul(Var<T, D> a, Var<T, D> b) {
  detail::check_same_tape(a.tape, b.tape, "mul");
  const Tensor<T, D> av = a.value(), bv = b.value();
  Tensor<T, D> y = backend<D>::broadcast_binary(av, bv, elem::Mul{}, "mul");
  return a.tape->record(y, {a, b}, [a, b, av, bv](Tape<T, D>& t, const Tensor<T, D>& g) {
    if (a.requires_grad()) t.accumulate(a, backend<D>::sum_to(backend<D>::broadcast_binary(g, bv, elem::Mul{}, "mul"), av.shape()));
    if (b.requires_grad()) t.accumulate(b, backend<D>::sum_to(backend<D>::broadcast_binary(g, av, elem::Mul{}, "mul"), bv.shape()));
  });
}

template <class T, class D>
Var<T, D> div(Var<T, D> a, Var<T, D> b) {
  detail::check_same_tape(a.tape, b.tape, "div");
  const Tensor<T, D> av = a.value(), bv = b.value();
  Tensor<T, D> y = backend<D>::broadcast_binary(av, bv, elem::Div{}, "div");
  return a.tape->record(y, {a, b}, [a, b, bv, y](Tape<T, D>& t, const Tensor<T, D>& g) {
    const Tensor<T, D> gb = backend<D>::broadcast_binary(g, bv, elem::Div{}, "div");  // g / b
    if (a.requires_grad()) t.accumulate(a, backend<D>::sum_to(gb, a.shape()));
    if (b.requires_grad()) {
      // d(a/b)/db = −(a/b)/b, so gb_b = −(g/b)·y
      Tensor<T, D> gy = backend<D>::broadcast_binary(gb, y, elem::NegMul{}, "div");
      t.accumulate(b, backend<D>::sum_to(gy, bv.shape()));
    }
  });
}

// y = a·x + c with scalars a and c.
template <class T, class D>
Var<T, D> affine(Var<T, D> x, T a, T c) {
  const Tensor<T, D>& xv = x.value();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::binary_scalar(xv.data(), a, y.data(), xv.numel(), elem::MulAdd<T>{c});
  return x.tape->record(y, {x}, [x, a](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx = Tensor<T, D>::empty(g.shape());
    backend<D>::binary_scalar(g.data(), a, gx.data(), g.numel(), elem::Mul{});
    t.accumulate(x, std::move(gx));
  });
}

// y = x^p for a constant exponent (x > 0 unless p is a whole number).
template <class T, class D>
Var<T, D> pow(Var<T, D> x, T p) {
  const Tensor<T, D>& xv = x.value();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::pow_forward(xv.data(), p, y.data(), xv.numel());
  return x.tape->record(y, {x}, [x, xv, p](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx = Tensor<T, D>::empty(g.shape());
    backend<D>::pow_backward(xv.data(), p, g.data(), gx.data(), g.numel());
    t.accumulate(x, std::move(gx));
  });
}

template <class T, class D> Var<T, D> operator+(Var<T, D> a, Var<T, D> b) { return add(a, b); }
template <class T, class D> Var<T, D> operator-(Var<T, D> a, Var<T, D> b) { return sub(a, b); }
template <class T, class D> Var<T, D> operator*(Var<T, D> a, Var<T, D> b) { return mul(a, b); }
template <class T, class D> Var<T, D> operator/(Var<T, D> a, Var<T, D> b) { return div(a, b); }
template <class T, class D> Var<T, D> operator-(Var<T, D> a) { return affine(a, T(-1), T(0)); }

template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator*(Var<T, D> a, S s) { return affine(a, static_cast<T>(s), T(0)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator*(S s, Var<T, D> a) { return affine(a, static_cast<T>(s), T(0)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator/(Var<T, D> a, S s) { return affine(a, T(1) / static_cast<T>(s), T(0)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator+(Var<T, D> a, S s) { return affine(a, T(1), static_cast<T>(s)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator+(S s, Var<T, D> a) { return affine(a, T(1), static_cast<T>(s)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator-(Var<T, D> a, S s) { return affine(a, T(1), -static_cast<T>(s)); }
template <class T, class D, class S, class = std::enable_if_t<std::is_arithmetic_v<S>>>
Var<T, D> operator-(S s, Var<T, D> a) { return affine(a, T(-1), static_cast<T>(s)); }

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
