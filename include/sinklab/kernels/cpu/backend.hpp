// kernels::backend<cpu>: the kernel interface every differentiable op calls, forwarded to the
// CPU loops of kernels/cpu. This list is the interface a device backend implements; the
// signatures are those of the kernels named here.
//
// The kernels that take tensors (broadcasting, attention) accept a Tensor<T, Device> of any
// device whose memory the host can read, so a host-memory device (a test's, say) may derive its
// backend from this one and replace single kernels.
//
// Inside namespace sinklab::kernels the name `cpu` is the namespace kernels::cpu; the device tag
// is sinklab::cpu (write it so in a backend specialisation).
#pragma once
#include <utility>

#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/act_mul.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "sinklab/kernels/cpu/glu.hpp"
#include "sinklab/kernels/cpu/heads.hpp"
#include "sinklab/kernels/cpu/mix.hpp"
#include "sinklab/kernels/cpu/norm.hpp"
#include "sinklab/kernels/cpu/reduce.hpp"
#include "sinklab/kernels/cpu/rope.hpp"
#include "sinklab/kernels/cpu/rowwise.hpp"
#include "sinklab/kernels/cpu/update.hpp"

namespace sinklab::kernels {

// A kernel forwarded as is, and one that takes an element function, activation or gate first.
#define SINKLAB_CPU_KERNEL(name)                  \
  template <class... A>                           \
  static decltype(auto) name(A&&... a) {          \
    return cpu::name(std::forward<A>(a)...);      \
  }
#define SINKLAB_CPU_KERNEL_OF(name)               \
  template <class F, class... A>                  \
  static decltype(auto) name(A&&... a) {          \
    return cpu::name<F>(std::forward<A>(a)...);   \
  }

template <>
struct backend<sinklab::cpu> {
  // elementwise (kernels/cpu/elementwise.hpp)
  SINKLAB_CPU_KERNEL_OF(unary)       // y = F(x)
  SINKLAB_CPU_KERNEL_OF(unary_grad)  // gx = F'(x)·gy
  SINKLAB_CPU_KERNEL(binary)         // y = f(a, b)
  SINKLAB_CPU_KERNEL(binary_scalar)  // y = f(a, s)
  SINKLAB_CPU_KERNEL(add_inplace)    // y += x
  SINKLAB_CPU_KERNEL(pow_forward)
  SINKLAB_CPU_KERNEL(pow_backward)
  SINKLAB_CPU_KERNEL(broadcast_binary)
  SINKLAB_CPU_KERNEL(sum_to)         // the reverse of broadcasting
  SINKLAB_CPU_KERNEL(add_into)       // strided dst += src
  SINKLAB_CPU_KERNEL(embedding_forward)
  SINKLAB_CPU_KERNEL(embedding_backward)
  SINKLAB_CPU_KERNEL(repeat)
  SINKLAB_CPU_KERNEL(repeat_backward)
  // reductions (kernels/cpu/reduce.hpp)
  SINKLAB_CPU_KERNEL(sum_axis)
  SINKLAB_CPU_KERNEL(broadcast_axis_add)
  SINKLAB_CPU_KERNEL(max_axis)
  SINKLAB_CPU_KERNEL(max_axis_backward)
  SINKLAB_CPU_KERNEL(sum_all)
  SINKLAB_CPU_KERNEL(sum_of_squares)       // in double (Newton–Schulz's normalisation)
  SINKLAB_CPU_KERNEL(sum_of_squares_over)  // the same over a list of buffers (the clipping's norm)
  SINKLAB_CPU_KERNEL(first_non_finite)  // index of the first NaN or Inf, or -1 (the tape's guard)
  // rows (kernels/cpu/rowwise.hpp)
  SINKLAB_CPU_KERNEL(softmax_rows)
  SINKLAB_CPU_KERNEL(softmax_rows_backward)
  SINKLAB_CPU_KERNEL(log_softmax_rows)
  SINKLAB_CPU_KERNEL(log_softmax_rows_backward)
  SINKLAB_CPU_KERNEL(cross_entropy_count)
  SINKLAB_CPU_KERNEL(cross_entropy_forward)
  SINKLAB_CPU_KERNEL(cross_entropy_backward)
  // GEMM (kernels/cpu/gemm.hpp, gemm_bf16.hpp) and the GLU feed-forward (act_mul.hpp, glu.hpp)
  SINKLAB_CPU_KERNEL(gemm)
  SINKLAB_CPU_KERNEL(gemm_at)  // gemm or gemm_bf16, by kernels::Precision
  SINKLAB_CPU_KERNEL(gemm_batched)
  SINKLAB_CPU_KERNEL_OF(act_mul_forward)
  SINKLAB_CPU_KERNEL_OF(act_mul_backward)
  SINKLAB_CPU_KERNEL_OF(glu_up)
  SINKLAB_CPU_KERNEL_OF(glu_hidden_grad)
  // norms (kernels/cpu/norm.hpp)
  SINKLAB_CPU_KERNEL(rms_forward)
  SINKLAB_CPU_KERNEL(rms_backward)
  SINKLAB_CPU_KERNEL(layer_norm_forward)
  SINKLAB_CPU_KERNEL(layer_norm_backward)
  SINKLAB_CPU_KERNEL(dyt_forward)
  SINKLAB_CPU_KERNEL(dyt_backward)
  // anchor mixing (kernels/cpu/mix.hpp)
  SINKLAB_CPU_KERNEL(mix_pair_forward)
  SINKLAB_CPU_KERNEL(mix_pair_backward)
  // heads and RoPE (kernels/cpu/heads.hpp, rope.hpp)
  SINKLAB_CPU_KERNEL(split_heads)
  SINKLAB_CPU_KERNEL(split_heads_grad)
  SINKLAB_CPU_KERNEL(merge_heads)
  SINKLAB_CPU_KERNEL(merge_heads_grad)
  SINKLAB_CPU_KERNEL(rope_rotate)
  SINKLAB_CPU_KERNEL(rope_gather)
  SINKLAB_CPU_KERNEL(rope_gather_grad)
  SINKLAB_CPU_KERNEL(heads_grad_to_projection)
  // attention (kernels/cpu/attention*.hpp)
  SINKLAB_CPU_KERNEL(attention_fused_forward)
  SINKLAB_CPU_KERNEL(attention_fused_backward)
  SINKLAB_CPU_KERNEL(attention_reference_forward)
  SINKLAB_CPU_KERNEL(attention_reference_backward)
  SINKLAB_CPU_KERNEL(value_transform_forward)
  SINKLAB_CPU_KERNEL(value_transform_backward)
  SINKLAB_CPU_KERNEL(gate_forward)
  SINKLAB_CPU_KERNEL(gate_backward)
  SINKLAB_CPU_KERNEL(row_norms)
  SINKLAB_CPU_KERNEL(gate_values)
  // in-place updates: optimiser steps, gradient clipping (kernels/cpu/update.hpp)
  SINKLAB_CPU_KERNEL(apply_update)

  // What a kernel returns where it returns more than a tensor.
  template <class T, class Device = sinklab::cpu>
  using AttentionForward = cpu::AttentionForward<T, Device>;
};

#undef SINKLAB_CPU_KERNEL_OF
#undef SINKLAB_CPU_KERNEL

}  // namespace sinklab::kernels
