// The elementwise kernels of the CUDA backend (kernels/cpu/elementwise.hpp's, one for one),
// written against a SIMT context (kernels/simt.hpp) so the same bodies run on a GPU and, in
// tests, on the CPU emulator. The math is the element functions' (policy/elementwise.hpp), so
// both backends share one copy of it.
//
// Layout: a thread per output element, grid-stride, for the maps (unary, binary, broadcasting,
// pow, the embedding gather, repeat, the strided add_into). The kernels that add up several
// inputs into one output (sum_to, embedding_backward, repeat_backward) are also a thread per
// output, walking its inputs in the CPU's order: no atomics, and the sums equal the CPU's bit
// for bit (the launcher hands a trailing sum_to target, a bias, to sum_axis of reduce.hpp,
// which splits a long sum into chunks when the outputs are few). Broadcasting is one general
// rank-4 kernel over strides the CPU's own shape helpers build on the host (the CPU's fast
// paths are only ways of running the same walk).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/kernels/broadcast.hpp"  // broadcast_strides, dims4: the shape math on the host
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

// y = F(x); x and y may alias.
template <class F, class Ctx, class T>
SINKLAB_HD void unary(Ctx& ctx, const T* x, T* y, int64_t n) {
  detail::for_each_element(ctx, n, [&](int64_t k) { y[k] = F::value(x[k]); });
}
// gx = F'(x)·gy, from x, y = F(x) and gy.
template <class F, class Ctx, class T>
SINKLAB_HD void unary_grad(Ctx& ctx, const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  detail::for_each_element(ctx, n, [&](int64_t k) { gx[k] = F::grad(x[k], y[k], gy[k]); });
}
template <class Ctx, class T, class F>
SINKLAB_HD void binary(Ctx& ctx, const T* a, const T* b, T* y, int64_t n, F f) {
  detail::for_each_element(ctx, n, [&](int64_t k) { y[k] = f(a[k], b[k]); });
}
template <class Ctx, class T, class F>
SINKLAB_HD void binary_scalar(Ctx& ctx, const T* a, T s, T* y, int64_t n, F f) {
  detail::for_each_element(ctx, n, [&](int64_t k) { y[k] = f(a[k], s); });
}
template <class Ctx, class T>
SINKLAB_HD void add_inplace(Ctx& ctx, T* y, const T* x, int64_t n) {
  detail::for_each_element(ctx, n, [&](int64_t k) { y[k] = y[k] + x[k]; });
}

// An output index space of rank 4 (leading 1s pad lower ranks) with each operand's element
// strides over it, 0 on the axes it is broadcast along; by value for a kernel argument.
struct BroadcastLayout {
  int64_t dims[4] = {1, 1, 1, 1};
  int64_t a[4] = {}, b[4] = {};
};
inline BroadcastLayout broadcast_layout(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastLayout l;
  const auto d = kernels::dims4(out);
  const auto sa = kernels::broadcast_strides(a, out), sb = kernels::broadcast_strides(b, out);
  for (int i = 0; i < 4; ++i) {
    l.dims[i] = d[i];
    l.a[i] = sa[i];
    l.b[i] = sb[i];
  }
  return l;
}

// y (dense, the broadcast shape) = f(a, b) with a and b contiguous at their broadcast strides.
template <class Ctx, class T, class F>
SINKLAB_HD void broadcast_binary(Ctx& ctx, const T* a, const T* b, T* y, BroadcastLayout l, F f) {
  const int64_t n = l.dims[0] * l.dims[1] * l.dims[2] * l.dims[3];
  detail::for_each_element(ctx, n, [&](int64_t k) {
    int64_t rest = k, oa = 0, ob = 0;
    for (int i = 3; i >= 0; --i) {
      const int64_t idx = rest % l.dims[i];
      rest /= l.dims[i];
      oa += idx * l.a[i];
      ob += idx * l.b[i];
    }
    y[k] = f(a[oa], b[ob]);
  });
}

// The gradient's rank-4 index space, its dense strides, and which of its axes the target keeps
// (the target's stride on them; 0 on the axes summed over).
struct SumToLayout {
  int64_t dims[4] = {1, 1, 1, 1};
  int64_t g[4] = {};
  int64_t target[4] = {};
};
inline SumToLayout sum_to_layout(const Shape& g, const Shape& target) {
  SumToLayout l;
  const auto d = kernels::dims4(g);
  const auto st = kernels::broadcast_strides(target, g);
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    l.dims[i] = d[i];
    l.g[i] = stride;
    l.target[i] = st[i];
    stride *= d[i];
  }
  return l;
}

// y (dense, the target shape) = the sum of g over the axes the target was broadcast along. A
// thread per target element walks its broadcast positions in row-major order, as the CPU's loop
// meets them, and adds them to 0: the CPU's sum, bit for bit. Parallel over the target only, so
// a small target (a bias) gets few threads, each with a long walk.
template <class Ctx, class T>
SINKLAB_HD void sum_to(Ctx& ctx, const T* g, T* y, SumToLayout l) {
  int64_t kept[4], walked[4];  // the target's extents, and the extents each thread walks
  int64_t n = 1;
  for (int i = 0; i < 4; ++i) {
    kept[i] = l.target[i] != 0 ? l.dims[i] : 1;
    walked[i] = l.target[i] != 0 ? 1 : l.dims[i];
    n *= kept[i];
  }
  detail::for_each_element(ctx, n, [&](int64_t t) {
    int64_t base = 0, rest = t;
    for (int i = 3; i >= 0; --i) {
      base += (rest % kept[i]) * l.g[i];
      rest /= kept[i];
    }
    T acc = T(0);
    for (int64_t j0 = 0; j0 < walked[0]; ++j0)
      for (int64_t j1 = 0; j1 < walked[1]; ++j1)
        for (int64_t j2 = 0; j2 < walked[2]; ++j2)
          for (int64_t j3 = 0; j3 < walked[3]; ++j3)
            acc += g[base + j0 * l.g[0] + j1 * l.g[1] + j2 * l.g[2] + j3 * l.g[3]];
    y[t] = acc;
  });
}

// dst's elements at the layout's strides (row-major over its shape) += src (dense). Like
// scatter: the layout must not map two elements to one place.
template <class Ctx, class T>
SINKLAB_HD void add_into(Ctx& ctx, T* dst, const T* src, StridedLayout l) {
  detail::for_each_element(ctx, l.numel(), [&](int64_t k) {
    const int64_t o = l.offset(k);
    dst[o] = dst[o] + src[k];
  });
}

// The first position of an id outside [0, V) into *first (n when there is none): one block,
// each thread the first bad position of its stride, then the block's minimum (simt::block_fold),
// so the launcher can report what the CPU reports.
template <class Ctx>
SINKLAB_HD void embedding_first_bad(Ctx& ctx, const int32_t* ids, int64_t n, int64_t V, int64_t* first) {
  int64_t* scratch = ctx.template shared<int64_t>();
  int64_t mine = n;
  for (int64_t i = ctx.thread(); i < n; i += ctx.threads())
    if (ids[i] < 0 || ids[i] >= V) {
      mine = i;
      break;
    }
  mine = simt::block_fold(ctx, mine, scratch, simt::MinOp{});
  if (ctx.thread() == 0) *first = mine;
}
inline std::size_t embedding_first_bad_shared_bytes(int64_t threads) {
  return simt::block_fold_shared_bytes<int64_t>(threads);
}

// y[i, :] = table[ids[i], :], a thread per element of y; a bad id's row is left unwritten (the
// launcher throws on it, found by embedding_first_bad).
template <class Ctx, class T>
SINKLAB_HD void embedding_forward(Ctx& ctx, const T* table, int64_t V, int64_t D, const int32_t* ids, int64_t n, T* y) {
  detail::for_each_element(ctx, n * D, [&](int64_t k) {
    const int64_t id = ids[k / D];
    if (id >= 0 && id < V) y[k] = table[id * D + k % D];
  });
}
// gtable[ids[i], :] += g[i, :]: a thread per (column, bucket of ids) walking all the ids in order
// and taking those of its bucket (the id's low bits: `buckets` is a power of two), so repeated
// ids add up as on the CPU, bit for bit, without atomics. Buckets multiply the threads beyond
// the D columns; each thread still reads every id (cheap: a warp reads the same one).
template <class Ctx, class T>
SINKLAB_HD void embedding_backward(Ctx& ctx, const T* g, const int32_t* ids, int64_t n, int64_t D, T* gtable,
                                   int32_t buckets = 1) {
  const int32_t mask = buckets - 1;
  detail::for_each_element(ctx, D * buckets, [&](int64_t q) {
    const int32_t bucket = static_cast<int32_t>(q / D);
    const int64_t j = q % D;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = ids[i];
      if ((id & mask) != bucket) continue;
      T& dst = gtable[static_cast<int64_t>(id) * D + j];
      dst = dst + g[i * D + j];
    }
  });
}

// y = `times` copies of x (per elements each), back to back.
template <class Ctx, class T>
SINKLAB_HD void repeat(Ctx& ctx, const T* x, int64_t per, int64_t times, T* y) {
  detail::for_each_element(ctx, per * times, [&](int64_t k) { y[k] = x[k % per]; });
}
// gx += Σ over the copies of g: a thread per element of gx, the copies in order.
template <class Ctx, class T>
SINKLAB_HD void repeat_backward(Ctx& ctx, const T* g, int64_t per, int64_t times, T* gx) {
  detail::for_each_element(ctx, per, [&](int64_t j) {
    T acc = gx[j];
    for (int64_t b = 0; b < times; ++b) acc = acc + g[b * per + j];
    gx[j] = acc;
  });
}

// y = x^p and gx = gy · p · x^(p−1) (pow: exact for whole p and negative x, as std::pow).
template <class Ctx, class T>
SINKLAB_HD void pow_forward(Ctx& ctx, const T* x, T p, T* y, int64_t n) {
  using std::pow;
  detail::for_each_element(ctx, n, [&](int64_t k) { y[k] = pow(x[k], p); });
}
template <class Ctx, class T>
SINKLAB_HD void pow_backward(Ctx& ctx, const T* x, T p, const T* gy, T* gx, int64_t n) {
  using std::pow;
  detail::for_each_element(ctx, n, [&](int64_t k) { gx[k] = gy[k] * p * pow(x[k], p - T(1)); });
}

}  // namespace sinklab::kernels::cuda
