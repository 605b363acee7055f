// kernels::backend<cpu>: the kernel interface every differentiable op calls
// (kernels/kernel_list.hpp), forwarded to the CPU loops of kernels/cpu; the signatures are those
// of the kernels there.
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
#include "sinklab/kernels/kernel_list.hpp"
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
  SINKLAB_KERNEL_LIST(SINKLAB_CPU_KERNEL, SINKLAB_CPU_KERNEL_OF, SINKLAB_CPU_KERNEL, SINKLAB_CPU_KERNEL)

  // What a kernel returns where it returns more than a tensor.
  template <class T, class Device = sinklab::cpu>
  using AttentionForward = kernels::AttentionForward<T, Device>;
};

#undef SINKLAB_CPU_KERNEL_OF
#undef SINKLAB_CPU_KERNEL

}  // namespace sinklab::kernels
