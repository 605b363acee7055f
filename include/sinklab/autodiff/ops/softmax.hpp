// Differentiable softmax, log-softmax (over the last axis) and cross-entropy.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

template <class T, class D>
Var<T, D> softmax(Var<T, D> x) {
  const Tensor<T, D>& xv = x.value();
  SINKLAB_CHECK(xv.rank() >= 1, "softmax: needs rank >= 1, got ", xv.shape());
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::softmax_rows(xv.data(), y.data(), rows, n);
  return x.tape->record(y, {x}, [x, y, rows, n](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::softmax_rows_backward(y.data(), g.data(), t.grad_buffer(x).data(), rows, n);
  });
}

template <class T, class D>
Var<T, D> log_softmax(Var<T, D> x) {
  const Tensor<T, D>& xv = x.value();
  SINKLAB_CHECK(xv.rank() >= 1, "log_softmax: needs rank >= 1, got ", xv.shape());
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::log_softmax_rows(xv.data(), y.data(), rows, n);
  return x.tape->record(y, {x}, [x, y, rows, n](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::log_softmax_rows_backward(y.data(), g.data(), t.grad_buffer(x).data(), rows, n);
  });
}

// Mean cross-entropy of logits [..., V] against integer targets [...]; targets equal to
// ignore_index are left out of the mean (0 when every target is ignored). The backward
// recomputes the softmax from the saved per-row log-sum-exp, so no [N, V] buffer is kept.
template <class T, class D>
Var<T, D> cross_entropy(Var<T, D> logits, const Tensor<int32_t, D>& targets, int32_t ignore_index = -100) {
  const Tensor<T, D>& xv = logits.value();
  SINKLAB_CHECK(xv.rank() >= 1, "cross_entropy: logits need rank >= 1, got ", xv.shape());
  const int64_t V = xv.shape()[-1], N = xv.numel() / std::max<int64_t>(V, 1);
  SINKLAB_CHECK(targets.numel() == N && targets.rank() == xv.rank() - 1, "cross_entropy: logits ", xv.shape(),
                " need targets of shape ", xv.shape().without(-1), ", got ", targets.shape());
  const Tensor<int32_t, D> tg = targets.contiguous();
  const int64_t count = backend<D>::cross_entropy_count(tg.data(), N, V, ignore_index);
  Tensor<T, D> lse = Tensor<T, D>::empty({N});
  const T total = backend<D>::cross_entropy_forward(xv.data(), tg.data(), N, V, ignore_index, lse.data());
  const T inv = count ? T(1) / static_cast<T>(count) : T(0);
  return logits.tape->record(Tensor<T, D>::scalar(total * inv), {logits},
                             [logits, xv, tg, lse, N, V, inv, ignore_index](Tape<T, D>& t, const Tensor<T, D>& g) {
                               backend<D>::cross_entropy_backward(xv.data(), tg.data(), lse.data(), N, V, ignore_index,
                                                                  g.item() * inv, t.grad_buffer(logits).data());
                             });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> softmax(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> log_softmax(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> cross_entropy(Var<float>, const Tensor<int32_t>&, int32_t))

}  // namespace sinklab::autodiff
