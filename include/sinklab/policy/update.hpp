// The element math of the optimisers' steps and of gradient clipping, written once over V — a
// scalar, an xsimd batch (the CPU's kernel) or a CUDA thread's scalar (the GPU's). Each is a
// functor f(p, g, state...) that kernels::backend<Device>::apply_update runs over a parameter's
// buffers; the step's scalars are worked out once per parameter on the host (optim/).
#pragma once
#include <cmath>

#include "sinklab/core/config.hpp"
#include "sinklab/policy/math.hpp"

namespace sinklab::policy {

// AdamW (torch.optim.AdamW, amsgrad off):
//   p ← p·(1 − lr·wd)
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + eps)
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

template <class T>
struct AdamWUpdate {
  AdamWCoefs<T> c;
  template <class V>
  SINKLAB_HD void operator()(V& p, const V& g, V& m, V& v) const {
    adamw_update(p, g, m, v, c);
  }
};

// SGD with momentum (torch.optim.SGD):
//   d ← g + wd·p
//   b ← d on the first step, else b ← μ·b + (1−dampening)·d
//   d ← d + μ·b (nesterov) or d ← b
//   p ← p − lr·d
template <class T>
struct SGDUpdate {
  T lr, weight_decay, momentum, keep;  // keep = 1 − dampening
  bool use_momentum, first, nesterov;
  template <class V>
  SINKLAB_HD void operator()(V& p, const V& g, V& b) const {
    V d = g + V(weight_decay) * p;
    if (use_momentum) {
      b = first ? d : V(momentum) * b + V(keep) * d;
      d = nesterov ? d + V(momentum) * b : b;
    }
    p = p - V(lr) * d;
  }
};

// Muon's momentum and the update it orthogonalises (optim/muon.hpp):
//   buf ← β·buf + (1−β)·g            u ← nesterov ? (1−β)·g + β·buf : buf
template <class T>
struct MuonMomentum {
  T beta;
  bool nesterov;
  template <class V>
  SINKLAB_HD void operator()(const V& g, V& buf, V& u) const {
    buf = V(beta) * buf + (V(1) - V(beta)) * g;
    u = nesterov ? (V(1) - V(beta)) * g + V(beta) * buf : buf;
  }
};
// p ← p·decay − step·o (Muon's decoupled decay and orthogonalised step).
template <class T>
struct DecayedStep {
  T decay, step;
  template <class V>
  SINKLAB_HD void operator()(V& p, const V& o) const {
    p = p * V(decay) - V(step) * o;
  }
};

// Gradient clipping (optim/clip.hpp): g ← s·g, and g ← clamp(g, −c, c) with NaN left as NaN.
template <class T>
struct Scale {
  T s;
  template <class V>
  SINKLAB_HD void operator()(V& g) const {
    g = g * V(s);
  }
};
template <class T>
struct ClampValue {
  T c;
  template <class V>
  SINKLAB_HD void operator()(V& g) const {
    using policy::math::select;                               // unqualified: batches find xsimd::select
    g = select(g > V(c), V(c), select(g < V(-c), V(-c), g));  // comparisons with NaN are false
  }
};

}  // namespace sinklab::policy
