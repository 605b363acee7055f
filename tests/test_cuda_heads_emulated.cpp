// The CUDA backend's head layouts, RoPE, anchor mixing and gate-activation product
// (kernels/cuda/heads.hpp, mix.hpp, act_mul.hpp) on the SIMT emulator against the CPU backend
// (kernels/cpu/heads.hpp, rope.hpp, mix.hpp, act_mul.hpp), in double and float: grids smaller
// than the work (grid-stride), GQA, columns from col0 ≠ 0, fresh and accumulating gradients
// (outputs start as garbage, so an unwritten or wrongly zeroed element shows), RoPE offsets.
// glu_up / glu_hidden_grad run cuBLAS and cannot run here: their element part is act_mul's
// bodies, checked below on the GLU's in-place [a | b] layout.
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/act_mul.hpp"
#include "sinklab/kernels/cpu/heads.hpp"
#include "sinklab/kernels/cpu/mix.hpp"
#include "sinklab/kernels/cpu/rope.hpp"
#include "sinklab/kernels/cuda/act_mul.hpp"
#include "sinklab/kernels/cuda/heads.hpp"
#include "sinklab/kernels/cuda/mix.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/activation.hpp"

using namespace sinklab;
using sinklab_test::max_rel_diff;

namespace {

template <class T>
Tensor<T> random(Rng& rng, const Shape& s, double std = 1.0) {
  return rng.normal<double>(s, 0.0, std).to<T>();
}

// Tables of rotate-half RoPE for `positions` positions of d/2 frequencies.
template <class T>
void rope_tables(int64_t positions, int64_t d, Tensor<T>& cos, Tensor<T>& sin) {
  const int64_t half = d / 2;
  std::vector<T> c(static_cast<std::size_t>(positions * half)), s(c.size());
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      c[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::cos(a));
      s[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::sin(a));
    }
  cos = Tensor<T>::from({positions, half}, c);
  sin = Tensor<T>::from({positions, half}, s);
}

template <class T>
void check_split_merge() {
  const int64_t B = 2, L = 5, heads = 3, d = 4, col0 = 4, N = col0 + heads * d + 3;
  Rng rng(11);
  const Tensor<T> x = random<T>(rng, {B, L, N});
  Tensor<T> want = Tensor<T>::zeros({B, heads, L, d}), got = Tensor<T>::zeros({B, heads, L, d});
  kernels::cpu::split_heads(x.data(), B, L, N, col0, heads, d, want.data());
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::split_heads(ctx, x.data(), B, L, N, col0, heads, d, got.data());
  });
  CHECK(max_rel_diff(got, want) == 0.0);

  const Tensor<T> g = random<T>(rng, {B, heads, L, d}), prior = random<T>(rng, {B, L, N});
  for (const bool fresh : {true, false}) {
    CAPTURE(fresh);
    Tensor<T> gx_want = prior.clone(), gx_got = prior.clone();
    kernels::cpu::split_heads_grad(g.data(), gx_want.data(), fresh, B, L, N, col0, heads, d);
    simt::emulate(3, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::split_heads_grad(ctx, g.data(), gx_got.data(), fresh, B, L, N, col0, heads, d);
    });
    CHECK(max_rel_diff(gx_got, gx_want) == 0.0);
    CHECK(max_rel_diff(gx_got, prior) > 0.1);  // it did write
  }

  const int64_t H = 3;
  const Tensor<T> xh = random<T>(rng, {B, H, L, d});
  Tensor<T> y_want = Tensor<T>::zeros({B, L, H * d}), y_got = Tensor<T>::zeros({B, L, H * d});
  kernels::cpu::merge_heads(xh.data(), y_want.data(), B, H, L, d);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::merge_heads(ctx, xh.data(), y_got.data(), B, H, L, d);
  });
  CHECK(max_rel_diff(y_got, y_want) == 0.0);

  const Tensor<T> gy = random<T>(rng, {B, L, H * d}), hprior = random<T>(rng, {B, H, L, d});
  for (const bool fresh : {true, false}) {
    CAPTURE(fresh);
    Tensor<T> gx_want = hprior.clone(), gx_got = hprior.clone();
    kernels::cpu::merge_heads_grad(gy.data(), gx_want.data(), fresh, B, H, L, d);
    simt::emulate(2, 64, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::merge_heads_grad(ctx, gy.data(), gx_got.data(), fresh, B, H, L, d);
    });
    CHECK(max_rel_diff(gx_got, gx_want) == 0.0);
    CHECK(max_rel_diff(gx_got, hprior) > 0.1);
  }
}

template <class T>
void check_rope(double tol) {
  const int64_t B = 2, L = 5, heads = 3, d = 8, col0 = 8, N = col0 + heads * d + 5, offset = 3;
  Tensor<T> cos, sin;
  rope_tables<T>(offset + L, d, cos, sin);
  Rng rng(12);

  // rope_rotate, both directions, at an offset.
  const int64_t outer = 3;
  const Tensor<T> x = random<T>(rng, {outer, L, d});
  for (const T sign : {T(1), T(-1)}) {
    CAPTURE(sign);
    Tensor<T> want = Tensor<T>::zeros({outer, L, d}), got = Tensor<T>::zeros({outer, L, d});
    kernels::cpu::rope_rotate(x.data(), want.data(), cos.data(), sin.data(), outer, L, d, offset, sign);
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::rope_rotate(ctx, x.data(), got.data(), cos.data(), sin.data(), outer, L, d, offset, sign);
    });
    CHECK(max_rel_diff(got, want) <= tol);
    CHECK(max_rel_diff(got, x) > 0.1);  // rotated, not copied
  }

  // The fused split + RoPE and its backward.
  const Tensor<T> xp = random<T>(rng, {B, L, N});
  Tensor<T> want = Tensor<T>::zeros({B, heads, L, d}), got = Tensor<T>::zeros({B, heads, L, d});
  kernels::cpu::rope_gather(xp.data(), B, L, N, col0, heads, d, cos.data(), sin.data(), offset, want.data());
  simt::emulate(2, 64, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::rope_gather(ctx, xp.data(), B, L, N, col0, heads, d, cos.data(), sin.data(), offset, got.data());
  });
  CHECK(max_rel_diff(got, want) <= tol);

  const Tensor<T> g = random<T>(rng, {B, heads, L, d}), prior = random<T>(rng, {B, L, N});
  for (const bool fresh : {true, false}) {
    CAPTURE(fresh);
    Tensor<T> gx_want = prior.clone(), gx_got = prior.clone();
    kernels::cpu::rope_gather_grad(g.data(), gx_want.data(), fresh, B, L, N, col0, heads, d, cos.data(), sin.data(),
                                   offset);
    simt::emulate(3, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::rope_gather_grad(ctx, g.data(), gx_got.data(), fresh, B, L, N, col0, heads, d, cos.data(),
                                      sin.data(), offset);
    });
    CHECK(max_rel_diff(gx_got, gx_want) <= tol);
    CHECK(max_rel_diff(gx_got, prior) > 0.1);
  }
}

template <class T>
void check_heads_grad_to_projection(double tol) {
  const int64_t B = 2, L = 6, H = 4, Hkv = 2, d = 6, N = (H + 2 * Hkv) * d;  // GQA
  Tensor<T> cos, sin;
  rope_tables<T>(L, d, cos, sin);
  Rng rng(13);
  const Tensor<T> dq = random<T>(rng, {B, H, L, d}), dk = random<T>(rng, {B, Hkv, L, d}),
                  dv = random<T>(rng, {B, Hkv, L, d}), garbage = random<T>(rng, {B, L, N});
  for (const bool rope : {true, false}) {
    CAPTURE(rope);
    const T* c = rope ? cos.data() : nullptr;
    const T* s = rope ? sin.data() : nullptr;
    Tensor<T> want = garbage.clone(), got = garbage.clone();
    kernels::cpu::heads_grad_to_projection(dq.data(), dk.data(), dv.data(), B, L, H, Hkv, d, c, s, want.data());
    simt::emulate(3, 64, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::heads_grad_to_projection(ctx, dq.data(), dk.data(), dv.data(), B, L, H, Hkv, d, c, s, got.data());
    });
    CHECK(max_rel_diff(got, want) <= (rope ? tol : 0.0));
  }
}

enum class Gran { Scalar, Head, Element };

template <class T>
void check_mix(Gran gran, bool has_s, bool has_gamma, int64_t col1, int64_t col2, double tol) {
  CAPTURE(static_cast<int>(gran));
  CAPTURE(has_s);
  CAPTURE(has_gamma);
  CAPTURE(col1);
  CAPTURE(col2);
  const int64_t B = 2, H = 3, L = 9, C = 12, K = 3;
  const int64_t ncoef = gran == Gran::Scalar ? 1 : gran == Gran::Head ? H : H * C;
  Rng rng(14 + static_cast<uint64_t>(gran) * 4 + (has_s ? 2 : 0) + (has_gamma ? 1 : 0));
  const Tensor<T> a = random<T>(rng, {B, H, L, C}), s = random<T>(rng, {B, H, L, C});
  const Tensor<T> l1 = random<T>(rng, {ncoef}), l2 = random<T>(rng, {ncoef});
  const Tensor<T> gamma = random<T>(rng, {B, L, K}, 0.5), dy = random<T>(rng, {B, H, L, C});
  kernels::MixPair<T> m;
  m.a = a.data();
  m.s = has_s ? s.data() : nullptr;
  m.l1 = l1.data();
  m.l2 = has_s ? l2.data() : nullptr;
  m.gamma = has_gamma ? gamma.data() : nullptr;
  m.K = K, m.col1 = col1, m.col2 = col2;
  m.B = B, m.H = H, m.L = L, m.C = C;
  m.head_stride = gran == Gran::Scalar ? 0 : gran == Gran::Head ? 1 : C;
  m.per_channel = gran == Gran::Element;

  Tensor<T> y_want = Tensor<T>::zeros(a.shape()), y_got = Tensor<T>::zeros(a.shape());
  kernels::cpu::mix_pair_forward(m, y_want.data());
  simt::emulate(3, 64, 0, [&](simt::Emulated& ctx) { kernels::cuda::mix_pair_forward(ctx, m, y_got.data()); });
  CHECK(max_rel_diff(y_got, y_want) <= tol);

  // The CPU's backward all at once; the device's in its three kernels. dgamma accumulates onto a
  // prior value, the coefficient partials onto zeros (as the op hands them over).
  const Tensor<T> dg_prior = random<T>(rng, {B, L, K});
  Tensor<T> da_want = Tensor<T>::zeros(a.shape()), ds_want = Tensor<T>::zeros(a.shape());
  Tensor<T> pl1_want = Tensor<T>::zeros({B, ncoef}), pl2_want = Tensor<T>::zeros({B, ncoef});
  Tensor<T> dg_want = dg_prior.clone();
  kernels::cpu::mix_pair_backward(m, dy.data(), da_want.data(), has_s ? ds_want.data() : nullptr, pl1_want.data(),
                                  has_s ? pl2_want.data() : nullptr, has_gamma ? dg_want.data() : nullptr);
  Tensor<T> da_got = Tensor<T>::zeros(a.shape()), ds_got = Tensor<T>::zeros(a.shape());
  Tensor<T> pl1_got = Tensor<T>::zeros({B, ncoef}), pl2_got = Tensor<T>::zeros({B, ncoef});
  Tensor<T> dg_got = dg_prior.clone();
  simt::emulate(3, 64, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::mix_pair_backward_inputs(ctx, m, dy.data(), da_got.data(), has_s ? ds_got.data() : nullptr);
  });
  const std::size_t shared = simt::block_sum_shared_bytes<T>(32);
  simt::emulate(2, 32, shared, [&](simt::Emulated& ctx) {  // fewer blocks than outputs, fewer threads than terms
    kernels::cuda::mix_pair_backward_coefficients(ctx, m, dy.data(), pl1_got.data(), has_s ? pl2_got.data() : nullptr);
  });
  if (has_gamma)
    simt::emulate(3, 32, shared, [&](simt::Emulated& ctx) {
      kernels::cuda::mix_pair_backward_gamma(ctx, m, dy.data(), dg_got.data());
    });
  CHECK(max_rel_diff(da_got, da_want) <= tol);
  CHECK(max_rel_diff(ds_got, ds_want) <= tol);
  CHECK(max_rel_diff(pl1_got, pl1_want) <= tol);
  CHECK(max_rel_diff(pl2_got, pl2_want) <= tol);
  CHECK(max_rel_diff(dg_got, dg_want) <= tol);
  CHECK(max_rel_diff(pl1_got, Tensor<T>::zeros({B, ncoef})) > 0.0);  // the reductions produced something
  if (has_gamma) CHECK(max_rel_diff(dg_got, dg_prior) > 1e-3);
}

template <class Act, class T>
void check_act_mul(double tol) {
  const int64_t rows = 7, h = 10, lda = 23, ldb = 17, ldy = 13, ldg = 12, ldga = 11, ldgb = 14;
  Rng rng(15);
  const Tensor<T> a = random<T>(rng, {rows, lda}, 2.0), b = random<T>(rng, {rows, ldb}),
                  gy = random<T>(rng, {rows, ldg});
  const Tensor<T> y0 = random<T>(rng, {rows, ldy}), ga0 = random<T>(rng, {rows, ldga}),
                  gb0 = random<T>(rng, {rows, ldgb});

  // Strided rows (the elements between rows must stay as they were).
  Tensor<T> y_want = y0.clone(), y_got = y0.clone();
  kernels::cpu::act_mul_forward<Act>(a.data(), lda, b.data(), ldb, y_want.data(), ldy, rows, h);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::act_mul_forward<Act>(ctx, a.data(), lda, b.data(), ldb, y_got.data(), ldy, rows, h);
  });
  CHECK(max_rel_diff(y_got, y_want) <= tol);
  CHECK(max_rel_diff(y_got, y0) > 0.1);

  for (const int which : {0, 1, 2}) {  // both gradients, ga only, gb only
    CAPTURE(which);
    Tensor<T> ga_want = ga0.clone(), ga_got = ga0.clone(), gb_want = gb0.clone(), gb_got = gb0.clone();
    auto pick = [which](Tensor<T>& t, int skip) { return which == skip ? nullptr : t.data(); };
    kernels::cpu::act_mul_backward<Act>(a.data(), lda, b.data(), ldb, gy.data(), ldg, pick(ga_want, 2), ldga,
                                        pick(gb_want, 1), ldgb, rows, h);
    simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
      kernels::cuda::act_mul_backward<Act>(ctx, a.data(), lda, b.data(), ldb, gy.data(), ldg, pick(ga_got, 2), ldga,
                                           pick(gb_got, 1), ldgb, rows, h);
    });
    CHECK(max_rel_diff(ga_got, ga_want) <= tol);
    CHECK(max_rel_diff(gb_got, gb_want) <= tol);
  }

  // The GLU's layout: ab [rows, 2h] = [a | b] → hidden [rows, h] (glu_up's epilogue), and the
  // hidden gradient in gab's first half becoming [da | db] in place (glu_hidden_grad's).
  const int64_t w = 2 * h;
  const Tensor<T> ab = random<T>(rng, {rows, w}, 2.0), gab0 = random<T>(rng, {rows, w});
  Tensor<T> hid_want = Tensor<T>::zeros({rows, h}), hid_got = Tensor<T>::zeros({rows, h});
  kernels::cpu::act_mul_forward<Act>(ab.data(), w, ab.data() + h, w, hid_want.data(), h, rows, h);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::act_mul_forward<Act>(ctx, ab.data(), w, ab.data() + h, w, hid_got.data(), h, rows, h);
  });
  CHECK(max_rel_diff(hid_got, hid_want) <= tol);
  Tensor<T> gab_want = gab0.clone(), gab_got = gab0.clone();
  T* gw = gab_want.data();
  T* gg = gab_got.data();
  kernels::cpu::act_mul_backward<Act>(ab.data(), w, ab.data() + h, w, gw, w, gw, w, gw + h, w, rows, h);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::act_mul_backward<Act>(ctx, ab.data(), w, ab.data() + h, w, gg, w, gg, w, gg + h, w, rows, h);
  });
  CHECK(max_rel_diff(gab_got, gab_want) <= tol);
  CHECK(max_rel_diff(gab_got, gab0) > 0.1);
}

}  // namespace

TEST_CASE("CUDA split / merge heads on the emulator equal the CPU backend (col0, fresh and accumulating)") {
  check_split_merge<double>();
  check_split_merge<float>();
}

TEST_CASE("CUDA RoPE on the emulator equals the CPU backend (rotate both ways, fused split and its backward, offset)") {
  check_rope<double>(1e-13);
  check_rope<float>(2e-6);
}

TEST_CASE("CUDA heads_grad_to_projection on the emulator equals the CPU backend (GQA, with and without RoPE)") {
  check_heads_grad_to_projection<double>(1e-13);
  check_heads_grad_to_projection<float>(2e-6);
}

TEST_CASE("CUDA anchor mixing on the emulator equals the CPU backend (granularities, with and without s and γ)") {
  for (const Gran gran : {Gran::Scalar, Gran::Head, Gran::Element})
    for (const bool has_s : {true, false})
      for (const bool has_gamma : {true, false}) {
        check_mix<double>(gran, has_s, has_gamma, 2, 0, 1e-13);
        check_mix<float>(gran, has_s, has_gamma, 2, 0, 2e-5);
      }
  check_mix<double>(Gran::Head, true, true, 1, 1, 1e-13);  // both terms scaled by one γ column
  check_mix<float>(Gran::Element, true, true, 1, 1, 2e-5);
}

TEST_CASE("CUDA act_mul on the emulator equals the CPU backend (SiLU, GELU; strided rows; the GLU's in-place layout)") {
  check_act_mul<act::SiLU, double>(1e-13);
  check_act_mul<act::GELU, double>(1e-13);
  check_act_mul<act::SiLU, float>(2e-6);
  check_act_mul<act::GELU, float>(2e-6);
}
