// A score a user writes (docs/extending.md): soft-capped logits (Gemma 2), the softmax sees
// t = cap·tanh(s / cap) instead of s. Shared by the tests of user policies and of the CUDA kernels.
#pragma once
#include <cmath>

#include "sinklab/policy/score.hpp"

namespace user {

struct Softcap : sinklab::score::Softmax {
  static constexpr const char* name = "softcap";
  double cap = 2.0;
  template <class V>
  SINKLAB_HD V logits(V s) const {
    using std::tanh;
    return V(cap) * tanh(s / V(cap));
  }
  template <class V>
  SINKLAB_HD V logits_grad(V s) const {
    using std::tanh;
    const V t = tanh(s / V(cap));
    return V(1) - t * t;
  }
};

}  // namespace user
