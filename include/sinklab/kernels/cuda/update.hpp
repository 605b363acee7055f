// The in-place update of kernels/cpu/update.hpp for the CUDA backend: a thread per element
// (grid-stride) running the same f on scalars, written against a SIMT context (kernels/simt.hpp).
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

namespace sinklab::kernels::cuda {

template <class Ctx, class F, class... P>
SINKLAB_HD void apply_update(Ctx& ctx, int64_t n, const F& f, P*... buffers) {
  detail::for_each_element(ctx, n, [&](int64_t k) { f(buffers[k]...); });
}

}  // namespace sinklab::kernels::cuda
