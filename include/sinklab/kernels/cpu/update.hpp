// An in-place update over parallel buffers of n elements — an optimiser's step (parameter,
// gradient, state) or a gradient's rescaling: f(p, g, m, ...) on whole SIMD batches in parallel
// chunks, then the last n mod W elements one at a time. f is written once over scalars and batches
// (policy/update.hpp); buffers passed as const T* are read, T* are read and written back.
// Which elements take the scalar path depends on n alone, not on the thread count: the compiler
// may fuse the scalar path's multiply-adds and not the batches', so a tail per thread's chunk
// would make the result depend on the number of threads.
#pragma once
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/xsimd.hpp"

namespace sinklab::kernels::cpu {

namespace detail {
template <class B, class T>
void store_back(const B&, const T*) {}
template <class B, class T>
void store_back(B& b, T* p) {
  b.store_unaligned(p);
}
}  // namespace detail

// GCC 12 flags _mm512_undefined_ps() inside its own AVX-512 sqrt intrinsic as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class F, class... P>
void apply_update(int64_t n, const F& f, P*... buffers) {
  using T = std::common_type_t<std::remove_const_t<P>...>;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const int64_t batches = n / W;
  parallel_for(0, batches, (int64_t{1} << 15) / W, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo * W; i < hi * W; i += W) {
      std::tuple<std::conditional_t<std::is_const_v<P>, const B, B>...> b{B::load_unaligned(buffers + i)...};
      std::apply([&](auto&... v) { f(v...); }, b);
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (detail::store_back(std::get<K>(b), buffers + i), ...);
      }(std::index_sequence_for<P...>{});
    }
  });
  for (int64_t i = batches * W; i < n; ++i) f(buffers[i]...);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace sinklab::kernels::cpu
