// The CUDA backend's elementwise kernels and reductions (kernels/cuda/elementwise.hpp,
// reduce.hpp) on the SIMT emulator against the CPU backend (kernels/cpu/elementwise.hpp,
// reduce.hpp), in double and float. Grids are smaller than the data so the grid-stride loops
// wrap, and sizes are not multiples of a warp. Where the kernel adds in the CPU's order (maps,
// sum_to, embedding_backward, repeat_backward, sum_axis with inner > 1, max_axis) the results
// must be equal bit for bit; the rest agree to rounding (element functions the CPU runs through
// xsimd's math, and row sums the CPU adds in SIMD lanes).
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"
#include "sinklab/kernels/cpu/reduce.hpp"
#include "sinklab/kernels/cpu/update.hpp"
#include "sinklab/kernels/cuda/elementwise.hpp"
#include "sinklab/kernels/cuda/reduce.hpp"
#include "sinklab/kernels/cuda/update.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/update.hpp"

using namespace sinklab;
using sinklab_test::max_rel_diff;

namespace {

template <class T>
Tensor<T> normal(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  return rng.normal<double>(s).to<T>();
}
// Small whole numbers, so maxima tie often.
template <class T>
Tensor<T> small_ints(const Shape& s, uint64_t seed, int64_t values) {
  Rng rng(seed);
  Tensor<T> t = Tensor<T>::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<T>(rng.randint(0, values));
  return t;
}

// Rounding of an element function (the CPU's xsimd math against the scalar math) and of a sum
// in another order, relative to the largest value.
template <class T>
double math_tol() {
  return std::is_same_v<T, double> ? 1e-13 : 2e-6;
}
template <class T>
double sum_tol() {
  return std::is_same_v<T, double> ? 1e-13 : 1e-5;
}

template <class F, class T>
void check_unary(const Tensor<T>& x, const Tensor<T>& gy) {
  const int64_t n = x.numel();
  Tensor<T> want_y = Tensor<T>::empty(x.shape()), want_gx = Tensor<T>::empty(x.shape());
  kernels::cpu::unary<F>(x.data(), want_y.data(), n);
  kernels::cpu::unary_grad<F>(x.data(), want_y.data(), gy.data(), want_gx.data(), n);
  Tensor<T> y = Tensor<T>::zeros(x.shape()), gx = Tensor<T>::zeros(x.shape());
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::unary<F>(ctx, x.data(), y.data(), n); });
  // from the CPU's y, so the gradient is checked on its own
  simt::emulate(3, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::unary_grad<F>(ctx, x.data(), want_y.data(), gy.data(), gx.data(), n);
  });
  CHECK(max_rel_diff(y, want_y) <= math_tol<T>());
  CHECK(max_rel_diff(gx, want_gx) <= math_tol<T>());
}

// broadcast_binary of a and b with f, then sum_to back to both operands' shapes.
template <class T, class F>
void check_broadcast(const Shape& sa, const Shape& sb, F f, uint64_t seed) {
  CAPTURE(sa);
  CAPTURE(sb);
  const Tensor<T> a = normal<T>(sa, seed), b = normal<T>(sb, seed + 1);
  const Tensor<T> want = kernels::cpu::broadcast_binary(a, b, f, "test");
  const Shape os = kernels::cpu::broadcast_shape(sa, sb, "test");
  REQUIRE(want.shape() == os);
  Tensor<T> y = Tensor<T>::zeros(os);
  const auto l = kernels::cuda::broadcast_layout(sa, sb, os);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::broadcast_binary(ctx, a.data(), b.data(), y.data(), l, f); });
  CHECK(max_rel_diff(y, want) == 0.0);

  const Tensor<T> g = normal<T>(os, seed + 2);
  for (const Shape& target : {sa, sb}) {
    CAPTURE(target);
    if (target == os) continue;  // sum_to returns g itself
    const Tensor<T> want_sum = kernels::cpu::sum_to(g, target);
    Tensor<T> sum = Tensor<T>::full(target, T(-7));  // every element must be written
    const auto lt = kernels::cuda::sum_to_layout(os, target);
    simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::sum_to(ctx, g.data(), sum.data(), lt); });
    CHECK(max_rel_diff(sum, want_sum) == 0.0);
  }
}

// dst (a strided view of a buffer) += src through the emulated kernel and the CPU.
template <class T>
void check_add_into(const Tensor<T>& base, Tensor<T> (*view)(const Tensor<T>&), const Tensor<T>& src) {
  const Tensor<T> cpu_base = base.clone(), emu_base = base.clone();
  kernels::cpu::add_into(view(cpu_base), src);
  Tensor<T> dst = view(emu_base);
  REQUIRE_FALSE(dst.is_contiguous());
  const Tensor<T> s = src.contiguous();
  const auto l = kernels::cuda::StridedLayout::of(dst.shape().begin(), dst.strides().data(), dst.rank());
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::add_into(ctx, dst.data(), s.data(), l); });
  CHECK(max_rel_diff(emu_base, cpu_base) == 0.0);
}

template <class T>
void check_sum_axis(const Shape& s, int axis, bool exact) {
  CAPTURE(s);
  CAPTURE(axis);
  const Tensor<T> x = normal<T>(s, 40 + axis);
  const auto v = kernels::axis_view(s, axis);
  const Shape os = s.with(axis, 1);
  Tensor<T> want = Tensor<T>::empty(os), out = Tensor<T>::full(os, T(-7));
  kernels::cpu::sum_axis(x.data(), want.data(), v);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::sum_axis(ctx, x.data(), out.data(), v); });
  if (exact) CHECK(max_rel_diff(out, want) == 0.0);
  else CHECK(max_rel_diff(out, want) <= sum_tol<T>());
  {  // the chunked two passes the launcher takes for few outputs over a long axis
    const int64_t chunk = 5, chunks = (v.n + chunk - 1) / chunk, outputs = v.outer * v.inner;
    Tensor<T> partial = Tensor<T>::full({chunks, outputs}, T(-7)), twice = Tensor<T>::full(os, T(-7));
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::sum_axis_chunks(ctx, x.data(), partial.data(), v, chunk);
    });
    simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::sum_axis(ctx, partial.data(), twice.data(), kernels::AxisView{1, chunks, outputs});
    });
    CHECK(max_rel_diff(twice, want) <= sum_tol<T>());
  }
  if (v.inner == 1) {  // the block-per-row kernel the launcher takes for long rows
    Tensor<T> rows = Tensor<T>::full(os, T(-7));
    simt::emulate(2, 64, simt::block_sum_shared_bytes<T>(64), [&](simt::Emulated& ctx) {
      kernels::cuda::sum_rows(ctx, x.data(), rows.data(), v.outer, v.n);
    });
    CHECK(max_rel_diff(rows, want) <= sum_tol<T>());
  }
}

template <class T>
void check_max_axis(const Shape& s, int axis) {
  CAPTURE(s);
  CAPTURE(axis);
  const Tensor<T> x = small_ints<T>(s, 50 + axis, 4);
  const auto v = kernels::axis_view(s, axis);
  const Shape os = s.with(axis, 1);
  Tensor<T> want = Tensor<T>::empty(os), out = Tensor<T>::full(os, T(-7));
  Tensor<int64_t> want_arg = Tensor<int64_t>::empty(os), arg = Tensor<int64_t>::full(os, -1);
  kernels::cpu::max_axis(x.data(), want.data(), want_arg.data(), v);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::max_axis(ctx, x.data(), out.data(), arg.data(), v); });
  CHECK(max_rel_diff(out, want) == 0.0);
  CHECK(arg.to_vector() == want_arg.to_vector());
  // the ties are real: some output has its maximum at more than one k
  bool tie = false;
  for (int64_t o = 0; o < v.outer && !tie; ++o)
    for (int64_t i = 0; i < v.inner && !tie; ++i) {
      int64_t hits = 0;
      for (int64_t k = 0; k < v.n; ++k) hits += x.data()[(o * v.n + k) * v.inner + i] == want.data()[o * v.inner + i];
      tie = hits > 1;
    }
  CHECK(tie);

  // the backward into a gradient that already holds values
  const Tensor<T> g = normal<T>(os, 60 + axis), gx0 = normal<T>(s, 61 + axis);
  Tensor<T> want_gx = gx0.clone(), gx = gx0.clone();
  kernels::cpu::max_axis_backward(g.data(), want_arg.data(), want_gx.data(), v);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::max_axis_backward(ctx, g.data(), want_arg.data(), gx.data(), v);
  });
  CHECK(max_rel_diff(gx, want_gx) == 0.0);
  CHECK(max_rel_diff(gx, gx0) > 0.0);
}

}  // namespace

TEST_CASE_TEMPLATE("CUDA unary kernels and their gradients on the emulator equal the CPU backend", T, double, float) {
  const Shape s{7, 29};  // 203 elements over 64 threads
  const Tensor<T> x = normal<T>(s, 1), gy = normal<T>(s, 2);
  Tensor<T> pos = x.clone();
  for (int64_t i = 0; i < pos.numel(); ++i) pos.data()[i] = std::abs(pos.data()[i]) + T(0.1);
  check_unary<elem::Exp>(x, gy);
  check_unary<elem::Tanh>(x, gy);
  check_unary<elem::Sigmoid>(x, gy);
  check_unary<elem::Silu>(x, gy);
  check_unary<elem::Gelu>(x, gy);
  check_unary<elem::Relu>(x, gy);
  check_unary<elem::Square>(x, gy);
  check_unary<elem::Log>(pos, gy);
  check_unary<elem::Sqrt>(pos, gy);
}

TEST_CASE_TEMPLATE("CUDA binary, binary_scalar and add_inplace on the emulator equal the CPU backend", T, double, float) {
  const int64_t n = 203;
  const Tensor<T> a = normal<T>({n}, 3), b = normal<T>({n}, 4);
  auto check_binary = [&](auto f) {
    Tensor<T> want = Tensor<T>::empty({n}), y = Tensor<T>::zeros({n});
    kernels::cpu::binary(a.data(), b.data(), want.data(), n, f);
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::binary(ctx, a.data(), b.data(), y.data(), n, f); });
    CHECK(max_rel_diff(y, want) == 0.0);
  };
  check_binary(elem::Add{});
  check_binary(elem::Sub{});
  check_binary(elem::Mul{});
  check_binary(elem::Div{});
  check_binary(elem::NegMul{});
  check_binary(elem::ClampGrad<T>{T(0.5)});

  auto check_scalar = [&](T s, auto f, double tol) {
    Tensor<T> want = Tensor<T>::empty({n}), y = Tensor<T>::zeros({n});
    kernels::cpu::binary_scalar(a.data(), s, want.data(), n, f);
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::binary_scalar(ctx, a.data(), s, y.data(), n, f); });
    CHECK(max_rel_diff(y, want) <= tol);
  };
  check_scalar(T(1.7), elem::Mul{}, 0.0);
  check_scalar(T(0.3), elem::Sub{}, 0.0);
  check_scalar(T(0.8), elem::Clamp{}, 0.0);
  check_scalar(T(1.3), elem::MulAdd<T>{T(0.25)}, math_tol<T>());  // x·a + c: contracted to an fma or not

  Tensor<T> want = a.clone(), y = a.clone();
  kernels::cpu::add_inplace(want.data(), b.data(), n);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::add_inplace(ctx, y.data(), b.data(), n); });
  CHECK(max_rel_diff(y, want) == 0.0);
  CHECK(max_rel_diff(y, a) > 0.0);
}

TEST_CASE_TEMPLATE("CUDA broadcast_binary and sum_to on the emulator equal the CPU backend, bit for bit", T, double, float) {
  check_broadcast<T>({3, 5, 11}, {11}, elem::Add{}, 10);         // a bias [D] over [N, T, D]
  check_broadcast<T>({11}, {3, 5, 11}, elem::Sub{}, 11);         // the bias on the left
  check_broadcast<T>({3, 1, 11}, {1, 5, 1}, elem::Mul{}, 12);    // [N, 1, D] vs [1, T, 1]
  check_broadcast<T>({3, 5, 11}, {}, elem::Div{}, 13);           // a scalar
  check_broadcast<T>({}, {3, 5, 11}, elem::Sub{}, 14);           // a scalar on the left
  check_broadcast<T>({3, 5, 11}, {1}, elem::Div{}, 15);          // one element of rank 1
  check_broadcast<T>({2, 1, 3, 1}, {1, 4, 1, 5}, elem::Sub{}, 16);  // rank 4, both broadcast
  check_broadcast<T>({7, 1}, {9}, elem::NegMul{}, 17);           // ranks differ, both broadcast
  check_broadcast<T>({2, 3, 5, 7}, {3, 1, 7}, elem::Div{}, 18);
}

TEST_CASE("the broadcast shape check is the CPU's, message and all") {
  CHECK_THROWS_WITH_AS(kernels::cpu::broadcast_shape(Shape{3, 4}, Shape{5}, "add"),
                       "add: shapes [3, 4] and [5] cannot be broadcast (axis -1: 4 vs 5)", Error);
}

TEST_CASE_TEMPLATE("CUDA add_into a strided view on the emulator equals the CPU backend", T, double, float) {
  // a transposed view [7, 5] of a [5, 7] buffer, from a dense source and from a transposed one
  check_add_into<T>(normal<T>({5, 7}, 20), [](const Tensor<T>& t) { return t.transpose(0, 1); }, normal<T>({7, 5}, 21));
  check_add_into<T>(normal<T>({5, 7}, 22), [](const Tensor<T>& t) { return t.transpose(0, 1); },
                    normal<T>({5, 7}, 23).transpose(0, 1));
  // a slice [4, 5] of [4, 9], and a rank-3 view with its axes permuted
  check_add_into<T>(normal<T>({4, 9}, 24), [](const Tensor<T>& t) { return t.slice(1, 2, 7); }, normal<T>({4, 5}, 25));
  check_add_into<T>(normal<T>({3, 4, 5}, 26), [](const Tensor<T>& t) { return t.transpose(0, 2).slice(1, 1, 3); },
                    normal<T>({5, 2, 3}, 27));
}

TEST_CASE_TEMPLATE("CUDA embedding forward and backward on the emulator equal the CPU backend", T, double, float) {
  const int64_t V = 7, D = 45, n = 37;  // D spans more than a warp, and is not a multiple of one
  Rng rng(30);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng.randint(0, V));
  ids[5] = ids[20] = ids[36] = 3;  // repeated ids (the random ones repeat too: 37 draws of 7)
  const Tensor<T> table = normal<T>({V, D}, 31);

  Tensor<T> want = Tensor<T>::empty({n, D}), y = Tensor<T>::zeros({n, D});
  kernels::cpu::embedding_forward(table.data(), V, D, ids.data(), n, want.data());
  simt::emulate(3, 64, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::embedding_forward(ctx, table.data(), V, D, ids.data(), n, y.data());
  });
  CHECK(max_rel_diff(y, want) == 0.0);

  const Tensor<T> g = normal<T>({n, D}, 32), gtable0 = normal<T>({V, D}, 33);
  Tensor<T> want_gt = gtable0.clone();
  kernels::cpu::embedding_backward(g.data(), ids.data(), n, D, want_gt.data());
  for (const int32_t buckets : {1, 4, 16}) {  // 16 > V: empty buckets
    CAPTURE(buckets);
    Tensor<T> gt = gtable0.clone();
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {  // 64 threads over 45 columns × buckets
      kernels::cuda::embedding_backward(ctx, g.data(), ids.data(), n, D, gt.data(), buckets);
    });
    CHECK(max_rel_diff(gt, want_gt) == 0.0);
  }
}

TEST_CASE("CUDA embedding id check finds the first id outside [0, V), as the CPU reports it") {
  const int64_t V = 7, n = 150;  // more ids than threads: each thread checks several
  auto first_bad = [&](const std::vector<int32_t>& ids) {
    int64_t first = -1;
    simt::emulate(1, 64, kernels::cuda::embedding_first_bad_shared_bytes(64), [&](simt::Emulated& ctx) {
      kernels::cuda::embedding_first_bad(ctx, ids.data(), n, V, &first);
    });
    return first;
  };
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i % V);
  CHECK(first_bad(ids) == n);
  ids[149] = 7;
  CHECK(first_bad(ids) == 149);
  ids[70] = -1;  // thread 6's second id
  CHECK(first_bad(ids) == 70);
  ids[133] = 100;  // thread 5's third id: later, though its thread comes first
  CHECK(first_bad(ids) == 70);
  ids[67] = -5;  // thread 3's second id, then its first
  CHECK(first_bad(ids) == 67);
  ids[3] = V;
  CHECK(first_bad(ids) == 3);
  // the CPU throws for the same position (the launcher rebuilds this message)
  std::vector<float> table(static_cast<std::size_t>(V * 2)), y(static_cast<std::size_t>(n * 2));
  CHECK_THROWS_WITH_AS(kernels::cpu::embedding_forward(table.data(), V, int64_t{2}, ids.data(), n, y.data()),
                       "embedding: id 7 at position 3 is outside [0, 7) for a table of shape [7, 2]", Error);
}

TEST_CASE_TEMPLATE("CUDA repeat and repeat_backward on the emulator equal the CPU backend", T, double, float) {
  const int64_t per = 13, times = 5;
  const Tensor<T> x = normal<T>({per}, 34);
  Tensor<T> want = Tensor<T>::empty({times, per}), y = Tensor<T>::zeros({times, per});
  kernels::cpu::repeat(x.data(), per, times, want.data());
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::repeat(ctx, x.data(), per, times, y.data()); });
  CHECK(max_rel_diff(y, want) == 0.0);

  const Tensor<T> g = normal<T>({times, per}, 35), gx0 = normal<T>({per}, 36);
  Tensor<T> want_gx = gx0.clone(), gx = gx0.clone();
  kernels::cpu::repeat_backward(g.data(), per, times, want_gx.data());
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::repeat_backward(ctx, g.data(), per, times, gx.data());
  });
  CHECK(max_rel_diff(gx, want_gx) == 0.0);
}

TEST_CASE_TEMPLATE("CUDA pow forward and backward on the emulator equal the CPU backend", T, double, float) {
  const int64_t n = 77;
  const Tensor<T> x = normal<T>({n}, 37), gy = normal<T>({n}, 38);
  Tensor<T> pos = x.clone();
  for (int64_t i = 0; i < n; ++i) pos.data()[i] = std::abs(pos.data()[i]) + T(0.1);
  auto check = [&](const Tensor<T>& in, T p) {
    CAPTURE(p);
    Tensor<T> want = Tensor<T>::empty({n}), y = Tensor<T>::zeros({n});
    Tensor<T> want_gx = Tensor<T>::empty({n}), gx = Tensor<T>::zeros({n});
    kernels::cpu::pow_forward(in.data(), p, want.data(), n);
    kernels::cpu::pow_backward(in.data(), p, gy.data(), want_gx.data(), n);
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::pow_forward(ctx, in.data(), p, y.data(), n); });
    simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::pow_backward(ctx, in.data(), p, gy.data(), gx.data(), n);
    });
    CHECK(max_rel_diff(y, want) == 0.0);
    CHECK(max_rel_diff(gx, want_gx) == 0.0);
  };
  check(x, T(3));  // whole powers of negative numbers
  check(x, T(2));
  check(pos, T(2.5));
  check(pos, T(-0.5));
}

TEST_CASE_TEMPLATE("CUDA sum_axis on the emulator equals the CPU backend (bit for bit where inner > 1)", T, double, float) {
  check_sum_axis<T>({3, 37, 5}, 1, true);
  check_sum_axis<T>({3, 37, 5}, 0, true);
  check_sum_axis<T>({3, 37, 5}, 2, false);  // inner == 1: the CPU adds in SIMD lanes
  check_sum_axis<T>({5, 301}, 1, false);    // long rows, more rows than the block-per-row grid
  check_sum_axis<T>({301}, 0, false);
}

TEST_CASE_TEMPLATE("CUDA max_axis keeps the first maximum on the emulator, as the CPU backend, and its backward",
                   T, double, float) {
  check_max_axis<T>({3, 17, 5}, 0);
  check_max_axis<T>({3, 17, 5}, 1);
  check_max_axis<T>({3, 17, 5}, 2);
  check_max_axis<T>({4, 45}, 1);
}

TEST_CASE_TEMPLATE("CUDA broadcast_axis_add on the emulator equals the CPU backend", T, double, float) {
  const Shape s{3, 17, 5};
  for (int axis = 0; axis < 3; ++axis) {
    CAPTURE(axis);
    const auto v = kernels::axis_view(s, axis);
    const Tensor<T> g = normal<T>(s.with(axis, 1), 70 + axis), gx0 = normal<T>(s, 71 + axis);
    for (const T scale : {T(0.5), T(1) / T(17)}) {
      CAPTURE(scale);
      Tensor<T> want = gx0.clone(), gx = gx0.clone();
      kernels::cpu::broadcast_axis_add(g.data(), want.data(), v, scale);
      simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
        kernels::cuda::broadcast_axis_add(ctx, g.data(), gx.data(), v, scale);
      });
      // a + scale·b: exact for scale 1/2; otherwise an fma or not, on either side
      CHECK(max_rel_diff(gx, want) <= (scale == T(0.5) ? 0.0 : math_tol<T>()));
      CHECK(max_rel_diff(gx, gx0) > 0.0);
    }
  }
}

TEST_CASE_TEMPLATE("CUDA sum_all's two passes on the emulator equal the CPU backend", T, double, float) {
  for (const int64_t n : {int64_t{1}, int64_t{45}, int64_t{1000}}) {
    CAPTURE(n);
    const Tensor<T> x = normal<T>({n}, 80);
    const T want = kernels::cpu::sum_all(x.data(), n);
    const int64_t blocks = 3, threads = 64;
    const std::size_t shared = simt::block_sum_shared_bytes<T>(threads);
    std::vector<T> partial(blocks, T(-7));
    T total = T(-7);
    simt::emulate(blocks, threads, shared, [&](simt::Emulated& ctx) { kernels::cuda::sum_partials(ctx, x.data(), n, partial.data()); });
    simt::emulate(1, 32, simt::block_sum_shared_bytes<T>(32), [&](simt::Emulated& ctx) {
      kernels::cuda::sum_partials(ctx, partial.data(), blocks, &total);
    });
    double scale = 0;  // Σ|x|: what the rounding of any order is bounded by
    for (int64_t i = 0; i < n; ++i) scale += std::abs(static_cast<double>(x.data()[i]));
    CHECK(std::abs(static_cast<double>(total) - static_cast<double>(want)) <= sum_tol<T>() * scale);
    CHECK(total != T(-7));
    // one block: the whole sum straight away
    T single = T(-7);
    simt::emulate(1, threads, shared, [&](simt::Emulated& ctx) { kernels::cuda::sum_partials(ctx, x.data(), n, &single); });
    CHECK(std::abs(static_cast<double>(single) - static_cast<double>(want)) <= sum_tol<T>() * scale);
  }
}

// The gradient norm's Σ x² (sum_of_squares on the GPU: per-block partials of the squares in
// double, then sum_all's pass over them) against the CPU's blocked double sum: equal to double
// rounding, in float too.
TEST_CASE_TEMPLATE("CUDA sum_of_squares on the emulator equals the CPU's, in double", T, double, float) {
  for (const int64_t n : {int64_t{1}, int64_t{45}, int64_t{5000}}) {
    CAPTURE(n);
    const Tensor<T> x = normal<T>({n}, 81);
    const double want = kernels::cpu::sum_of_squares(x.data(), n);
    std::vector<double> partial(3, -7.0);
    double total = -7.0;
    simt::emulate(3, 64, simt::block_sum_shared_bytes<double>(64), [&](simt::Emulated& ctx) {
      kernels::cuda::sum_partials(ctx, x.data(), n, partial.data(), kernels::cuda::SquareInDouble{});
    });
    simt::emulate(1, 32, simt::block_sum_shared_bytes<double>(32),
                  [&](simt::Emulated& ctx) { kernels::cuda::sum_partials(ctx, partial.data(), int64_t{3}, &total); });
    CHECK(std::abs(total - want) <= 1e-14 * want);
    CHECK(total > 0);
  }
}

// The non-finite guard's scan (first_non_finite on the GPU: each block's first NaN or ±Inf, the
// smallest over the blocks) against the CPU's index, for each kind at several places; none: n.
TEST_CASE_TEMPLATE("CUDA first_non_finite on the emulator finds the CPU's first NaN or Inf", T, double, float) {
  const int64_t n = 1000;
  const int blocks = 3;
  auto first = [&](const std::vector<T>& x) {
    std::vector<int64_t> partial(blocks, -7);
    simt::emulate(blocks, 64, simt::block_fold_shared_bytes<int64_t>(64), [&](simt::Emulated& ctx) {
      kernels::cuda::first_non_finite_partials(ctx, x.data(), n, partial.data());
    });
    const int64_t f = *std::min_element(partial.begin(), partial.end());
    return f < n ? f : int64_t{-1};
  };
  std::vector<T> x = normal<T>({n}, 82).to_vector();
  x[7] = std::numeric_limits<T>::max();  // finite extremes pass
  x[8] = -std::numeric_limits<T>::denorm_min();
  CHECK(first(x) == -1);
  CHECK(kernels::cpu::first_non_finite(x.data(), n) == -1);
  for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity()})
    for (const int64_t at : {int64_t{0}, int64_t{191}, int64_t{192}, int64_t{777}, n - 1}) {
      CAPTURE(at);
      std::vector<T> y = x;
      y[static_cast<std::size_t>(at)] = bad;
      y[static_cast<std::size_t>(n - 1)] = bad;  // a later one too
      CHECK(first(y) == at);
      CHECK(kernels::cpu::first_non_finite(y.data(), n) == at);
    }
}

// The in-place updates (kernels/cuda/update.hpp) against the CPU's, which runs the same
// policy/update.hpp functor a SIMD batch at a time: AdamW over three steps (the moments carry
// over), SGD with momentum (first and later steps, nesterov), Muon's momentum and step, and
// the clipping's rescale and clamp (a NaN gradient stays NaN on both).
TEST_CASE_TEMPLATE("emulated apply_update equals the CPU's for every optimiser step", T, double, float) {
  const int64_t n = 203;
  const double tol = std::is_same_v<T, double> ? 1e-14 : 1e-6;
  auto emulated = [&](auto f, auto*... buffers) {
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::apply_update(ctx, n, f, buffers...); });
  };
  SUBCASE("AdamW") {
    Tensor<T> p = normal<T>({n}, 41), m = Tensor<T>::zeros({n}), v = Tensor<T>::zeros({n});
    Tensor<T> p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
    for (int step = 1; step <= 3; ++step) {
      const Tensor<T> g = normal<T>({n}, 50 + step);
      const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.999, step);
      const policy::AdamWUpdate<T> u{{T(1 - 1e-2 * 0.1), T(0.9), T(0.1), T(0.999), T(0.001), T(1e-2 / bc1),
                                      T(1 / std::sqrt(bc2)), T(1e-8)}};
      kernels::cpu::apply_update(n, u, p.data(), g.data(), m.data(), v.data());
      emulated(u, p2.data(), g.data(), m2.data(), v2.data());
    }
    CHECK(max_rel_diff(p, p2) <= tol);
    CHECK(max_rel_diff(m, m2) <= tol);
    CHECK(max_rel_diff(v, v2) <= tol);
    CHECK(max_rel_diff(p, normal<T>({n}, 41)) > 1e-4);  // the step moved the parameters
  }
  SUBCASE("SGD with momentum, then nesterov") {
    Tensor<T> p = normal<T>({n}, 42), b = Tensor<T>::zeros({n});
    Tensor<T> p2 = p.clone(), b2 = b.clone();
    for (int step = 0; step < 3; ++step) {
      const Tensor<T> g = normal<T>({n}, 60 + step);
      const policy::SGDUpdate<T> u{T(0.1), T(0.01), T(0.9), T(0.75), true, step == 0, step == 2};
      kernels::cpu::apply_update(n, u, p.data(), g.data(), b.data());
      emulated(u, p2.data(), g.data(), b2.data());
    }
    CHECK(max_rel_diff(p, p2) <= tol);
    CHECK(max_rel_diff(b, b2) <= tol);
    CHECK(max_rel_diff(b, Tensor<T>::zeros({n})) > 1e-4);
  }
  SUBCASE("Muon's momentum and decayed step") {
    const Tensor<T> g = normal<T>({n}, 43), o = normal<T>({n}, 44);
    Tensor<T> buf = normal<T>({n}, 45), u = Tensor<T>::zeros({n}), p = normal<T>({n}, 46);
    Tensor<T> buf2 = buf.clone(), u2 = u.clone(), p2 = p.clone();
    const policy::MuonMomentum<T> mom{T(0.95), true};
    kernels::cpu::apply_update(n, mom, g.data(), buf.data(), u.data());
    emulated(mom, g.data(), buf2.data(), u2.data());
    const policy::DecayedStep<T> st{T(0.999), T(0.02)};
    kernels::cpu::apply_update(n, st, p.data(), o.data());
    emulated(st, p2.data(), o.data());
    CHECK(max_rel_diff(buf, buf2) <= tol);
    CHECK(max_rel_diff(u, u2) <= tol);
    CHECK(max_rel_diff(p, p2) <= tol);
  }
  SUBCASE("clipping: rescale, clamp, NaN kept") {
    Tensor<T> g = normal<T>({n}, 47);
    g.data()[5] = std::numeric_limits<T>::quiet_NaN();
    g.data()[201] = std::numeric_limits<T>::quiet_NaN();  // in a SIMD batch and in the scalar tail
    Tensor<T> g2 = g.clone();
    kernels::cpu::apply_update(n, policy::Scale<T>{T(3)}, g.data());
    emulated(policy::Scale<T>{T(3)}, g2.data());
    kernels::cpu::apply_update(n, policy::ClampValue<T>{T(1.5)}, g.data());
    emulated(policy::ClampValue<T>{T(1.5)}, g2.data());
    for (int64_t i = 0; i < n; ++i) {
      if (i == 5 || i == 201) {
        CHECK(std::isnan(g.data()[i]));
        CHECK(std::isnan(g2.data()[i]));
      } else {
        CHECK(g.data()[i] == g2.data()[i]);
        CHECK(std::abs(g.data()[i]) <= T(1.5));
      }
    }
  }
}
