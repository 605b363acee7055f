// examples/outlier_rescaling: one run of one architecture — paired start, training, the
// per-evaluation measurements and, at the end, post-training quantization. Included by the
// arch_*.cpp files, which name the architectures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "../common/ptq_deltas.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/outlier_stats.hpp"
#include "sinklab/probe/residual_sinks.hpp"
#include "sinklab/quant/model.hpp"
#include "rescaling_test.hpp"
#include "study.hpp"

namespace outlier_rescaling {

using namespace sinklab;

// Every variant of a seed starts from the baseline's initial tensors (copied by name; a
// variant's own tensors — gate, PreAffine λ₁, DyT α/β — keep their own initialisation).
using Baseline = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
// Gated Attention G1: a sigmoid gate per channel of the attention output, from the block input.
using G1 = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;

// What one evaluation reads off the probe batch, per layer ("L<i>_..."), and over the model.
//   resid_max / attn_max / ffn_max   max |x| of the layer's output stream and of its two branches
//   tok0_max, rest_max               max |x| of the output stream at token 0 and at the other tokens
//   sink                             mean attention of queries 1..T−1 to key 0, over heads
//   sink_dims, top_dim(_ratio)       probe::residual_sinks of the output stream at sink_dim_ratio
// max_act is the largest of every layer's resid/attn/ffn max (the paper's "max activation").
inline void activation_metrics(const nn::ModelProbe<float>& pr, double sink_dim_ratio, io::LogRow& row) {
  double max_act = 0, sink_sum = 0, dims_sum = 0;
  const auto L = static_cast<int64_t>(pr.layers.size());
  for (int64_t i = 0; i < L; ++i) {
    const auto& rec = pr.layers[static_cast<std::size_t>(i)];
    const Tensor<float> h = rec.output.contiguous();
    const int64_t T = h.size(1);
    const probe::ResidualSinks rs = probe::residual_sinks(h, sink_dim_ratio);
    const double tok0 = probe::inf_norm(h.slice(1, 0, 1)), rest = T > 1 ? probe::inf_norm(h.slice(1, 1, T)) : 0.0;
    const auto dims = static_cast<int64_t>(rs.dims.size());
    const double sink = probe::first_key_attention(rec.attn.weights).mean();
    const double rm = probe::inf_norm(h), am = probe::inf_norm(rec.attn_out), fm = probe::inf_norm(rec.ffn_out);
    max_act = std::max({max_act, rm, am, fm});
    sink_sum += sink;
    dims_sum += static_cast<double>(dims);
    const std::string p = "L" + std::to_string(i) + "_";
    row.emplace_back(p + "resid_max", rm);
    row.emplace_back(p + "attn_max", am);
    row.emplace_back(p + "ffn_max", fm);
    row.emplace_back(p + "tok0_max", tok0);
    row.emplace_back(p + "rest_max", rest);
    row.emplace_back(p + "median", rs.median);
    row.emplace_back(p + "sink", sink);
    row.emplace_back(p + "sink_dims", dims);
    row.emplace_back(p + "top_dim", rs.top);
    row.emplace_back(p + "top_dim_ratio", rs.top_ratio);
  }
  row.emplace_back("max_act", max_act);
  row.emplace_back("sink", sink_sum / static_cast<double>(std::max<int64_t>(L, 1)));
  row.emplace_back("sink_dims", dims_sum);
}

// |x| of the last layer's output for the probe batch's first sequence, tokens × channels.
inline void write_activation_map(const nn::ModelProbe<float>& pr, const experiment::fs::path& file) {
  const Tensor<float> h = pr.layers.back().output.contiguous();
  std::vector<double> a(static_cast<std::size_t>(h.size(1) * h.size(2)));  // the first sequence
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::fabs(static_cast<double>(h.data()[i]));
  experiment::write_matrix(file, a.data(), h.size(1), h.size(2));
}

template <class Model>
void fit(experiment::Run& run, const Context& c, const Variant& v) {
  const Settings& s = *c.s;
  nn::ModelConfig cfg = c.cfg;
  cfg.residual_clip = v.clip;
  Rng rng(run.seed());
  typename Model::template Module<float> model("", cfg, rng);
  nn::ModelConfig ref_cfg = c.cfg;
  ref_cfg.embed_scale = 0;
  examples::paired_start(run, model, "outlier_rescaling", "the baseline init of this seed",
                         [&](Rng& r) { return Baseline::Module<float>("", ref_cfg, r); });

  // Weight decay on matrices only (norm gains, DyT α/β and biases are not decayed, as in the
  // Megatron-style recipes the paper's models are trained with).
  std::vector<autodiff::Parameter<float>*> matrices, vectors;
  for (auto* p : nn::parameter_list<float>(model)) (p->value.rank() >= 2 ? matrices : vectors).push_back(p);
  const double lr = v.lr > 0 ? v.lr : s.lr;
  const optim::AdamWOptions decayed{.lr = lr, .beta2 = s.beta2, .weight_decay = s.weight_decay};
  optim::AdamWOptions plain = decayed;
  plain.weight_decay = 0;
  optim::AdamW<float> opt(std::vector<optim::AdamW<float>::Group>{{matrices, decayed}, {vectors, plain}});
  auto params = nn::parameter_list<float>(model);
  const int64_t total = c.steps;
  const optim::Schedule sched({.decay = optim::Decay::Cosine,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(total) * s.warmup)),
                               .total_steps = total,
                               .min_lr_ratio = s.min_lr_ratio});
  autodiff::Tape<float> tape;

  auto evaluate = [&](int64_t step) {
    io::LogRow row;
    row.emplace_back("val_loss", quant::mean_token_loss(model, c.ev->validation).first);
    nn::ModelProbe<float> pr;
    {
      autodiff::no_grad ng;
      autodiff::Tape<float> t;
      model.loss(t, c.ev->probe.x, c.ev->probe.y, &pr);
    }
    activation_metrics(pr, s.sink_dim_ratio, row);
    if (step == total && !c.heatmap_dir.empty())
      write_activation_map(pr, c.heatmap_dir / (run.variant() + "_seed" + std::to_string(run.seed()) + ".dat"));
    return row;
  };
  // At the end: post-training quantization, and App. A.1's rescaling tested by intervention.
  auto at_end = [&] {
    experiment::Json row = examples::ptq_deltas(model, c.ev->calibration, c.ev->validation);
    // GatedNorm's gates kept out of the quantizer: how much of its W4A4 loss they cause.
    const auto gate = [](const std::string& w) { return w.find("norm.gate.") != std::string::npos; };
    bool gated_norm = false;
    for (auto* p : nn::parameter_list<float>(model)) gated_norm |= gate(p->name);
    if (gated_norm)
      for (const auto& [key, scheme] :
           {std::pair{"w4a4_int4", quant::Scheme::w4a4_int4}, std::pair{"w4a4_fp4", quant::Scheme::w4a4_fp4}})
        row[std::string("ptq_") + key + "_gatefloat_dloss"] =
            quant::evaluate_ptq(model, c.ev->calibration, c.ev->validation, {.scheme = scheme, .keep_float = gate})
                .delta_loss();
    nn::ModelProbe<float> pr;
    {
      autodiff::no_grad ng;
      autodiff::Tape<float> t;
      model.loss(t, c.ev->probe.x, c.ev->probe.y, &pr);
    }
    for (const auto& [k, x] : rescaling_test(model, pr.layers.back().output, c.ev->validation, s.sink_dim_ratio))
      row[k] = x;
    return row;
  };
  auto report = [L = cfg.layers](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[200];
    std::snprintf(buf, sizeof buf, "val %.4f | max act %.1f | sink %.3f | sink dims %.0f | last-layer top dim %.0f (%.1fx)",
                  get("val_loss"), get("max_act"), get("sink"), get("sink_dims"),
                  get("L" + std::to_string(L - 1) + "_top_dim"), get("L" + std::to_string(L - 1) + "_top_dim_ratio"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt,
      {.steps = total, .eval_every = s.eval_every, .report = report,
       .diverge_above = std::log(double(cfg.vocab)) + s.diverge_margin, .at_end = at_end},
      examples::lm_step(run, c, tape, model, opt, sched, params, kBos),
      evaluate);
}

}  // namespace outlier_rescaling
