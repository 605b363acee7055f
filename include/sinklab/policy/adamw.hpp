// The AdamW update (torch.optim.AdamW, amsgrad off), written once over V — a scalar, an xsimd
// batch (the CPU's kernel) or a CUDA thread's scalar (the GPU's):
//   p ← p·(1 − lr·wd)
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + eps)
// The step's scalars are worked out once per parameter on the host (optim/adamw.hpp).
#pragma once
#include <cmath>

#include "sinklab/core/config.hpp"

namespace sinklab::policy {

template <class T>
struct AdamWCoefs {
  T decay;  // 1 − lr·wd
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T step_size;     // lr / (1 − β1ᵗ)
  T inv_bc2_sqrt;  // 1 / √(1 − β2ᵗ)
  T eps;
};

template <class V, class T>
SINKLAB_HD inline void adamw_update(V& p, const V& g, V& m, V& v, const AdamWCoefs<T>& c) {
  using std::sqrt;
  p = p * V(c.decay);
  m = V(c.beta1) * m + V(c.one_minus_beta1) * g;
  v = V(c.beta2) * v + V(c.one_minus_beta2) * (g * g);
  const V denom = sqrt(v) * V(c.inv_bc2_sqrt) + V(c.eps);
  p = p - V(c.step_size) * m / denom;
}

}  // namespace sinklab::policy
