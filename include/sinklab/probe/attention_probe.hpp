// The recorder an attention layer fills when a probe asks for its internals: attention maps,
// logits, lse, value norms, gate values and the gradients at q, k and v (the fields are listed in
// autodiff/ops/attention.hpp, where the attention node fills them). Passing one makes the layer
// take the materialised kernels; without one it streams.
#pragma once
#include "sinklab/autodiff/ops/attention.hpp"

namespace sinklab::probe {

template <class T>
using AttentionRecorder = autodiff::AttentionRecorder<T>;

}  // namespace sinklab::probe
