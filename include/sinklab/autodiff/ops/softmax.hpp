// Differentiable softmax, log-softmax (over the last axis) and cross-entropy.
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/kernels/cpu/rowwise.hpp"

namespace sinklab::autodiff {

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
}  // namespace detail

template <class T>
Var<T> softmax(Var<T> x) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() >= 1, "softmax: needs rank >= 1, got ", xv.shape());
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::cpu::softmax_rows(xv.data(), y.data(), rows, n);
  return x.tape->record(y, {x}, [x, y, rows, n](Tape<T>& t, const Tensor<T>& g) {
    kernels::cpu::softmax_rows_backward(y.data(), g.data(), t.grad_buffer(x).data(), rows, n);
  });
}

template <class T>
Var<T> log_softmax(Var<T> x) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(xv.rank() >= 1, "log_softmax: needs rank >= 1, got ", xv.shape());
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::cpu::log_softmax_rows(xv.data(), y.data(), rows, n);
  return x.tape->record(y, {x}, [x, y, rows, n](Tape<T>& t, const Tensor<T>& g) {
    kernels::cpu::log_softmax_rows_backward(y.data(), g.data(), t.grad_buffer(x).data(), rows, n);
  });
}

// Mean cross-entropy of logits [..., V] against integer targets [...]; targets equal to
// ignore_index are left out of the mean (0 when every target is ignored). The backward
// recomputes the softmax from the saved per-row log-sum-exp, so no [N, V] buffer is kept.
template <class T>
Var<T> cross_entropy(Var<T> logits, const Tensor<int32_t>& targets, int32_t ignore_index = -100) {
  const Tensor<T>& xv = logits.value();
  SINKLAB_CHECK(xv.rank() >= 1, "cross_entropy: logits need rank >= 1, got ", xv.shape());
  const int64_t V = xv.shape()[-1], N = xv.numel() / std::max<int64_t>(V, 1);
  SINKLAB_CHECK(targets.numel() == N && targets.rank() == xv.rank() - 1, "cross_entropy: logits ", xv.shape(),
                " need targets of shape ", xv.shape().without(-1), ", got ", targets.shape());
  const Tensor<int32_t> tg = targets.contiguous();
  const int32_t* tp = tg.data();
  auto lse = std::make_shared<std::vector<T>>(static_cast<std::size_t>(N));
  int64_t count = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (tp[r] == ignore_index) continue;
    SINKLAB_CHECK(tp[r] >= 0 && tp[r] < V, "cross_entropy: target ", tp[r], " at row ", r, " is outside [0, ", V,
                  ") (ignore_index is ", ignore_index, ")");
    ++count;
  }
  std::vector<T> row_loss(static_cast<std::size_t>(N), T(0));
  const T* x = xv.data();
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (tp[r] == ignore_index) continue;
      const T* xr = x + r * V;
      const T m = simd::max(xr, V);
      const T s = detail::sum_exp(xr, V, m);
      (*lse)[r] = m + std::log(s);
      row_loss[r] = (*lse)[r] - xr[tp[r]];
    }
  });
  T total = 0;
  for (T l : row_loss) total += l;
  const T inv = count ? T(1) / static_cast<T>(count) : T(0);
  return logits.tape->record(Tensor<T>::scalar(total * inv), {logits},
                             [logits, xv, tg, lse, N, V, inv, ignore_index](Tape<T>& t, const Tensor<T>& g) {
                               const T scale = g.item() * inv;
                               T* gx = t.grad_buffer(logits).data();
                               const T* x = xv.data();
                               const int32_t* tp = tg.data();
                               parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)),
                                            [&](int64_t r0, int64_t r1) {
                                              for (int64_t r = r0; r < r1; ++r) {
                                                if (tp[r] == ignore_index) continue;
                                                const T l = (*lse)[r];
                                                const T* xr = x + r * V;
                                                T* gr = gx + r * V;
                                                simd::apply(xr, gr, gr, V, [l, scale](auto xv, auto gv) {
                                                  using std::exp;
                                                  using xsimd::exp;
                                                  using B = decltype(xv);
                                                  return B(scale) * exp(xv - B(l)) + gv;
                                                });
                                                gr[tp[r]] -= scale;
                                              }
                                            });
                             });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> softmax(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> log_softmax(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> cross_entropy(Var<float>, const Tensor<int32_t>&, int32_t))

}  // namespace sinklab::autodiff
