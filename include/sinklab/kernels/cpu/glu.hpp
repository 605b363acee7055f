// The GLU feed-forward's two GEMMs with the gate activation in their row epilogues
// (autodiff/ops/glu.hpp, glu_mlp): the activation runs as each block of rows of the up
// projection is finished, and its backward as each block of the hidden gradient is.
#pragma once
#include <cstdint>

#include "sinklab/kernels/cpu/act_mul.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::kernels::cpu {

// ab = x [rows, d] · w_up [d, 2h] and hidden = act(ab[:, :h]) ⊙ ab[:, h:] [rows, h].
template <act::Activation Act, class T>
void glu_up(const T* x, const T* w_up, int64_t rows, int64_t d, int64_t h, T* ab, T* hidden,
            Precision p = Precision::fp32) {
  const int64_t w = 2 * h;
  gemm_at(p, Trans::N, Trans::N, rows, w, d, T(1), x, d, w_up, w, T(0), ab, w, [=](int64_t r0, int64_t r1) {
    act_mul_forward<Act>(ab + r0 * w, w, ab + r0 * w + h, w, hidden + r0 * h, h, r1 - r0, h);
  });
}

// gab [rows, 2h] = [da | db]: the hidden gradient g [rows, n] · w_downᵀ goes into gab's first
// half, and each finished block of rows becomes [da | db] in place (act_mul_backward reads an
// element before writing it).
template <act::Activation Act, class T>
void glu_hidden_grad(const T* g, const T* w_down, const T* ab, int64_t rows, int64_t n, int64_t h, T* gab,
                     Precision p = Precision::fp32) {
  const int64_t w = 2 * h;
  gemm_at(p, Trans::N, Trans::T, rows, h, n, T(1), g, n, w_down, n, T(0), gab, w, [=](int64_t r0, int64_t r1) {
    const int64_t o = r0 * w;
    act_mul_backward<Act>(ab + o, w, ab + o + h, w, gab + o, w, gab + o, w, gab + o + h, w, r1 - r0, h);
  });
}

}  // namespace sinklab::kernels::cpu
