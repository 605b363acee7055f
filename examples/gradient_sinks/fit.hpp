// examples/gradient_sinks: one run of one architecture — the paired start, AdamW with warmup and
// cosine decay, and per evaluation one probed forward and backward pass on the probe batch read
// through probe::model_report: the sink (ε-rate, column mass), the token-wise gradient norms at
// q, k, v, the backward flow through each branch (Bloat, Compress, Change), and the norms of the
// residual stream and the two branch outputs at token 0 against tokens 1–15. The per-token
// profiles of every evaluation go to reports.jsonl in the run's folder; the final ones to
// profile.csv and flow_scatter.csv. Included by arch_softmax.cpp and arch_nosink.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "../common/probe_keys.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/model_report.hpp"
#include "sinklab/probe/report_log.hpp"
#include "sinklab/probe/token_norms.hpp"
#include "sinklab/quant/model.hpp"
#include "study.hpp"

namespace gradient_sinks {

using namespace sinklab;

template <class Attn>
using Decoder = nn::Transformer<nn::PreNorm<norm::RMS>, Attn, ffn::SwiGLU, pos::RoPE>;
using Vanilla = Decoder<attn::Attention<>>;
using VScaled = Decoder<attn::Attention<score::Softmax, gate::None, value::VScale>>;
using Gated = Decoder<attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>>;
using Sinked = Decoder<attn::Attention<score::SoftmaxSink>>;

using examples::early_mean;  // tokens 1..15: the paper's "other early tokens"
using examples::kEarlyLast;

// The scalars of one report, per layer ("L<l>_...") and as the mean over layers:
//   sink_rate, mass0, attn0      ε-sink rate at token 0, M̄_0, mean attention to token 0
//   g{q,k,v}0, g{q,k,v}_early    ‖∇q_t‖, ‖∇k_t‖, ‖∇v_t‖ at token 0 and over tokens 1–15
//   {attn,ffn}_{bloat,compress,change}{0,_early}   the backward flow through each branch
//   {res,attn_out,ffn_out}0, …_early               activation norms, token 0 and tokens 1–15
inline void report_metrics(const probe::ModelReport& r, io::LogRow& row) {
  std::vector<std::pair<std::string, double>> sums;
  auto put = [&](int64_t l, const std::string& key, double x) {
    row.emplace_back(experiment::Matrix::layer_metric(l, key), x);
    auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& p) { return p.first == key; });
    if (it == sums.end()) sums.emplace_back(key, x);
    else it->second += x;
  };
  auto tokens = [&](int64_t l, const std::string& key, const probe::TokenSummary& t) {
    if (t.per_token.empty()) return;
    put(l, key + "0", t.token0());
    put(l, key + "_early", early_mean(t.per_token));
  };
  for (const auto& L : r.layers) {
    const int64_t l = L.layer;
    put(l, "sink_rate", L.sink_rate.rate);
    put(l, "mass0", L.column_mass.mass.mean());
    put(l, "attn0", L.attn_to_sink.mean());
    tokens(l, "gq", L.grad_q);
    tokens(l, "gk", L.grad_k);
    tokens(l, "gv", L.grad_v);
    for (const auto& [name, br] : {std::pair{"attn", &L.attn_branch}, std::pair{"ffn", &L.ffn_branch}}) {
      tokens(l, std::string(name) + "_bloat", br->bloat);
      tokens(l, std::string(name) + "_compress", br->compress);
      tokens(l, std::string(name) + "_change", br->change);
    }
    put(l, "res0", L.residual_norms.token0);
    put(l, "res_early", L.residual_norms.rest_mean);
    put(l, "attn_out0", L.attn_norms.token0);
    put(l, "attn_out_early", L.attn_norms.rest_mean);
    put(l, "ffn_out0", L.ffn_norms.token0);
    put(l, "ffn_out_early", L.ffn_norms.rest_mean);
  }
  const double n = double(std::max<std::size_t>(r.layers.size(), 1));
  for (const auto& [k, s] : sums) row.emplace_back(k, s / n);
  row.emplace_back("max_act", r.max_inf_norm);
}

// V-scale's learned constants and what they do at the sink: per layer and value head
// C = (d_head·0.02)²·e^θ, and φ(‖v‖²) = ‖v‖²/(‖v‖² + C) at token 0 and over tokens 1–15 (batch
// means of φ per token, from the probe's values, which are recorded before the transform).
template <class Module>
experiment::Json vscale_constants(Module& model, const nn::ModelProbe<float>& pr) {
  experiment::Json j;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    auto& a = model.layers[l].attn;
    if constexpr (requires { a.pol.value.constant(int64_t{1}, 0.0); }) {
      if (a.value_params.empty()) continue;
      const Tensor<float>& theta = a.value_params.front().value;
      const Tensor<float> V = pr.layers[l].attn.values.contiguous();  // [B, H_kv, T, d]
      const int64_t B = V.size(0), H = V.size(1), T = V.size(2), d = V.size(3);
      for (int64_t h = 0; h < H; ++h) {
        const double C = a.pol.value.constant(a.dh, theta.data()[h]);
        double phi0 = 0, phi_early = 0;
        const int64_t last = std::min<int64_t>(kEarlyLast, T - 1);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t <= last; ++t) {
            const float* v = V.data() + ((b * H + h) * T + t) * d;
            double r = 0;
            for (int64_t k = 0; k < d; ++k) r += double(v[k]) * v[k];
            (t == 0 ? phi0 : phi_early) += r / (r + C);
          }
        const std::string p = experiment::Matrix::layer_metric(int64_t(l), "h" + std::to_string(h) + "_");
        j[p + "C"] = C;
        j[p + "phi0"] = phi0 / double(B);
        j[p + "phi_early"] = last >= 1 ? phi_early / double(B * last) : NAN;
      }
    }
  }
  return j;
}

// Compress against the norm of the branch's input (the paper's Fig. 3): per layer and token
// 0..15, the batch-mean ‖h‖ entering the attention branch (the layer input) and the MLP branch
// (h + attention output) beside the branch's Compress, written to flow_scatter.csv; and the
// least-squares slope of log10 Compress on log10 ‖h‖. RMSNorm scales its backward pass by
// ‖g‖/rms(h), so "attenuation ∝ 1/rms" predicts a slope of −1 within each layer; the gains g
// differ between layers, so the slope is fitted within layers (each layer's points centred on
// their own means), and the slope over all points pooled (the paper's scatter) beside it.
inline experiment::Json compress_scatter(const probe::ModelReport& r, const nn::ModelProbe<float>& pr,
                                         const std::filesystem::path& csv_path) {
  io::CsvLog csv(csv_path);
  experiment::Json j;
  for (const auto& [name, stream] : {std::pair{"attn", &nn::LayerRecord<float>::input}, std::pair{"ffn", &nn::LayerRecord<float>::mid}}) {
    std::vector<double> xs, ys, xw, yw;  // pooled; centred within each layer
    for (std::size_t l = 0; l < r.layers.size(); ++l) {
      const auto& br = std::string(name) == "attn" ? r.layers[l].attn_branch : r.layers[l].ffn_branch;
      const Tensor<double> norms = probe::token_norms(pr.layers[l].*stream);
      const int64_t last = std::min<int64_t>(kEarlyLast, norms.size(0) - 1);
      std::vector<double> lx, ly;
      for (int64_t t = 0; t <= last; ++t) {
        const double h = norms(t), c = br.compress.per_token[static_cast<std::size_t>(t)];
        csv.log({{"branch", std::string(name)}, {"layer", int64_t(l) + 1}, {"token", t}, {"h_norm", h}, {"compress", c}});
        lx.push_back(std::log10(h));
        ly.push_back(std::log10(c));
      }
      xs.insert(xs.end(), lx.begin(), lx.end());
      ys.insert(ys.end(), ly.begin(), ly.end());
      const double mx = experiment::summarize(lx).mean, my = experiment::summarize(ly).mean;
      for (std::size_t i = 0; i < lx.size(); ++i) xw.push_back(lx[i] - mx), yw.push_back(ly[i] - my);
    }
    const experiment::LineFit within = experiment::fit_line(xw, yw), pooled = experiment::fit_line(xs, ys);
    j[std::string(name) + "_compress_slope"] = within.slope;
    j[std::string(name) + "_compress_r2"] = within.r2;
    j[std::string(name) + "_compress_slope_pooled"] = pooled.slope;
    j[std::string(name) + "_compress_intercept_pooled"] = pooled.intercept;
  }
  return j;
}

// Trains Model for one run of the matrix.
template <class Model>
void fit(experiment::Run& run, const Context& c) {
  const Settings& s = *c.s;
  Rng rng(run.seed());
  typename Model::template Module<float> model("", c.cfg, rng);
  examples::paired_start(run, model, "gradient_sinks", "the vanilla init of this seed",
                         [&](Rng& r) { return Vanilla::Module<float>("", c.cfg, r); });
  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = s.lr, .beta1 = 0.9, .beta2 = s.beta2, .weight_decay = s.weight_decay});
  const int64_t total = c.steps;
  const optim::Schedule sched({.decay = optim::Decay::Cosine,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(total) * s.warmup)),
                               .total_steps = total,
                               .min_lr_ratio = s.min_lr_ratio});
  autodiff::Tape<float> tape;

  // One probed forward and backward pass on the probe batch. Its parameter gradients are
  // discarded: the next training step starts with zero_grad().
  auto probe_pass = [&] {
    nn::ModelProbe<float> pr;
    pr.gradients = true;
    autodiff::Tape<float> t;
    auto loss = model.loss(t, c.ev->probe.x, c.ev->probe.y, &pr);
    t.backward(loss);
    opt.zero_grad();
    return pr;
  };
  io::JsonlLog reports(run.dir() / "reports.jsonl", true);
  auto evaluate = [&](int64_t step) {
    io::LogRow row;
    const double val = quant::mean_token_loss(model, c.ev->validation).first;
    row.emplace_back("val_loss", val);
    row.emplace_back("val_ppl", std::exp(val));
    const nn::ModelProbe<float> pr = probe_pass();
    const probe::ModelReport r = probe::model_report(model, pr, {.epsilon = s.epsilon});
    report_metrics(r, row);
    probe::write_report(reports, r, {{"step", step}});
    return row;
  };
  // The final profiles by position (mean over layers) for the figures, and V-scale's constants.
  auto at_end = [&] {
    const nn::ModelProbe<float> pr = probe_pass();
    const probe::ModelReport r = probe::model_report(model, pr, {.epsilon = s.epsilon});
    io::CsvLog csv(run.dir() / "profile.csv");
    const auto T = static_cast<int64_t>(r.layers.front().grad_q.per_token.size());
    const double n = double(r.layers.size());
    for (int64_t t = 0; t < T; ++t) {
      double q = 0, k = 0, v = 0, ab = 0, fb = 0;
      for (const auto& L : r.layers) {
        const auto i = static_cast<std::size_t>(t);
        q += L.grad_q.per_token[i] / n, k += L.grad_k.per_token[i] / n, v += L.grad_v.per_token[i] / n;
        ab += L.attn_branch.bloat.per_token[i] / n, fb += L.ffn_branch.bloat.per_token[i] / n;
      }
      csv.log({{"pos", t}, {"grad_q", q}, {"grad_k", k}, {"grad_v", v}, {"attn_bloat", ab}, {"ffn_bloat", fb}});
    }
    experiment::Json j = vscale_constants(model, pr);
    j.update(compress_scatter(r, pr, run.dir() / "flow_scatter.csv"));
    j["parameters"] = nn::parameter_count<float>(model);
    return j;
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[220];
    std::snprintf(buf, sizeof buf,
                  "val %.4f | sink rate %.2f, M0 %.3f | ‖∇v‖ tok0/early %.2f | res norm tok0/early %.1f | max act %.0f",
                  get("val_loss"), get("sink_rate"), get("mass0"), get("gv0") / get("gv_early"),
                  get("res0") / get("res_early"), get("max_act"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt,
      {.steps = total, .eval_every = s.eval_every, .report = report,
       .diverge_above = std::log(double(c.cfg.vocab)) + s.diverge_margin, .at_end = at_end},
      examples::lm_step(run, c, tape, model, opt, sched, params, kBos),
      evaluate);
}

}  // namespace gradient_sinks
