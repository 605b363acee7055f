// The kernel interface of kernels::backend<Device>, written once. A backend (kernels/cpu/backend.hpp,
// the CUDA backend, a test's counted device) expands the list with its own forwarding macros, so a
// kernel added here is a compile error in every backend that lacks it rather than a silent gap.
//
//   X(name)        a kernel forwarded with its arguments
//   X_OF(name)     one whose first template argument names an element function, activation or
//                  gate (unary<F>(...), act_mul_forward<Act>(...))
//   X_GEMM(name)   the GEMMs, with the CPU's row-major arguments: a backend whose library takes
//                  others (cuBLAS) writes these three by hand
//   X_UPDATE(name) the in-place update (apply_update(n, functor, buffers...)), which the counted
//                  test device counts per functor
//
// The groups follow kernels/cpu's headers: elementwise, reduce, rowwise, gemm and glu, norm, mix,
// heads and rope, attention, update.
#pragma once

#define SINKLAB_KERNEL_LIST(X, X_OF, X_GEMM, X_UPDATE)                                                     \
  /* elementwise */                                                                                       \
  X_OF(unary) X_OF(unary_grad) X(binary) X(binary_scalar) X(add_inplace) X(pow_forward) X(pow_backward)  \
  X(broadcast_binary) X(sum_to) X(add_into) X(embedding_forward) X(embedding_backward) X(repeat)          \
  X(repeat_backward)                                                                                      \
  /* reductions; sum_of_squares(_over) in double, first_non_finite the tape's guard */                    \
  X(sum_axis) X(broadcast_axis_add) X(max_axis) X(max_axis_backward) X(sum_all) X(sum_of_squares)         \
  X(sum_of_squares_over) X(first_non_finite)                                                              \
  /* rows */                                                                                              \
  X(softmax_rows) X(softmax_rows_backward) X(log_softmax_rows) X(log_softmax_rows_backward)               \
  X(cross_entropy_count) X(cross_entropy_forward) X(cross_entropy_backward)                               \
  /* GEMM (gemm_at: fp32 or bf16 operands by kernels::Precision) and the GLU feed-forward */              \
  X_GEMM(gemm) X_GEMM(gemm_at) X_GEMM(gemm_batched)                                                       \
  X_OF(act_mul_forward) X_OF(act_mul_backward) X_OF(glu_up) X_OF(glu_hidden_grad)                         \
  /* norms */                                                                                             \
  X(rms_forward) X(rms_backward) X(layer_norm_forward) X(layer_norm_backward) X(dyt_forward)              \
  X(dyt_backward)                                                                                         \
  /* anchor mixing */                                                                                     \
  X(mix_pair_forward) X(mix_pair_backward)                                                                \
  /* heads and RoPE */                                                                                    \
  X(split_heads) X(split_heads_grad) X(merge_heads) X(merge_heads_grad) X(rope_rotate) X(rope_gather)     \
  X(rope_gather_grad) X(heads_grad_to_projection)                                                         \
  /* attention: fused (streaming) and reference (materialised, recorded), the value path and gates */    \
  X(attention_fused_forward) X(attention_fused_backward) X(attention_reference_forward)                   \
  X(attention_reference_backward) X(value_transform_forward) X(value_transform_backward) X(gate_forward)  \
  X(gate_backward) X(row_norms) X(gate_values)                                                            \
  /* in-place updates: optimiser steps, gradient clipping */                                              \
  X_UPDATE(apply_update)
