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
#include "sinklab/kernels/kernel_list.hpp"

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
#define COUNTED_BY_HAND(name)  // apply_update, below
template <>
struct kernels::backend<test_device> : kernels::backend<sinklab::cpu> {
  SINKLAB_KERNEL_LIST(COUNTED, COUNTED_OF, COUNTED, COUNTED_BY_HAND)

  // counted by name and, separately, by the update it runs (update_key<F>()), so a test can tell an
  // optimiser's steps from the clipping's rescale
  template <class F, class... P>
  static void apply_update(int64_t n, const F& f, P*... buffers) {
    ++kernel_calls()["apply_update"];
    ++kernel_calls()[update_key<F>()];
    backend<sinklab::cpu>::apply_update(n, f, buffers...);
  }
};
#undef COUNTED_BY_HAND
#undef COUNTED
#undef COUNTED_OF
}  // namespace sinklab
