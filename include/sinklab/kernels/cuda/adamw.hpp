// The AdamW step for the CUDA backend: a thread per element (grid-stride) running the CPU's
// policy::adamw_update on scalars, written against a SIMT context (kernels/simt.hpp).
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/adamw.hpp"

namespace sinklab::kernels::cuda {

template <class Ctx, class T>
SINKLAB_HD void adamw_step(Ctx& ctx, T* p, const T* g, T* m, T* v, int64_t n, policy::AdamWCoefs<T> c) {
  detail::for_each_element(ctx, n, [&](int64_t k) { policy::adamw_update(p[k], g[k], m[k], v[k], c); });
}

}  // namespace sinklab::kernels::cuda
