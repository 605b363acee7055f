// Rotary position embedding of q or k as tape nodes: rope(x, table, offset) rotates x [..., T, d];
// rope_heads rotates heads read straight out of a projection [B, T, N]. The convention is
// LLaMA / Hugging Face "rotate-half" — channel i pairs with i + d/2 (not the interleaved
// 2i, 2i+1 pairs of the original RoFormer code):
//   θ_i = base^(−2i/d),  i < d/2,  angle = p·θ_i at position p = offset + t
//   y[i]       = x[i]·cos − x[i+d/2]·sin
//   y[i+d/2]   = x[i+d/2]·cos + x[i]·sin
// so ⟨RoPE(q, m), RoPE(k, n)⟩ depends on m − n only. cos/sin tables [len, d/2] are computed in
// double and cached per (len, d) in a RopeTable.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

// cos/sin of p·θ_i for p < len and i < d/2, as [len, d/2] tensors.
template <class T, class D = cpu>
struct RopeTable {
  double base = 10000.0;
  int64_t dim = 0;
  Tensor<T, D> cos, sin;

  int64_t length() const { return cos.defined() ? cos.shape()[0] : 0; }

  // Makes the table cover at least `len` positions for head size d (recomputed when d or the
  // base changed, or when len grows; the tensors are shared with nodes that captured them).
  void ensure(int64_t len, int64_t d, double theta) {
    if (cos.defined() && d == dim && theta == base && len <= length()) return;
    const int64_t half = d / 2;
    const int64_t n = std::max(len, cos.defined() && d == dim && theta == base ? 2 * length() : len);
    std::vector<T> c(static_cast<std::size_t>(n * half)), s(c.size());  // on the host, then to the device
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      for (int64_t p = 0; p < n; ++p) {
        const double a = static_cast<double>(p) * inv_freq;
        c[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::cos(a));
        s[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::sin(a));
      }
    }
    cos = Tensor<T, D>::from({n, half}, c);
    sin = Tensor<T, D>::from({n, half}, s);
    dim = d;
    base = theta;
  }
};

namespace detail {
template <class T, class D>
void check_rope_table(const RopeTable<T, D>& table, int64_t d, int64_t offset, int64_t tlen, const Shape& shape) {
  SINKLAB_CHECK(d % 2 == 0, "rope: head size must be even, got input of shape ", shape);
  SINKLAB_CHECK(table.dim == d, "rope: table built for head size ", table.dim, ", input of shape ", shape);
  SINKLAB_CHECK(offset >= 0 && offset + tlen <= table.length(), "rope: positions [", offset, ", ", offset + tlen,
                ") exceed the table's ", table.length(), " (input of shape ", shape, ")");
}
}  // namespace detail

// RoPE of x [..., T, d] at positions offset + t using `table` (which must cover them).
template <class T, class D>
Var<T, D> rope(Var<T, D> x, const RopeTable<T, D>& table, int64_t offset = 0) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 2, "rope: input must be [..., T, d], got ",
                x.defined() ? x.shape() : Shape{});
  const Tensor<T, D> xv = x.value().contiguous();
  const int64_t d = xv.shape()[-1], tlen = xv.shape()[-2], outer = xv.numel() / std::max<int64_t>(d * tlen, 1);
  detail::check_rope_table(table, d, offset, tlen, xv.shape());
  const Tensor<T, D> c = table.cos, s = table.sin;
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::rope_rotate(xv.data(), y.data(), c.data(), s.data(), outer, tlen, d, offset, T(1));
  return x.tape->record(y, {x}, [x, c, s, outer, tlen, d, offset](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx = Tensor<T, D>::empty(g.shape());
    backend<D>::rope_rotate(g.data(), gx.data(), c.data(), s.data(), outer, tlen, d, offset, T(-1));
    t.accumulate(x, std::move(gx));
  });
}

// Heads split out of a projection and rotated in one pass: columns [col0, col0 + heads·d) of
// x [B, T, N] as [B, heads, T, d] with RoPE at positions offset + t, equal to
// rope(split_heads(x, col0, heads, d), table, offset) without the intermediate copy; the
// backward rotates the gradient back straight into x's gradient.
template <class T, class D>
Var<T, D> rope_heads(Var<T, D> x, int64_t col0, int64_t heads, int64_t d, const RopeTable<T, D>& table, int64_t offset = 0) {
  const Tensor<T, D> xv = x.value().contiguous();
  SINKLAB_CHECK(xv.rank() == 3 && heads > 0 && col0 >= 0 && col0 + heads * d <= xv.size(2), "rope_heads: input ",
                xv.shape(), " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), tlen = xv.size(1), N = xv.size(2);
  detail::check_rope_table(table, d, offset, tlen, xv.shape());
  const Tensor<T, D> c = table.cos, s = table.sin;
  Tensor<T, D> y = Tensor<T, D>::empty({B, heads, tlen, d});
  backend<D>::rope_gather(xv.data(), B, tlen, N, col0, heads, d, c.data(), s.data(), offset, y.data());
  return x.tape->record(y, {x}, [=](Tape<T, D>& tape, const Tensor<T, D>& g) {
    bool fresh = false;
    T* gx = tape.grad_buffer(x, fresh).data();
    backend<D>::rope_gather_grad(g.data(), gx, fresh, B, tlen, N, col0, heads, d, c.data(), s.data(), offset);
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> rope(Var<float>, const RopeTable<float>&, int64_t))
SINKLAB_EXTERN_TEMPLATE(Var<float> rope_heads(Var<float>, int64_t, int64_t, int64_t, const RopeTable<float>&, int64_t))

}  // namespace sinklab::autodiff
