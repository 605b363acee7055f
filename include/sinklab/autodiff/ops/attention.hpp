// The attention core as one tape node with a hand-written backward:
//
//   v ─value transform─▶ v̂ ─gate on values─▶ ṽ ─attention─▶ o ─gate on output─▶ o'
//
//   autodiff::attention(call, q, k, v, gate_logits)       q [B, H, T, d], k, v [B, H_kv, S, d]
//   autodiff::attention_from_projection(call, qkv, ...)  q, k, v read in place from a projection
//
// The caller chooses the algorithm: without a recorder the fused kernels stream key blocks and
// never hold the T×S matrix; with one (AttentionRecorder, what probes read) the materialised
// kernels run and the recorder receives weights, logits, lse, value norms, gate values and,
// after the backward, the gradients at q, k and v (so it must outlive the tape's backward).
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/autodiff/ops/rope.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/policy/compose.hpp"

namespace sinklab::autodiff {

// An elementwise edit scale ⊙ x + shift of a tensor the attention forms (kernels/backend.hpp).
template <class T, class D = cpu>
using Edit = kernels::Edit<T, D>;

// What one attention call hands to diagnostics (the latest call is kept).
template <class T, class D = cpu>
struct AttentionRecorder {
  Tensor<T, D> weights;  // [B, H, T, S] attention weights that multiply the values (0 at masked keys)
  Tensor<T, D> logits;   // [B, H, T, S] scaled logits q·k/√d before normalisation (−inf at masked keys)
  Tensor<T, D> lse;      // [B, H, T] row logsumexp of the softmax family (includes the sink)

  Tensor<T, D> keys;                     // [B, H_kv, S, d]  k as the scores see it (after QK-norm and RoPE)
  Tensor<T, D> key_norms;                // [B, H_kv, S]  |k_j| (a sink key stands out in norm or direction)
  Tensor<T, D> values;                   // [B, H_kv, S, d]  v before the value transform (for ‖W_O v_s‖)
  Tensor<T, D> output;                   // [B, T, D]  the layer's output, i.e. the attention update U (the layer fills it)
  Tensor<T, D> value_norms;              // [B, H_kv, S]  |v_j|
  Tensor<T, D> transformed_value_norms;  // [B, H_kv, S]  |v̂_j| after the value transform and value gate
  Tensor<T, D> gate_values;              // [B, heads, tokens, G] the gate's activation of its logits (σ)
  Tensor<T, D> grad_q, grad_k, grad_v;   // gradients at q, k, v

  int64_t calls = 0;  // forward calls recorded
};

// The policies and their learnable tensors for one call. score_params / value_params hold the
// current values of the policies' Params<T>; score_vars / value_vars are the same tensors bound
// on the tape, in visiting order (their gradients go there).
template <class Score, class Gate, class Value, class Mask, class T, class D = cpu>
struct AttentionCall {
  static_assert(policy::check_attention_policies<Score, Gate, Value, Mask>());
  static constexpr bool gate_on_values = gate::applied_at<Gate, gate::Placement::OnValues>();
  static constexpr bool gate_on_output = gate::applied_at<Gate, gate::Placement::OnOutput>();

  Score score{};
  Gate gate{};
  Value value{};
  Mask mask{};
  score::params_t<Score, T, D> score_params{};
  value::params_t<Value, T, D> value_params{};
  std::vector<Var<T, D>> score_vars, value_vars;
  kernels::AttentionOptions options{};
  AttentionRecorder<T, D>* recorder = nullptr;  // non-null: the materialised kernels, recorded
  // Interventions (nn/intervention.hpp), on the materialised path only: the gate values become
  // scale ⊙ σ(logits) + shift (shapes of the gate logits), the attention weights scale ⊙ A + shift
  // ([B, H, T, S]); gradients flow through the edited values.
  Edit<T, D> gate_edit, weight_edit;
};

// The call's options with the tape's precision: under bf16 the fused kernels' products take bf16
// operands (as matmul's do), forward and backward alike.
template <class T, class D>
kernels::AttentionOptions options_at(kernels::AttentionOptions o, const Tape<T, D>& tape) {
  o.precision = tape.precision();
  return o;
}

// q [B, H, T, d], k and v [B, H_kv, S, d], gate logits [B, gate heads, T or S, G] (undefined
// without a gate) → o' [B, H, T, d].
template <class Score, class Gate, class Value, class Mask, class T, class D>
Var<T, D> attention(const AttentionCall<Score, Gate, Value, Mask, T, D>& c, Var<T, D> q_, Var<T, D> k_, Var<T, D> v_, Var<T, D> gate_) {
  using K = backend<D>;
  using Call = AttentionCall<Score, Gate, Value, Mask, T, D>;
  Tape<T, D>& tape = *q_.tape;
  AttentionRecorder<T, D>* rec = c.recorder;

  SINKLAB_CHECK(rec || (!c.gate_edit.active() && !c.weight_edit.active()),
                "autodiff::attention: an intervention on the gates or the attention weights runs on the materialised "
                "path; give the call a recorder (a probe with attention recorded)");
  SINKLAB_CHECK(Gate::enabled || !c.gate_edit.active(), "autodiff::attention: a gate intervention without a gate");
  const kernels::AttentionOptions opt = options_at(c.options, tape);
  const Tensor<T, D> q = q_.value(), k = k_.value(), v = v_.value();
  const Tensor<T, D> g = Gate::enabled ? gate_.value() : Tensor<T, D>{};
  const Tensor<T, D> vhat = K::value_transform_forward(c.value, v, c.value_params);
  Tensor<T, D> vt = vhat;
  if constexpr (Call::gate_on_values) vt = K::gate_forward(c.gate, vhat, g, c.gate_edit);
  typename K::template AttentionForward<T, D> fwd;
  if (rec) {
    fwd = K::attention_reference_forward(c.score, c.mask, q, k, vt, c.score_params, c.options, &rec->weights,
                                         &rec->logits, c.weight_edit);
    rec->lse = fwd.lse;
    ++rec->calls;
    rec->keys = k;
    rec->key_norms = K::row_norms(k);
    rec->values = v;
    rec->value_norms = K::row_norms(v);
    rec->transformed_value_norms = K::row_norms(vt);
    if constexpr (Gate::enabled) rec->gate_values = K::gate_values(c.gate, g, c.gate_edit);
  } else {
    fwd = K::attention_fused_forward(c.score, c.mask, q, k, vt, c.score_params, opt);
  }
  Tensor<T, D> out = fwd.out;
  if constexpr (Call::gate_on_output) out = K::gate_forward(c.gate, fwd.out, g, c.gate_edit);

  std::vector<Var<T, D>> inputs{q_, k_, v_};
  if constexpr (Gate::enabled) inputs.push_back(gate_);
  inputs.insert(inputs.end(), c.score_vars.begin(), c.score_vars.end());
  inputs.insert(inputs.end(), c.value_vars.begin(), c.value_vars.end());
  return tape.record(out, inputs, [=](Tape<T, D>& t, const Tensor<T, D>& dout) {
    Tensor<T, D> d_core = dout, dgate;
    if constexpr (Call::gate_on_output) {
      auto gg = K::gate_backward(c.gate, fwd.out, g, dout, c.gate_edit);
      d_core = gg.dx;
      dgate = gg.dlogit;
    }
    auto grads = rec ? K::attention_reference_backward(c.score, c.mask, q, k, vt, c.score_params, d_core, c.options,
                                                       c.weight_edit)
                     : K::attention_fused_backward(c.score, c.mask, q, k, vt, c.score_params, fwd, d_core, opt);
    Tensor<T, D> dvhat = grads.dv;
    if constexpr (Call::gate_on_values) {
      auto gg = K::gate_backward(c.gate, vhat, g, grads.dv, c.gate_edit);
      dvhat = gg.dx;
      dgate = gg.dlogit;
    }
    auto vg = K::value_transform_backward(c.value, v, c.value_params, dvhat);
    if (rec) {
      rec->grad_q = grads.dq;
      rec->grad_k = grads.dk;
      rec->grad_v = vg.dv;
    }
    t.accumulate(inputs[0], grads.dq);
    t.accumulate(inputs[1], grads.dk);
    t.accumulate(inputs[2], vg.dv);
    std::size_t i = 3;
    if constexpr (Gate::enabled) t.accumulate(inputs[i++], dgate);
    grads.dscore.parameters([&](const char*, Tensor<T, D>& d) { t.accumulate(inputs[i++], d); });
    vg.dparams.parameters([&](const char*, Tensor<T, D>& d) { t.accumulate(inputs[i++], d); });
  });
}

// The core for q, k, v straight out of a projection qkv [B, T, (H + 2·H_kv)·d] (q and k rotated
// into head-major copies when `rope` is given, else read in place like v), its output written as
// [B, T, H·d]: no split or merge copies forward, and backward one pass that writes each element
// of qkv's gradient once. Fused only (no gate, value transform or recorder).
template <class Score, class Gate, class Value, class Mask, class T, class D>
Var<T, D> attention_from_projection(const AttentionCall<Score, Gate, Value, Mask, T, D>& c, Var<T, D> qkv, int64_t H,
                                 int64_t Hkv, int64_t dh, const RopeTable<T, D>* rope_table) {
  static_assert(!Gate::enabled && Value::identity,
                "attention_from_projection: the in-place path has no gate and no value transform");
  using K = backend<D>;
  SINKLAB_CHECK(c.recorder == nullptr, "attention_from_projection: a recorder needs autodiff::attention");
  Tape<T, D>& tape = *qkv.tape;
  const Tensor<T, D> x = qkv.value().contiguous();
  const int64_t B = x.size(0), L = x.size(1), N = x.size(2);
  SINKLAB_CHECK(N == (H + 2 * Hkv) * dh, "attention_from_projection: projection of shape ", x.shape(), " for ", H,
                " heads and ", Hkv, " kv heads of ", dh);
  // Heads [h0, h0 + n) of a token-major [B, L, N] tensor as a [B, n, L, d] view.
  auto heads = [B, L, d = dh](const Tensor<T, D>& t, int64_t h0, int64_t n) {
    return t.view({B, L, t.size(2) / d, d}).slice(2, h0, h0 + n).transpose(1, 2);
  };
  const bool rope = rope_table != nullptr;
  const Tensor<T, D> cs = rope ? rope_table->cos : Tensor<T, D>{}, sn = rope ? rope_table->sin : Tensor<T, D>{};
  auto rotated = [&](int64_t h0, int64_t n) {
    Tensor<T, D> y = Tensor<T, D>::empty({B, n, L, dh});
    K::rope_gather(x.data(), B, L, N, h0 * dh, n, dh, cs.data(), sn.data(), int64_t{0}, y.data());
    return y;
  };
  const kernels::AttentionOptions opt = options_at(c.options, tape);
  const Tensor<T, D> q = rope ? rotated(0, H) : heads(x, 0, H), k = rope ? rotated(H, Hkv) : heads(x, H, Hkv);
  const Tensor<T, D> v = heads(x, H + Hkv, Hkv);
  Tensor<T, D> y = Tensor<T, D>::empty({B, L, H * dh});
  const typename K::template AttentionForward<T, D> fwd =
      K::attention_fused_forward(c.score, c.mask, q, k, v, c.score_params, opt, heads(y, 0, H));

  std::vector<Var<T, D>> inputs{qkv};
  inputs.insert(inputs.end(), c.score_vars.begin(), c.score_vars.end());
  const int64_t d = dh;
  return tape.record(y, inputs, [=](Tape<T, D>& t, const Tensor<T, D>& g) {
    auto grads =
        K::attention_fused_backward(c.score, c.mask, q, k, v, c.score_params, fwd, heads(g.contiguous(), 0, H), opt);
    Tensor<T, D> gx = Tensor<T, D>::empty({B, L, N});
    K::heads_grad_to_projection(grads.dq.data(), grads.dk.data(), grads.dv.data(), B, L, H, Hkv, d,
                             rope ? cs.data() : nullptr, rope ? sn.data() : nullptr, gx.data());
    t.accumulate(inputs[0], std::move(gx));
    std::size_t i = 1;
    grads.dscore.parameters([&](const char*, Tensor<T, D>& ds) { t.accumulate(inputs[i++], ds); });
  });
}

// The library's own attention variants in float, compiled once in sinklab::precompiled
// (core/extern_template.hpp): softmax and the learnable sink, causal and bidirectional, without a
// gate, with Gated Attention's G1 gate, with IGA's and VGA's gates on the values, V-scale.
namespace precompiled {
using G1 = gate::FromInput<gate::per_channel, gate::on_output>;
using IGA = gate::FromInput<gate::per_head, gate::on_values>;
using VGA = gate::FromValue<gate::per_head, gate::on_values>;
}  // namespace precompiled
#define SINKLAB_ATTENTION_INSTANCE(S, G, V, M)                                                                   \
  SINKLAB_EXTERN_TEMPLATE(Var<float> attention(const AttentionCall<S, G, V, M, float>&, Var<float>, Var<float>, \
                                               Var<float>, Var<float>))
#define SINKLAB_ATTENTION_INSTANCES(S, M)                                                                    \
  SINKLAB_ATTENTION_INSTANCE(S, gate::None, value::Identity, M)                                              \
  SINKLAB_ATTENTION_INSTANCE(S, precompiled::G1, value::Identity, M)                                         \
  SINKLAB_ATTENTION_INSTANCE(S, precompiled::IGA, value::Identity, M)                                        \
  SINKLAB_ATTENTION_INSTANCE(S, precompiled::VGA, value::Identity, M)                                        \
  SINKLAB_ATTENTION_INSTANCE(S, gate::None, value::VScale, M)                                                \
  SINKLAB_ATTENTION_INSTANCE(S, precompiled::VGA, value::VScale, M)                                          \
  SINKLAB_EXTERN_TEMPLATE(Var<float> attention_from_projection(                                              \
      const AttentionCall<S, gate::None, value::Identity, M, float>&, Var<float>, int64_t, int64_t, int64_t, \
      const RopeTable<float>*))
SINKLAB_ATTENTION_INSTANCES(score::Softmax, mask::Causal)
SINKLAB_ATTENTION_INSTANCES(score::Softmax, mask::Bidirectional)
SINKLAB_ATTENTION_INSTANCES(score::SoftmaxSink, mask::Causal)
SINKLAB_ATTENTION_INSTANCES(score::SoftmaxSink, mask::Bidirectional)
#undef SINKLAB_ATTENTION_INSTANCES
#undef SINKLAB_ATTENTION_INSTANCE

}  // namespace sinklab::autodiff
