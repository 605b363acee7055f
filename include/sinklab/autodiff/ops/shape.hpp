// Differentiable shape operations (reshape, transpose, slice, concat, repeat over a batch) and
// the embedding gather. Outputs are contiguous, so every downstream kernel sees dense rows.
#pragma once
#include <algorithm>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"

namespace sinklab::autodiff {

namespace detail {
// dst (any strides) += src (same shape).
template <class T>
void add_into(Tensor<T> dst, const Tensor<T>& src) {
  const Tensor<T> s = src.contiguous();
  const T* p = s.data();
  T* d = dst.data();
  int64_t k = 0;
  dst.for_each_offset([&](int64_t o) { d[o] += p[k++]; });
}
}  // namespace detail

template <class T>
Var<T> reshape(Var<T> x, const Shape& shape) {
  const Tensor<T>& xv = x.value();
  SINKLAB_CHECK(shape.numel() == xv.numel(), "reshape: cannot reshape ", xv.shape(), " (", xv.numel(),
                " elements) to ", shape, " (", shape.numel(), " elements)");
  const Shape from = xv.shape();
  return x.tape->record(xv.view(shape), {x}, [x, from](Tape<T>& t, const Tensor<T>& g) {
    t.accumulate(x, g.view(from));
  });
}

// Swaps two axes (the result is a contiguous copy).
template <class T>
Var<T> transpose(Var<T> x, int a, int b) {
  Tensor<T> y = x.value().transpose(a, b).contiguous();
  return x.tape->record(y, {x}, [x, a, b](Tape<T>& t, const Tensor<T>& g) {
    detail::add_into(t.grad_buffer(x), g.transpose(a, b));
  });
}

// Elements [start, end) along an axis.
template <class T>
Var<T> slice(Var<T> x, int axis, int64_t start, int64_t end) {
  Tensor<T> y = x.value().slice(axis, start, end).contiguous();
  return x.tape->record(y, {x}, [x, axis, start, end](Tape<T>& t, const Tensor<T>& g) {
    detail::add_into(t.grad_buffer(x).slice(axis, start, end), g);
  });
}

// Joins tensors along an axis; all other extents must match.
template <class T>
Var<T> concat(const std::vector<Var<T>>& xs, int axis) {
  SINKLAB_CHECK(!xs.empty(), "concat: no inputs");
  const Shape& s0 = xs[0].shape();
  axis = s0.normalize(axis);
  int64_t total = 0;
  for (const Var<T>& x : xs) {
    SINKLAB_CHECK(x.tape == xs[0].tape, "concat: inputs come from different tapes");
    const Shape& s = x.shape();
    SINKLAB_CHECK(s.rank() == s0.rank(), "concat: rank mismatch, ", s0, " vs ", s);
    for (int i = 0; i < s.rank(); ++i)
      SINKLAB_CHECK(i == axis || s[i] == s0[i], "concat: shapes ", s0, " and ", s, " differ off axis ", axis);
    total += s[axis];
  }
  Tensor<T> y = Tensor<T>::empty(s0.with(axis, total));
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Var<T>& x : xs) {
    starts.push_back(at);
    y.slice(axis, at, at + x.shape()[axis]).copy_from(x.value());
    at += x.shape()[axis];
  }
  return xs[0].tape->record(y, xs, [xs, starts, axis](Tape<T>& t, const Tensor<T>& g) {
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (xs[i].requires_grad())
        detail::add_into(t.grad_buffer(xs[i]), g.slice(axis, starts[i], starts[i] + xs[i].shape()[axis]));
  });
}

// Rows of `table` [V, D] gathered by integer ids of any shape → [ids..., D].
template <class T>
Var<T> embedding(Var<T> table, const Tensor<int32_t>& ids) {
  const Tensor<T>& tv = table.value();
  SINKLAB_CHECK(tv.rank() == 2, "embedding: table must be [vocab, dim], got ", tv.shape());
  const int64_t V = tv.shape()[0], D = tv.shape()[1];
  const Tensor<int32_t> id = ids.contiguous();
  const int64_t n = id.numel();
  const int32_t* ip = id.data();
  for (int64_t i = 0; i < n; ++i)
    SINKLAB_CHECK(ip[i] >= 0 && ip[i] < V, "embedding: id ", ip[i], " at position ", i, " is outside [0, ", V,
                  ") for a table of shape ", tv.shape());
  Tensor<T> y = Tensor<T>::empty(id.shape().appended(D));
  parallel_for(0, n, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::copy_n(tv.data() + ip[i] * D, D, y.data() + i * D);
  });
  return table.tape->record(y, {table}, [table, id, D](Tape<T>& t, const Tensor<T>& g) {
    T* gt = t.grad_buffer(table).data();
    const int32_t* ip = id.data();
    for (int64_t i = 0; i < id.numel(); ++i) kernels::cpu::add_inplace(gt + ip[i] * D, g.data() + i * D, D);
  });
}

// tokens [n, d] repeated over a batch → [B, n, d]; backward sums over the batch.
template <class T>
Var<T> repeat_batch(Var<T> tok, int64_t batch) {
  SINKLAB_CHECK(tok.defined() && tok.rank() == 2 && batch > 0, "repeat_batch: expected tokens [n, d] and batch > 0, got ",
                tok.defined() ? tok.shape() : Shape{}, " and batch ", batch);
  const Tensor<T> tv = tok.value();
  const int64_t n = tv.shape()[0], d = tv.shape()[1], per = n * d;
  Tensor<T> y = Tensor<T>::empty({batch, n, d});
  for (int64_t b = 0; b < batch; ++b) std::copy_n(tv.data(), per, y.data() + b * per);
  return tok.tape->record(y, {tok}, [tok, batch, per](Tape<T>& t, const Tensor<T>& g) {
    T* gt = t.grad_buffer(tok).data();
    for (int64_t b = 0; b < batch; ++b) kernels::cpu::add_inplace(gt, g.data() + b * per, per);
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> reshape(Var<float>, const Shape&))
SINKLAB_EXTERN_TEMPLATE(Var<float> transpose(Var<float>, int, int))
SINKLAB_EXTERN_TEMPLATE(Var<float> slice(Var<float>, int, int64_t, int64_t))
SINKLAB_EXTERN_TEMPLATE(Var<float> concat(const std::vector<Var<float>>&, int))
SINKLAB_EXTERN_TEMPLATE(Var<float> embedding(Var<float>, const Tensor<int32_t>&))
SINKLAB_EXTERN_TEMPLATE(Var<float> repeat_batch(Var<float>, int64_t))

}  // namespace sinklab::autodiff
