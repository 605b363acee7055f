// Probes the attention kernels accept. A probe type has `static constexpr bool enabled`;
// NullProbe (enabled = false) compiles away, so the kernels take the fused path. A recording
// probe makes them take the materialised path and hands it what the diagnostics read.
#pragma once
#include "sinklab/core/tensor.hpp"

namespace sinklab::probe {

struct NullProbe {
  static constexpr bool enabled = false;
};

// Records one attention call. The kernels fill `weights` and `logits`; the layer (which knows
// the projections, the value transform and the gates) fills the rest.
template <class T>
struct AttentionRecorder {
  static constexpr bool enabled = true;

  Tensor<T> weights;  // [B, H, T, S] attention weights that multiply the values (0 at masked keys)
  Tensor<T> logits;   // [B, H, T, S] scaled logits q·k/√d before normalisation (−inf at masked keys)
  Tensor<T> lse;      // [B, H, T] row logsumexp of the softmax family (includes the sink)

  // Filled by the layer.
  Tensor<T> values;                   // [B, H_kv, S, d]  v before the value transform (for ‖W_O v_s‖)
  Tensor<T> output;                   // [B, T, D]  the layer's output, i.e. the attention update U
  Tensor<T> value_norms;              // [B, H_kv, S]  |v_j|
  Tensor<T> transformed_value_norms;  // [B, H_kv, S]  |v̂_j| after the value transform and value gate
  Tensor<T> gate_values;              // [B, heads, tokens, G] σ(gate logits)
  Tensor<T> grad_q, grad_k, grad_v;   // gradients at q, k, v

  int64_t calls = 0;  // forward calls recorded (the latest one is kept)
};

}  // namespace sinklab::probe
