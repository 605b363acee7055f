// pos:: — position information.
//
//   RoPE     rotary embedding of q or k, x [..., T, d] (usually [B, H, T, d]), one fused node;
//            rope_heads rotates heads read straight out of a projection [B, T, N].
//            Convention: LLaMA / Hugging Face "rotate-half" — channel i pairs with i + d/2
//            (not the interleaved 2i, 2i+1 pairs of the original RoFormer code):
//              θ_i = base^(−2i/d),  i < d/2,  angle = p·θ_i at position p = offset + t
//              y[i]       = x[i]·cos − x[i+d/2]·sin
//              y[i+d/2]   = x[i+d/2]·cos + x[i]·sin
//            so ⟨RoPE(q, m), RoPE(k, n)⟩ depends on m − n only. base (θ) defaults to 10000.
//            cos/sin tables [len, d/2] are computed in double and cached per (len, d).
//   Learned  absolute positions: adds rows [offset, offset + T) of a learned table [max_len, d]
//            to x [B, T, d] (init N(0, 0.02); N(0, 1) under nn::Init::pytorch(), as the
//            nn.Embedding of the reference code).
//   None     adds nothing.
//
// Modules follow the nn convention (prefix, dim, rng, Options); RoPE has no parameters.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/heads.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/policy/norm_kernels.hpp"

namespace sinklab::pos {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

// cos/sin of p·θ_i for p < len and i < d/2, as [len, d/2] tensors.
template <class T>
struct RopeTable {
  double base = 10000.0;
  int64_t dim = 0;
  Tensor<T> cos, sin;

  int64_t length() const { return cos.defined() ? cos.shape()[0] : 0; }

  // Makes the table cover at least `len` positions for head size d (recomputed when d or the
  // base changed, or when len grows; the tensors are shared with nodes that captured them).
  void ensure(int64_t len, int64_t d, double theta) {
    if (cos.defined() && d == dim && theta == base && len <= length()) return;
    const int64_t half = d / 2;
    const int64_t n = std::max(len, cos.defined() && d == dim && theta == base ? 2 * length() : len);
    Tensor<T> c = Tensor<T>::empty({n, half}), s = Tensor<T>::empty({n, half});
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      for (int64_t p = 0; p < n; ++p) {
        const double a = static_cast<double>(p) * inv_freq;
        c.data()[p * half + i] = static_cast<T>(std::cos(a));
        s.data()[p * half + i] = static_cast<T>(std::sin(a));
      }
    }
    cos = c;
    sin = s;
    dim = d;
    base = theta;
  }
};

namespace kernels {
// One row of RoPE at position p: y = rotate(x) (sign +1) or its inverse, the transpose, used by
// the backward (sign −1); with `add` the result is added to y instead of written.
template <class T>
inline void rope_row(const T* x, T* y, const T* cos_p, const T* sin_p, int64_t half, T sign, bool add) {
  using namespace norm::kernels::detail;
  const T* x2 = x + half;
  T* y2 = y + half;
  loop<T>(half, [&](auto v, int64_t i) {
    using V = decltype(v);
    const V a = vload<V>(x + i), b = vload<V>(x2 + i);
    const V c = vload<V>(cos_p + i), s = vload<V>(sin_p + i) * V(sign);
    V o1 = a * c - b * s, o2 = b * c + a * s;
    if (add) {
      o1 += vload<V>(y + i);
      o2 += vload<V>(y2 + i);
    }
    vstore(y + i, o1);
    vstore(y2 + i, o2);
  });
}

// Rotates every row of x [outer, T, d] by the angles of positions offset..offset+T−1.
template <class T>
void rope_rotate(const T* x, T* y, const T* cos, const T* sin, int64_t outer, int64_t tlen, int64_t d, int64_t offset,
                 T sign) {
  using namespace norm::kernels::detail;
  const int64_t half = d / 2;
  parallel_for(0, outer * tlen, row_grain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t p = offset + r % tlen;
      rope_row(x + r * d, y + r * d, cos + p * half, sin + p * half, half, sign, false);
    }
  });
}
// Columns [col0, col0 + heads·d) of x [B, L, N] as heads y [B, heads, L, d], rotated to
// positions offset + t: the split and RoPE in one pass.
template <class T>
void rope_gather(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, const T* cos,
                 const T* sin, int64_t offset, T* y) {
  const int64_t half = d / 2;
  nn::gather_heads(x, B, L, N, col0, heads, d, y, [&](const T* src, T* dst, int64_t t) {
    const int64_t p = offset + t;
    rope_row(src, dst, cos + p * half, sin + p * half, half, T(1), false);
  });
}
}  // namespace kernels

namespace detail {
template <class T>
void check_rope_table(const RopeTable<T>& table, int64_t d, int64_t offset, int64_t tlen, const Shape& shape) {
  SINKLAB_CHECK(d % 2 == 0, "rope: head size must be even, got input of shape ", shape);
  SINKLAB_CHECK(table.dim == d, "rope: table built for head size ", table.dim, ", input of shape ", shape);
  SINKLAB_CHECK(offset >= 0 && offset + tlen <= table.length(), "rope: positions [", offset, ", ", offset + tlen,
                ") exceed the table's ", table.length(), " (input of shape ", shape, ")");
}
}  // namespace detail

// RoPE of x [..., T, d] at positions offset + t using `table` (which must cover them).
template <class T>
Var<T> rope(Var<T> x, const RopeTable<T>& table, int64_t offset = 0) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 2, "rope: input must be [..., T, d], got ",
                x.defined() ? x.shape() : Shape{});
  const Tensor<T> xv = x.value().contiguous();
  const int64_t d = xv.shape()[-1], tlen = xv.shape()[-2], outer = xv.numel() / std::max<int64_t>(d * tlen, 1);
  detail::check_rope_table(table, d, offset, tlen, xv.shape());
  const Tensor<T> c = table.cos, s = table.sin;
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::rope_rotate(xv.data(), y.data(), c.data(), s.data(), outer, tlen, d, offset, T(1));
  return x.tape->record(y, {x}, [x, c, s, outer, tlen, d, offset](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(g.shape());
    kernels::rope_rotate(g.data(), gx.data(), c.data(), s.data(), outer, tlen, d, offset, T(-1));
    t.accumulate(x, std::move(gx));
  });
}

// Heads split out of a projection and rotated in one pass: columns [col0, col0 + heads·d) of
// x [B, T, N] as [B, heads, T, d] with RoPE at positions offset + t, equal to
// rope(nn::split_heads(x, col0, heads, d), table, offset) without the intermediate copy; the
// backward rotates the gradient back straight into x's gradient.
template <class T>
Var<T> rope_heads(Var<T> x, int64_t col0, int64_t heads, int64_t d, const RopeTable<T>& table, int64_t offset = 0) {
  const Tensor<T> xv = x.value().contiguous();
  SINKLAB_CHECK(xv.rank() == 3 && heads > 0 && col0 >= 0 && col0 + heads * d <= xv.size(2), "rope_heads: input ",
                xv.shape(), " has no columns [", col0, ", ", col0 + heads * d, ") for ", heads, " heads of ", d);
  const int64_t B = xv.size(0), tlen = xv.size(1), N = xv.size(2);
  detail::check_rope_table(table, d, offset, tlen, xv.shape());
  const Tensor<T> c = table.cos, s = table.sin;
  const int64_t half = d / 2;
  Tensor<T> y = Tensor<T>::empty({B, heads, tlen, d});
  kernels::rope_gather(xv.data(), B, tlen, N, col0, heads, d, c.data(), s.data(), offset, y.data());
  return x.tape->record(y, {x}, [=](Tape<T>& tape, const Tensor<T>& g) {
    nn::scatter_heads_grad(tape, x, g.data(), B, tlen, N, col0, heads, d,
                           [&](const T* src, T* dst, int64_t t, bool add) {
                             const int64_t p = offset + t;
                             kernels::rope_row(src, dst, c.data() + p * half, s.data() + p * half, half, T(-1), add);
                           });
  });
}

struct RoPEOptions {
  double theta = 10000.0;  // the base
};

struct LearnedOptions {
  int64_t max_len = 1024;
  nn::Init init = nn::Init::normal(0.02);
};

struct None {
  static constexpr const char* name = "None";
  struct Options {};
  template <class T>
  struct Module {
    Module() = default;
    Module(std::string, int64_t, Rng&, const Options& = {}) {}
    Var<T> operator()(Tape<T>&, Var<T> x, int64_t /*offset*/ = 0) { return x; }
    template <class V>
    void parameters(V&&) {}
  };
};

struct RoPE {
  static constexpr const char* name = "RoPE";
  using Options = RoPEOptions;
  template <class T>
  struct Module {
    int64_t head_dim = 0;
    double theta = 10000.0;
    std::string name;
    RopeTable<T> table;

    Module() = default;
    Module(std::string prefix, int64_t d, const Options& o = {}) : head_dim(d), theta(o.theta), name(std::move(prefix)) {
      SINKLAB_CHECK(d > 0 && d % 2 == 0, "RoPE '", name, "': head size must be positive and even, got ", d);
      SINKLAB_CHECK(o.theta > 1, "RoPE '", name, "': base theta must be > 1, got ", o.theta);
    }
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& o = {}) : Module(std::move(prefix), d, o) {}

    // x [..., T, head_dim] → rotated, positions offset..offset+T−1.
    Var<T> operator()(Tape<T>& /*tape*/, Var<T> x, int64_t offset = 0) {
      SINKLAB_CHECK(x.defined() && x.rank() >= 2 && x.shape()[-1] == head_dim, "RoPE '", name, "': input of shape ",
                    x.defined() ? x.shape() : Shape{}, ", expected [..., T, ", head_dim, "]");
      SINKLAB_CHECK(offset >= 0, "RoPE '", name, "': negative position offset ", offset);
      table.ensure(offset + x.shape()[-2], head_dim, theta);
      return rope(x, table, offset);
    }
    template <class V>
    void parameters(V&&) {}
  };
};

struct Learned {
  static constexpr const char* name = "Learned";
  using Options = LearnedOptions;
  template <class T>
  struct Module {
    Parameter<T> weight;  // [max_len, dim]
    int64_t max_len = 0, dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : max_len(o.max_len), dim(d), name(std::move(prefix)) {
      SINKLAB_CHECK(d > 0 && max_len > 0, "learned positions '", name, "': sizes must be positive, got max_len=",
                    max_len, " dim=", d);
      weight = Parameter<T>(nn::join_name(name, "weight"),
                            nn::make_tensor<T>({max_len, dim}, o.init.for_embedding(), rng));
    }

    // x [..., T, dim] + table[offset : offset + T].
    Var<T> operator()(Tape<T>& tape, Var<T> x, int64_t offset = 0) {
      SINKLAB_CHECK(x.defined() && x.rank() >= 2 && x.shape()[-1] == dim, "learned positions '", name,
                    "': input of shape ", x.defined() ? x.shape() : Shape{}, ", expected [..., T, ", dim, "]");
      const int64_t tlen = x.shape()[-2];
      SINKLAB_CHECK(offset >= 0 && offset + tlen <= max_len, "learned positions '", name, "': positions [", offset,
                    ", ", offset + tlen, ") exceed max_len ", max_len, " (input of shape ", x.shape(), ")");
      Var<T> table = tape.param(weight);
      if (offset != 0 || tlen != max_len) table = autodiff::slice(table, 0, offset, offset + tlen);
      return x + table;
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
    }
  };
};

template <class P>
inline constexpr bool is_policy_v =
    std::is_same_v<P, None> || std::is_same_v<P, RoPE> || std::is_same_v<P, Learned>;

template <class P, class T>
using module_t = typename P::template Module<T>;

}  // namespace sinklab::pos
