// Differentiable shape operations (reshape, transpose, slice, concat, repeat over a batch) and
// the embedding gather. Outputs are contiguous, so every downstream kernel sees dense rows.
#pragma once
#include <algorithm>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

template <class T, class D>
Var<T, D> reshape(Var<T, D> x, const Shape& shape) {
  const Tensor<T, D>& xv = x.value();
  SINKLAB_CHECK(shape.numel() == xv.numel(), "reshape: cannot reshape ", xv.shape(), " (", xv.numel(),
                " elements) to ", shape, " (", shape.numel(), " elements)");
  const Shape from = xv.shape();
  return x.tape->record(xv.view(shape), {x}, [x, from](Tape<T, D>& t, const Tensor<T, D>& g) {
    t.accumulate(x, g.view(from));
  });
}

// Swaps two axes (the result is a contiguous copy).
template <class T, class D>
Var<T, D> transpose(Var<T, D> x, int a, int b) {
  Tensor<T, D> y = x.value().transpose(a, b).contiguous();
  return x.tape->record(y, {x}, [x, a, b](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::add_into(t.grad_buffer(x), g.transpose(a, b));
  });
}

// Elements [start, end) along an axis.
template <class T, class D>
Var<T, D> slice(Var<T, D> x, int axis, int64_t start, int64_t end) {
  Tensor<T, D> y = x.value().slice(axis, start, end).contiguous();
  return x.tape->record(y, {x}, [x, axis, start, end](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::add_into(t.grad_buffer(x).slice(axis, start, end), g);
  });
}

// Joins tensors along an axis; all other extents must match. (D defaults to cpu so that
// concat<T>({a, b}, axis) names its element type only.)
template <class T, class D = cpu>
Var<T, D> concat(const std::vector<Var<T, D>>& xs, int axis) {
  SINKLAB_CHECK(!xs.empty(), "concat: no inputs");
  const Shape& s0 = xs[0].shape();
  axis = s0.normalize(axis);
  int64_t total = 0;
  for (const Var<T, D>& x : xs) {
    SINKLAB_CHECK(x.tape == xs[0].tape, "concat: inputs come from different tapes");
    const Shape& s = x.shape();
    SINKLAB_CHECK(s.rank() == s0.rank(), "concat: rank mismatch, ", s0, " vs ", s);
    for (int i = 0; i < s.rank(); ++i)
      SINKLAB_CHECK(i == axis || s[i] == s0[i], "concat: shapes ", s0, " and ", s, " differ off axis ", axis);
    total += s[axis];
  }
  Tensor<T, D> y = Tensor<T, D>::empty(s0.with(axis, total));
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Var<T, D>& x : xs) {
    starts.push_back(at);
    y.slice(axis, at, at + x.shape()[axis]).copy_from(x.value());
    at += x.shape()[axis];
  }
  return xs[0].tape->record(y, xs, [xs, starts, axis](Tape<T, D>& t, const Tensor<T, D>& g) {
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (xs[i].requires_grad())
        backend<D>::add_into(t.grad_buffer(xs[i]), g.slice(axis, starts[i], starts[i] + xs[i].shape()[axis]));
  });
}

// Rows of `table` [V, D] gathered by integer ids of any shape → [ids..., D].
template <class T, class D>
Var<T, D> embedding(Var<T, D> table, const Tensor<int32_t, D>& ids) {
  const Tensor<T, D>& tv = table.value();
  SINKLAB_CHECK(tv.rank() == 2, "embedding: table must be [vocab, dim], got ", tv.shape());
  const int64_t V = tv.shape()[0], width = tv.shape()[1];
  const Tensor<int32_t, D> id = ids.contiguous();
  Tensor<T, D> y = Tensor<T, D>::empty(id.shape().appended(width));
  backend<D>::embedding_forward(tv.data(), V, width, id.data(), id.numel(), y.data());
  return table.tape->record(y, {table}, [table, id, width](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::embedding_backward(g.data(), id.data(), id.numel(), width, t.grad_buffer(table).data());
  });
}

// tokens [n, d] repeated over a batch → [B, n, d]; backward sums over the batch.
template <class T, class D>
Var<T, D> repeat_batch(Var<T, D> tok, int64_t batch) {
  SINKLAB_CHECK(tok.defined() && tok.rank() == 2 && batch > 0, "repeat_batch: expected tokens [n, d] and batch > 0, got ",
                tok.defined() ? tok.shape() : Shape{}, " and batch ", batch);
  const Tensor<T, D> tv = tok.value();
  const int64_t n = tv.shape()[0], d = tv.shape()[1], per = n * d;
  Tensor<T, D> y = Tensor<T, D>::empty({batch, n, d});
  backend<D>::repeat(tv.data(), per, batch, y.data());
  return tok.tape->record(y, {tok}, [tok, batch, per](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::repeat_backward(g.data(), per, batch, t.grad_buffer(tok).data());
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
