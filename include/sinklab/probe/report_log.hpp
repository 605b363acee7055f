// ModelReport as metric-log rows (io/metrics_log.hpp).
//
//   summary_row(r)   one row for the model: Max inf norm, Avg kurtosis (with the T they were
//                    measured at), top residual dimension, the largest massive activation
//   layer_rows(r)    one row per layer; per-head values as name.h<k>, per-token profiles as
//                    name.tok0 (token 0) and name.rest (mean of tokens 1..T−1)
//   write_report(jsonl, r, context)  the summary row ("row": "model") then the layer rows ("row": "layer")
//   write_report(csv, r, context)    the layer rows (a CSV keeps one set of columns)
//
// `context` (step, variant, seed, ...) leads every row. Metrics a report does not hold (no
// attention or gradients probed) are left out, so a CSV's columns are fixed by its first report.
#pragma once
#include <string>
#include <vector>

#include "sinklab/io/metrics_log.hpp"
#include "sinklab/probe/model_report.hpp"

namespace sinklab::probe {

namespace detail {
inline void put_heads(io::LogRow& row, const std::string& name, const PerHead& v) {
  for (std::size_t h = 0; h < v.values.size(); ++h) row.emplace_back(name + ".h" + std::to_string(h), v.values[h]);
}
inline void put_tokens(io::LogRow& row, const std::string& name, const TokenSummary& s) {
  if (s.per_token.empty()) return;
  row.emplace_back(name + ".tok0", s.token0());
  row.emplace_back(name + ".rest", s.rest());
}
inline void put_early(io::LogRow& row, const std::string& name, const EarlyTokenNorms& e) {
  row.emplace_back(name + ".tok0", e.token0);
  row.emplace_back(name + ".rest_mean", e.rest_mean);
  row.emplace_back(name + ".rest_max", e.rest_max);
}
inline void put_massive(io::LogRow& row, const std::string& name, const MassiveActivation& m) {
  row.emplace_back(name + ".ratio", m.ratio);
  row.emplace_back(name + ".top", m.top);
  row.emplace_back(name + ".median", m.median);
  row.emplace_back(name + ".token", m.token);
  row.emplace_back(name + ".channel", m.channel);
  row.emplace_back(name + ".token_share", m.token_share);
}
}  // namespace detail

inline io::LogRow summary_row(const ModelReport& r, const io::LogRow& context = {}) {
  io::LogRow row = context;
  row.emplace_back("max_inf_norm", r.max_inf_norm);
  row.emplace_back("avg_kurtosis", r.avg_kurtosis);
  row.emplace_back("seq_len", r.seq_len);
  if (r.massive_layer >= 0) {
    row.emplace_back("massive.layer", r.massive_layer);
    detail::put_massive(row, "massive", r.massive);
  }
  if (!r.residual_top.empty()) {
    row.emplace_back("residual.top_dim", r.residual_top[0].dim);
    row.emplace_back("residual.top_value", r.residual_top[0].value);
  }
  for (const auto& m : r.modules) {
    row.emplace_back(m.name + ".inf_norm_mean", m.mean_inf_norm);
    row.emplace_back(m.name + ".inf_norm_max", m.max_inf_norm);
    row.emplace_back(m.name + ".kurtosis", m.mean_kurtosis);
  }
  return row;
}

inline std::vector<io::LogRow> layer_rows(const ModelReport& r, const io::LogRow& context = {}) {
  std::vector<io::LogRow> rows;
  for (const LayerReport& L : r.layers) {
    io::LogRow row = context;
    row.emplace_back("layer", L.layer);
    if (r.attention) {
      detail::put_heads(row, "sink_score", L.sink_score);
      detail::put_heads(row, "attn_to_sink", L.attn_to_sink);
      row.emplace_back("sink_rate", L.sink_rate.rate);
      detail::put_heads(row, "sink_alpha", L.sink_rate.alpha);
      row.emplace_back("sink_rate_high", L.sink_rate_high.rate);
      detail::put_heads(row, "column_mass", L.column_mass.mass);
      detail::put_heads(row, "column_second_moment", L.column_mass.second_moment);
      detail::put_heads(row, "delta_logit", L.delta_logit);
      detail::put_heads(row, "value_norm", L.value_norm);
      detail::put_heads(row, "value_norm_ratio", L.value_norm_ratio);
      detail::put_heads(row, "key_norm_ratio", L.key_norm_ratio);
      detail::put_heads(row, "wo_value_norm", L.output_value_norm);
      detail::put_heads(row, "wo_value_norm_ratio", L.output_value_norm_ratio);
    }
    detail::put_heads(row, "qk_sigma1", L.qk_top_singular);
    if (!L.residual_top.empty()) {
      row.emplace_back("residual.top_dim", L.residual_top[0].dim);
      row.emplace_back("residual.top_value", L.residual_top[0].value);
    }
    detail::put_massive(row, "massive", L.massive);
    detail::put_early(row, "residual_norm", L.residual_norms);
    detail::put_early(row, "attn_norm", L.attn_norms);
    detail::put_early(row, "ffn_norm", L.ffn_norms);
    row.emplace_back("attn_stable_rank", L.attn_stable_rank);
    row.emplace_back("token_cosine", L.token_cosine);
    row.emplace_back("cosine_to_embedding", L.cosine_to_embedding);
    row.emplace_back("pca_components", L.pca.components);
    row.emplace_back("pca_threshold", L.pca.threshold);
    detail::put_tokens(row, "grad_q", L.grad_q);
    detail::put_tokens(row, "grad_k", L.grad_k);
    detail::put_tokens(row, "grad_v", L.grad_v);
    for (const auto& [name, b] : {std::pair{"attn", &L.attn_branch}, std::pair{"ffn", &L.ffn_branch}}) {
      detail::put_tokens(row, std::string(name) + ".bloat", b->bloat);
      detail::put_tokens(row, std::string(name) + ".compress", b->compress);
      detail::put_tokens(row, std::string(name) + ".change", b->change);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

inline void write_report(io::JsonlLog& log, const ModelReport& r, const io::LogRow& context = {}) {
  io::LogRow head = context;
  head.emplace_back("row", "model");
  log.log(summary_row(r, head));
  io::LogRow ctx = context;
  ctx.emplace_back("row", "layer");
  for (const io::LogRow& row : layer_rows(r, ctx)) log.log(row);
}

inline void write_report(io::CsvLog& log, const ModelReport& r, const io::LogRow& context = {}) {
  for (const io::LogRow& row : layer_rows(r, context)) log.log(row);
}

}  // namespace sinklab::probe
