// Operand conversion for the CUDA backend's bf16 GEMM (cuda/include/sinklab/cuda/gemm.cuh) and
// the tensor-core attention (cuda/attention_mma.cuh), written against a SIMT context
// (kernels/simt.hpp): float matrices rounded to bf16 (or fp16) bits with the rounding the CPU's
// bf16 GEMM uses (core/bf16.hpp), made dense on the way.
#pragma once
#include <cstdint>

#include "sinklab/core/bf16.hpp"
#include "sinklab/core/config.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/kernels/simt_mma.hpp"

namespace sinklab::kernels::cuda {

// `batch` float matrices [rows, cols], rows `ld` elements apart and matrices `stride` apart, as
// dense 16-bit codes of E (simt::Bf16, simt::F16): dst[(b·rows + r)·cols + c]. A thread per
// element, grid-stride; a source that is dense already (every attention operand) is read at x,
// without the three 64-bit divisions per element that locate a strided one.
template <class E, class Ctx>
SINKLAB_HD void to_codes_dense(Ctx& ctx, const float* src, int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                               int64_t stride, uint16_t* dst) {
  const int64_t n = batch * rows * cols, step = ctx.blocks() * ctx.threads();
  const int64_t first = ctx.block() * ctx.threads() + ctx.thread();
  if (ld == cols && (batch == 1 || stride == rows * cols)) {
    for (int64_t x = first; x < n; x += step) dst[x] = E::from_float(src[x]);
    return;
  }
  for (int64_t x = first; x < n; x += step) {
    const int64_t c = x % cols, r = (x / cols) % rows, b = x / (rows * cols);
    dst[x] = E::from_float(src[b * stride + r * ld + c]);
  }
}
// The bf16 GEMM's operands.
template <class Ctx>
SINKLAB_HD void to_bf16_dense(Ctx& ctx, const float* src, int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                              int64_t stride, uint16_t* dst) {
  to_codes_dense<simt::Bf16>(ctx, src, batch, rows, cols, ld, stride, dst);
}

}  // namespace sinklab::kernels::cuda
