// A second device for tests: its memory is the host's and its backend the CPU's, with every
// kernel and every memory operation but allocation counted (kernel_calls()). Code that runs on it
// reaches its loops only through kernels::backend<Device> and memory<Device>, as on a GPU, and
// gives the cpu device's results bit for bit.
#pragma once
#include <map>
#include <string>
#include <typeinfo>
#include <utility>

#include "sinklab/kernels/cpu/backend.hpp"

struct test_device {
  static constexpr const char* name = "test";
  static constexpr bool host_memory = true;
};

inline std::map<std::string, int>& kernel_calls() {
  static std::map<std::string, int> calls;
  return calls;
}
// The count of kernels::backend<test_device>::apply_update running the update F.
template <class F>
std::string update_key() {
  return std::string("apply_update/") + typeid(F).name();
}
inline int total_calls() {
  int n = 0;
  for (const auto& [name, c] : kernel_calls()) n += c;
  return n;
}

namespace sinklab {
// The host's memory; every operation but allocation counted (a copy, fill or strided gather is
// the device work of a view, a concat or a transpose).
template <>
struct memory<test_device> : memory<cpu> {
#define COUNTED_MEMORY(name)                  \
  template <class... A>                       \
  static void name(A&&... a) {                \
    ++kernel_calls()["memory::" #name];       \
    memory<cpu>::name(std::forward<A>(a)...); \
  }
  COUNTED_MEMORY(copy)
  COUNTED_MEMORY(fill)
  COUNTED_MEMORY(to_host)
  COUNTED_MEMORY(from_host)
  COUNTED_MEMORY(gather)
  COUNTED_MEMORY(scatter)
#undef COUNTED_MEMORY
};

// The CPU's kernels, every one counted before it runs.
#define COUNTED(name)                                           \
  template <class... A>                                         \
  static decltype(auto) name(A&&... a) {                        \
    ++kernel_calls()[#name];                                    \
    return backend<sinklab::cpu>::name(std::forward<A>(a)...);  \
  }
#define COUNTED_OF(name)                                                     \
  template <class F, class... A>                                             \
  static decltype(auto) name(A&&... a) {                                     \
    ++kernel_calls()[#name];                                                 \
    return backend<sinklab::cpu>::template name<F>(std::forward<A>(a)...);  \
  }
template <>
struct kernels::backend<test_device> : kernels::backend<sinklab::cpu> {
  COUNTED_OF(unary)
  COUNTED_OF(unary_grad)
  COUNTED(binary)
  COUNTED(binary_scalar)
  COUNTED(add_inplace)
  COUNTED(pow_forward)
  COUNTED(pow_backward)
  COUNTED(broadcast_binary)
  COUNTED(sum_to)
  COUNTED(add_into)
  COUNTED(embedding_forward)
  COUNTED(embedding_backward)
  COUNTED(repeat)
  COUNTED(repeat_backward)
  COUNTED(sum_axis)
  COUNTED(broadcast_axis_add)
  COUNTED(max_axis)
  COUNTED(max_axis_backward)
  COUNTED(sum_all)
  COUNTED(sum_of_squares)
  COUNTED(sum_of_squares_over)
  COUNTED(first_non_finite)
  COUNTED(softmax_rows)
  COUNTED(softmax_rows_backward)
  COUNTED(log_softmax_rows)
  COUNTED(log_softmax_rows_backward)
  COUNTED(cross_entropy_count)
  COUNTED(cross_entropy_forward)
  COUNTED(cross_entropy_backward)
  COUNTED(gemm)
  COUNTED(gemm_at)
  COUNTED(gemm_batched)
  COUNTED_OF(act_mul_forward)
  COUNTED_OF(act_mul_backward)
  COUNTED_OF(glu_up)
  COUNTED_OF(glu_hidden_grad)
  COUNTED(rms_forward)
  COUNTED(rms_backward)
  COUNTED(layer_norm_forward)
  COUNTED(layer_norm_backward)
  COUNTED(dyt_forward)
  COUNTED(dyt_backward)
  COUNTED(mix_pair_forward)
  COUNTED(mix_pair_backward)
  COUNTED(split_heads)
  COUNTED(split_heads_grad)
  COUNTED(merge_heads)
  COUNTED(merge_heads_grad)
  COUNTED(rope_rotate)
  COUNTED(rope_gather)
  COUNTED(rope_gather_grad)
  COUNTED(heads_grad_to_projection)
  COUNTED(attention_fused_forward)
  COUNTED(attention_fused_backward)
  COUNTED(attention_reference_forward)
  COUNTED(attention_reference_backward)
  COUNTED(value_transform_forward)
  COUNTED(value_transform_backward)
  COUNTED(gate_forward)
  COUNTED(gate_backward)
  COUNTED(row_norms)
  COUNTED(gate_values)
  // counted by name and, separately, by the update it runs (update_key<F>()), so a test can tell an
  // optimiser's steps from the clipping's rescale
  template <class F, class... P>
  static void apply_update(int64_t n, const F& f, P*... buffers) {
    ++kernel_calls()["apply_update"];
    ++kernel_calls()[update_key<F>()];
    backend<sinklab::cpu>::apply_update(n, f, buffers...);
  }
};
#undef COUNTED
#undef COUNTED_OF
}  // namespace sinklab
