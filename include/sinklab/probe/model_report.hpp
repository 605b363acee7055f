// Every diagnostic of the five papers for one probed forward (and backward) pass of a model:
//
//   nn::ModelProbe<float> pr;  pr.gradients = true;
//   auto loss = model.loss(tape, ids, targets, &pr);  tape.backward(loss);
//   probe::ModelReport r = probe::model_report(model, pr);
//   probe::write_report(jsonl, r, {{"step", step}});          // probe/report_log.hpp
//
// Per layer and head (attention probed): sink score and its key, Attn_<s> (α_s over every query),
// the ε-sink rate at ε = 0.3 (Gu et al.) and 0.8 (Barbero et al.) with α_s per head over the first
// T_ε queries, column mass M̄_s / S̄_s, Δlogit_<s>, ‖v_s‖ and ‖k_s‖ and their ratios to the other
// tokens, the same through W_O (‖W_O v_s‖, value-norm ratio), σ₁ of W_Q,h W_K,hᵀ. Per layer: max
// |x| per residual dimension (and the top ones), the massive activation of the layer output (top-1
// |x| over the median, with its token and channel), token-0 vs tokens 1–15 norms of the residual stream, the
// attention update and the FFN update, the stable rank of the attention update, the mean
// pairwise token cosine, the cosine to the input embedding and the PCA core features of the
// layer output, and (gradients probed) token-wise ‖∇q_t‖, ‖∇k_t‖, ‖∇v_t‖ and Bloat / Compress /
// Change per token for the attention and FFN branches. Over the model: Bondarenko et al.'s
// inf-norm and kurtosis of every module output and input (embeddings, norms, attention, FFN,
// residual stream, final norm) through OutlierAccumulator, "Max inf norm" and "Avg kurtosis",
// the largest massive activation over the layers, and the sequence length all of it was measured
// at (kurtosis and the sink rates depend on it).
//
// Token positions are those the layers see (inserted sink/register tokens included). With
// grouped-query attention, value metrics are per key/value head and ‖W_O v‖ reads each query
// head's rows of W_O with the values of the key/value head it shares. ‖v‖ is measured before
// the value transform (V-scale) and value gate, as the papers define it.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/nn/transformer.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/delta_logit.hpp"
#include "sinklab/probe/gradients.hpp"
#include "sinklab/probe/massive_activation.hpp"
#include "sinklab/probe/outlier_stats.hpp"
#include "sinklab/probe/representation.hpp"
#include "sinklab/probe/residual_sinks.hpp"
#include "sinklab/probe/sink_rate.hpp"
#include "sinklab/probe/spectral.hpp"
#include "sinklab/probe/token_norms.hpp"
#include "sinklab/probe/value_norms.hpp"

namespace sinklab::probe {

struct ReportOptions {
  int64_t sink = 0;              // the key s of the sink metrics
  double epsilon = 0.3;          // ε-sink rate threshold (Gu et al.)
  double epsilon_high = 0.8;     // the second threshold (Barbero et al.)
  int64_t T_eps = 64;            // ε-sink rate window
  double pca_threshold = 0.99;   // variance fraction for PCA core features
  int64_t early_first = 1, early_last = 15;  // tokens compared with token 0
  int64_t top_dims = 4;          // residual dimensions listed by size
};

// The projection weights a report reads (y·W convention, as nn stores them). Empty tensors
// leave the metrics that need them out.
template <class T>
struct LayerWeights {
  Tensor<T> w_q, w_k;  // [D, H·d_h], [D, H_kv·d_h]
  Tensor<T> w_o;       // [H·d_h, D]
  int64_t heads = 0, kv_heads = 0;
};

struct TokenSummary {
  std::vector<double> per_token;  // [T]
  double token0() const { return per_token.empty() ? NAN : per_token[0]; }
  // mean over tokens 1..T−1
  double rest() const {
    if (per_token.size() < 2) return NAN;
    double s = 0;
    for (std::size_t t = 1; t < per_token.size(); ++t) s += per_token[t];
    return s / static_cast<double>(per_token.size() - 1);
  }
};

struct BranchReport {
  TokenSummary bloat, compress, change;
};

struct LayerReport {
  int64_t layer = 0;
  // Attention (filled when the probe recorded attention maps).
  PerHead sink_score;
  std::vector<int64_t> sink_key;
  PerHead attn_to_sink;  // Attn_<s>, all queries
  SinkRate sink_rate, sink_rate_high;  // at ε = options.epsilon and options.epsilon_high
  ColumnMass column_mass;
  PerHead delta_logit;
  PerHead value_norm, value_norm_ratio;                // ‖v_s‖, ‖v_s‖ / mean_{j≠s} ‖v_j‖ (per kv head)
  PerHead key_norm_ratio;                              // ‖k_s‖ / mean_{j≠s} ‖k_j‖ (per kv head, after RoPE)
  PerHead output_value_norm, output_value_norm_ratio;  // ‖W_O v_s‖ and its ratio (per query head)
  PerHead qk_top_singular;                             // σ₁(W_Q,h W_K,hᵀ)
  // Residual stream and branch outputs.
  std::vector<double> residual_max_abs;  // [D] max |x| per dimension of the layer output
  std::vector<DimensionValue> residual_top;
  MassiveActivation massive;  // of the layer output
  EarlyTokenNorms residual_norms, attn_norms, ffn_norms;
  double attn_stable_rank = NAN;  // ‖U‖_F² / σ₁² of the attention update (batch mean)
  double token_cosine = NAN;      // mean pairwise token cosine of the layer output
  double cosine_to_embedding = NAN;
  PcaCoreFeatures pca;
  // Gradients (filled when the probe recorded them and backward() ran).
  TokenSummary grad_q, grad_k, grad_v;
  BranchReport attn_branch, ffn_branch;
};

struct ModelReport {
  ReportOptions options;
  bool attention = false, gradients = false;
  std::vector<LayerReport> layers;
  std::vector<ModuleOutlierStats> modules;  // every module input/output, in forward order
  double max_inf_norm = NAN;                // max over modules of the mean inf-norm ("Max I+O inf norm")
  double avg_kurtosis = NAN;                // mean over modules of the mean kurtosis
  std::vector<double> residual_max_abs;     // [D] over every layer's residual stream
  std::vector<DimensionValue> residual_top;
  MassiveActivation massive;                // the layer output with the largest top-1 / median
  int64_t massive_layer = -1;
  int64_t seq_len = 0;                      // sequence length of the probed batch (layer outputs' axis −2)
};

namespace detail {
// [B, H_kv, T, d] → [B, H, T, d], query head h reading kv head h / (H / H_kv).
template <class T>
Tensor<T> expand_kv_heads(const Tensor<T>& V, int64_t H) {
  const int64_t Hkv = V.size(1);
  if (Hkv == H) return V;
  SINKLAB_CHECK(Hkv > 0 && H % Hkv == 0, "probe::model_report: ", H, " query heads cannot share ", Hkv, " value heads");
  const Tensor<T> v = V.contiguous();
  const int64_t B = v.size(0), Tn = v.size(2), d = v.size(3), per = Tn * d;
  Tensor<T> out = Tensor<T>::empty({B, H, Tn, d});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T* src = v.data() + (b * Hkv + h / (H / Hkv)) * per;
      std::copy(src, src + per, out.data() + (b * H + h) * per);
    }
  return out;
}
inline PerHead column_of(const Tensor<double>& table, int64_t s) {
  PerHead out;
  for (int64_t h = 0; h < table.size(0); ++h) out.values.push_back(table(h, s));
  return out;
}
template <class T>
TokenSummary summary(const Tensor<T>& per_token) {
  TokenSummary s;
  for (int64_t t = 0; t < per_token.numel(); ++t) s.per_token.push_back(static_cast<double>(per_token.data()[t]));
  return s;
}
template <class T>
bool has(const Tensor<T>& t) {
  return t.defined() && t.numel() > 0;
}
}  // namespace detail

// The module inputs and outputs of a probed model that "Max inf norm" and "Avg kurtosis" cover
// (Bondarenko et al.): the embeddings; each layer's attention input and output, residual after
// attention, FFN input and output and layer output; the final norm's output.
template <class T>
void add_module_outputs(OutlierAccumulator& acc, const nn::ModelProbe<T>& probe) {
  if (detail::has(probe.embeddings)) acc.add("embeddings", probe.embeddings);
  for (std::size_t i = 0; i < probe.layers.size(); ++i) {
    const nn::LayerRecord<T>& rec = probe.layers[i];
    const std::string prefix = "layers." + std::to_string(i) + ".";
    acc.add(prefix + "attn_norm", rec.attn_in);
    acc.add(prefix + "attn", rec.attn_out);
    acc.add(prefix + "mid", rec.mid);
    acc.add(prefix + "ffn_norm", rec.ffn_in);
    acc.add(prefix + "ffn", rec.ffn_out);
    acc.add(prefix + "output", rec.output);
  }
  if (detail::has(probe.final_hidden)) acc.add("final_norm", probe.final_hidden);
}

template <class T>
ModelReport model_report(const nn::ModelProbe<T>& probe, const std::vector<LayerWeights<T>>& weights = {},
                         const ReportOptions& opt = {}) {
  constexpr std::string_view fn = "probe::model_report";
  SINKLAB_CHECK(!probe.layers.empty(), fn, ": the probe holds no layer (run a forward pass with it first)");
  SINKLAB_CHECK(weights.empty() || weights.size() == probe.layers.size(), fn, ": ", weights.size(),
                " layer weights for ", probe.layers.size(), " probed layers");
  ModelReport r;
  r.options = opt;
  OutlierAccumulator outliers;
  DimensionMaxAbs residual_all;
  r.attention = detail::has(probe.layers[0].attn.weights);
  r.gradients = detail::has(probe.layers[0].grad_input);
  if (detail::has(probe.layers[0].output) && probe.layers[0].output.rank() >= 2) r.seq_len = probe.layers[0].output.size(-2);

  for (std::size_t i = 0; i < probe.layers.size(); ++i) {
    const nn::LayerRecord<T>& rec = probe.layers[i];
    LayerReport L;
    L.layer = static_cast<int64_t>(i);
    SINKLAB_CHECK(detail::has(rec.output) && detail::has(rec.attn_out) && detail::has(rec.ffn_out), fn, ": layer ", i,
                  " has no recorded activations");

    if (r.attention) {
      const Tensor<T>& A = rec.attn.weights;
      SinkScore ss = sink_score(A);
      L.sink_score = ss.score;
      L.sink_key = ss.key;
      L.attn_to_sink = attn_to_key(A, opt.sink);
      L.sink_rate = sink_rate(A, opt.sink, opt.epsilon, opt.T_eps);
      L.sink_rate_high = sink_rate(A, opt.sink, opt.epsilon_high, opt.T_eps);
      L.column_mass = column_mass(A, opt.sink);
      if (detail::has(rec.attn.logits) && rec.attn.logits.size(2) == rec.attn.logits.size(3))
        L.delta_logit = delta_logit(rec.attn.logits, opt.sink);
      if (detail::has(rec.attn.values)) {
        const Tensor<double> vn = value_norms(rec.attn.values);
        L.value_norm = detail::column_of(vn, opt.sink);
        L.value_norm_ratio = norm_ratio_to_others(vn, opt.sink);
        if (detail::has(rec.attn.keys))  // value_norms reads any [B, H, T, d] per-head states
          L.key_norm_ratio = norm_ratio_to_others(value_norms(rec.attn.keys), opt.sink);
        if (!weights.empty() && detail::has(weights[i].w_o)) {
          const int64_t H = weights[i].heads;
          const Tensor<double> on = output_value_norms(detail::expand_kv_heads(rec.attn.values, H), weights[i].w_o);
          L.output_value_norm = detail::column_of(on, opt.sink);
          L.output_value_norm_ratio = norm_ratio_to_others(on, opt.sink);
        }
      }
    }
    if (!weights.empty() && detail::has(weights[i].w_q) && detail::has(weights[i].w_k))
      for (const auto& sv : qk_singular_values(weights[i].w_q, weights[i].w_k, weights[i].heads, weights[i].kv_heads))
        L.qk_top_singular.values.push_back(sv.empty() ? 0.0 : sv[0]);

    DimensionMaxAbs residual;
    residual.add(rec.output);
    residual_all.add(rec.input);
    residual_all.add(rec.mid);
    residual_all.add(rec.output);
    L.residual_max_abs = residual.values();
    L.residual_top = residual.top(opt.top_dims);
    L.massive = massive_activation(rec.output);
    if (L.massive.ratio > r.massive.ratio) r.massive = L.massive, r.massive_layer = static_cast<int64_t>(i);
    L.residual_norms = early_token_norms(rec.output, opt.early_first, opt.early_last);
    L.attn_norms = early_token_norms(rec.attn_out, opt.early_first, opt.early_last);
    L.ffn_norms = early_token_norms(rec.ffn_out, opt.early_first, opt.early_last);
    L.attn_stable_rank = stable_rank(rec.attn_out);
    L.token_cosine = mean_pairwise_cosine(rec.output);
    if (detail::has(probe.embeddings) && probe.embeddings.shape() == rec.output.shape())
      L.cosine_to_embedding = cosine_to_embedding(rec.output, probe.embeddings);
    L.pca = pca_core_features(rec.output, opt.pca_threshold);

    if (detail::has(rec.attn.grad_q)) {
      L.grad_q = detail::summary(token_grad_norms(rec.attn.grad_q));
      L.grad_k = detail::summary(token_grad_norms(rec.attn.grad_k));
      L.grad_v = detail::summary(token_grad_norms(rec.attn.grad_v));
    }
    if (detail::has(rec.grad_input) && detail::has(rec.grad_attn_in) && detail::has(rec.grad_mid) &&
        detail::has(rec.grad_ffn_in) && detail::has(rec.grad_output)) {
      auto branch = [](const Tensor<T>& normed, const Tensor<T>& out, const Tensor<T>& in, const Tensor<T>& after) {
        BranchRatios br = branch_ratios(BranchGradients<T>{normed, out, in, after});
        return BranchReport{detail::summary(br.bloat), detail::summary(br.compress), detail::summary(br.change)};
      };
      L.attn_branch = branch(rec.grad_attn_in, rec.grad_attn_out, rec.grad_input, rec.grad_mid);
      L.ffn_branch = branch(rec.grad_ffn_in, rec.grad_ffn_out, rec.grad_mid, rec.grad_output);
    }

    r.layers.push_back(std::move(L));
  }
  add_module_outputs(outliers, probe);  // after the per-layer checks, which name what is missing
  r.modules = outliers.modules();
  r.max_inf_norm = outliers.max_inf_norm();
  r.avg_kurtosis = outliers.avg_kurtosis();
  r.residual_max_abs = residual_all.values();
  r.residual_top = residual_all.top(opt.top_dims);
  return r;
}

// The projection weights of an nn::Transformer's layers (W_Q and W_K split out of the fused QKV).
template <class Model>
auto layer_weights(Model& model) {
  using T = typename std::remove_cvref_t<decltype(model.embed.weight.value)>::value_type;
  std::vector<LayerWeights<T>> out;
  for (auto& layer : model.layers) {
    const auto& a = layer.attn;
    const Tensor<T>& qkv = a.w_qkv.value;
    LayerWeights<T> w;
    w.heads = a.H;
    w.kv_heads = a.Hkv;
    w.w_q = qkv.slice(1, 0, a.H * a.dh).contiguous();
    w.w_k = qkv.slice(1, a.H * a.dh, (a.H + a.Hkv) * a.dh).contiguous();
    w.w_o = a.w_o.value;
    out.push_back(std::move(w));
  }
  return out;
}

template <class Model, class T>
ModelReport model_report(Model& model, const nn::ModelProbe<T>& probe, const ReportOptions& opt = {}) {
  return model_report(probe, layer_weights(model), opt);
}

}  // namespace sinklab::probe
