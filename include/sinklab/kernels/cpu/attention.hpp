// CPU attention at tensor level: the entry points a layer calls.
//
//   auto fwd = attention_forward(score, mask, q, k, v, score_params, opt, probe);   // out, lse
//   auto g   = attention_backward(score, mask, q, k, v, score_params, fwd, dout, opt, probe);
//   // g.dq [B,H,T,d], g.dk, g.dv [B,H_kv,S,d], g.dscore (same shapes as score_params)
//
// Without a probe (or with probe::NullProbe) both take the fused kernels (attention_fused.hpp);
// with an enabled probe (probe::AttentionRecorder) they take the materialised ones
// (attention_reference.hpp) and the forward records weights, logits and lse into the probe.
// Value transforms and gates go around this core (attention_transforms.hpp).
#pragma once
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/attention_fused.hpp"
#include "sinklab/kernels/cpu/attention_reference.hpp"
#include "sinklab/kernels/cpu/attention_transforms.hpp"
#include "sinklab/policy/compose.hpp"
#include "sinklab/probe/attention_probe.hpp"

namespace sinklab::kernels::cpu {

template <class Score, class Mask, class T, class Probe = probe::NullProbe>
AttentionForward<T> attention_forward(const Score& score, const Mask& mask, const Tensor<T>& q, const Tensor<T>& k,
                                      const Tensor<T>& v, const score::params_t<Score, T>& params,
                                      const AttentionOptions& opt = {}, Probe* probe = nullptr) {
  if constexpr (Probe::enabled) {
    if (probe) {
      Tensor<T> weights, logits;
      AttentionForward<T> res = attention_reference_forward(score, mask, q, k, v, params, opt, &weights, &logits);
      probe->weights = weights;
      probe->logits = logits;
      probe->lse = res.lse;
      ++probe->calls;
      return res;
    }
  }
  return attention_fused_forward(score, mask, q, k, v, params, opt);
}

template <class Score, class Mask, class T, class Probe = probe::NullProbe>
AttentionGrads<T, Score> attention_backward(const Score& score, const Mask& mask, const Tensor<T>& q,
                                            const Tensor<T>& k, const Tensor<T>& v,
                                            const score::params_t<Score, T>& params, const AttentionForward<T>& fwd,
                                            const Tensor<T>& dout, const AttentionOptions& opt = {},
                                            Probe* probe = nullptr) {
  if constexpr (Probe::enabled) {
    if (probe) return attention_reference_backward(score, mask, q, k, v, params, dout, opt);
  }
  return attention_fused_backward(score, mask, q, k, v, params, fwd, dout, opt);
}

}  // namespace sinklab::kernels::cpu
