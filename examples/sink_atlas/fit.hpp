// examples/sink_atlas: one run of one variant — the paired start, AdamW (every parameter decayed,
// as in the setting that formed the sink) at a constant rate after warm-up, and per evaluation one
// probed forward and backward pass on the probe batch read through probe::model_report; at the
// end post-training quantization (W8A8, W4A4 INT4 and FP4, each without and with SmoothQuant)
// and the cost of a training step. Included by the arch_*.cpp files, which name the models.
//
// What an evaluation logs (per layer "L<l>_…", per head "L<l>_h<h>_…"):
//   alpha           α₀: mean attention of the first 64 queries to key 0 (Gu et al.'s protocol)
//   attn0           mean attention of every query to key 0
//   vratio, dlogit  ‖v₀‖ / mean ‖v_j‖ (value drain) and Δlogit of key 0 (VGA's Fig. 5)
//   added, region   attention to what the variant adds (prepended tokens, the sink logit's
//                   share) and α of the whole sink region (those and BOS); see sink_region()
//   stable_rank     ‖U‖²_F / σ₁² of the attention update; massive: top-1 |x| / median of the output
// and over the model: the mean attention to key 0 over heads and layers, the strongest head (alpha_max and its place) with its value drain and
// Δlogit, Sink^0.3 and Sink^0.8 (fraction of heads), the largest |x| of any layer output, the
// largest massive activation with its layer, channel and token, Max inf norm and Avg kurtosis (Bondarenko's definitions), ‖∇v‖ at
// token 0 and over tokens 1–15, the norms of the residual stream and of the MLP output at token 0
// and over tokens 1–15, and the representation: mean pairwise token cosine and PCA core features
// (components for 99% of a layer output's variance), means over layers.
// Key 0 is the first position the layers see: BOS, or the first prepended token.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "../common/ptq_deltas.hpp"
#include "../common/retrofit.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/model_report.hpp"
#include "sinklab/probe/report_log.hpp"
#include "sinklab/quant/model.hpp"
#include "study.hpp"

namespace sink_atlas {

using namespace sinklab;

template <class Attn, class Norm = norm::RMS, class Tokens = tokens::None, class Mix = mix::None>
using Decoder = nn::Transformer<nn::PreNorm<Norm>, Attn, ffn::SwiGLU, pos::RoPE, Tokens, Mix>;
// Every variant of a seed starts from the baseline's initial tensors (copied by name; a variant's
// own tensors — gates, sink logits, tokens, norms' extra parameters, mixing coefficients — keep
// their own initialisation).
using Baseline = Decoder<attn::Attention<>>;
// Gated Attention G1 (Qiu et al.): σ(X·W_g) per channel of each head's output.
using G1 = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;

// What a variant changes beyond its type: the learning rate (DyT at its best rate), the
// embeddings' learnable scale (DyT, which has no norm to set the stream's scale), the added tokens.
struct Tweaks {
  double lr = 0;           // 0: --lr
  bool embed_scale = false;  // start the embeddings' scalar at 1 / init std (stream rms ≈ 1)
  int64_t registers = 0;   // > 0: that many prepended register tokens
  // Start from the baseline run's final weights of this seed and train retrofit_steps() (with
  // the same optimiser, fresh moments, the same warm-up fraction). preserve_output doubles every
  // W_O, so that a value gate added at W_g = 0 (every gate 0.5) computes the trained function.
  bool from_baseline = false, preserve_output = false;
};

// The start of a run that continues the baseline of its seed (finetune, retrofit_vga): every
// tensor the baseline has, from its final weights; the variant's own (a gate) keep their init.
template <class M>
void start_from_baseline(experiment::Run& run, const Context& c, M& model, bool preserve_output) {
  SINKLAB_CHECK(c.matrix != nullptr, "sink_atlas: ", run.tag(), " needs the matrix to find the baseline's run");
  const std::filesystem::path from = c.matrix->run_dir("baseline", run.seed()) / "final.safetensors";
  SINKLAB_CHECK(std::filesystem::exists(from), "sink_atlas: ", run.variant(), " continues the baseline run of seed ", run.seed(),
                ", but '", from.string(), "' does not exist; list baseline before it in --variants, in the same --out "
                "(its weights are not in kept records: run the baseline of that seed there first)");
  const experiment::Pairing pairing = experiment::TensorBank::load(from).apply(model);
  run.progress().print("[" + run.tag() + "] " + pairing.line() + " (the baseline's final weights, " + from.string() + ")");
  SINKLAB_CHECK(pairing.ok() && pairing.unused.empty(), "sink_atlas: ", run.tag(),
                ": the start from the baseline's weights failed: ", pairing.line());
  if (preserve_output) examples::double_attention_output(model);
}

constexpr int64_t kAlphaWindow = 64;  // Gu et al.'s α₀ over the first 64 queries

// Where a variant adds a place to sink attention — prepended register or sink tokens, or a sink
// logit whose share the weights leave out (1 − Σ_j a_ij) — per head:
//   added    the attention a query of the sequence (i ≥ offset) gives to the prepended keys
//            (j < offset) plus the sink logit's share, over every such query;
//   region   α of the whole sink region — the prepended keys, BOS (j = offset) and the sink
//            logit's share — over the first `window` queries of the sequence. With nothing added
//            it is α₀ exactly; a sink that sits on BOS behind the added tokens, or moves into
//            them, is counted either way.
struct SinkRegion {
  std::vector<double> added, region;
};
inline SinkRegion sink_region(const Tensor<float>& weights, int64_t offset, bool sink_logit, int64_t window) {
  const Tensor<float> A = weights.contiguous();  // [B, H, T, T]
  const int64_t B = A.size(0), H = A.size(1), T = A.size(2), S = A.size(3);
  SinkRegion out{std::vector<double>(static_cast<std::size_t>(H), 0.0), std::vector<double>(static_cast<std::size_t>(H), 0.0)};
  const int64_t end = std::min(T, offset + window);
  if (T <= offset) return out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = offset; i < T; ++i) {
        const float* a = A.data() + ((b * H + h) * T + i) * S;
        double added = 0, row = 0;
        for (int64_t j = 0; j < S; ++j) {
          row += a[j];
          if (j < offset) added += a[j];
        }
        const double logit = sink_logit ? 1.0 - row : 0.0;
        out.added[static_cast<std::size_t>(h)] += added + logit;
        if (i < end) out.region[static_cast<std::size_t>(h)] += added + a[offset] + logit;
      }
  for (auto& x : out.added) x /= double(B * (T - offset));
  for (auto& x : out.region) x /= double(B * (end - offset));
  return out;
}

inline void report_metrics(const probe::ModelReport& r, const nn::ModelProbe<float>& pr, int64_t offset,
                           bool sink_logit, io::LogRow& row) {
  double alpha_max = -1, rate03 = 0, rate08 = 0, sr = 0, gv0 = 0, gve = 0, res0 = 0, rese = 0, added = 0;
  double ffn0 = 0, ffne = 0, cos = 0, pca = 0, attn0 = 0, max_act = 0;
  double vratio_sink = NAN, dlogit_sink = NAN, attn0_max = -1, region_max = -1, region03 = 0;
  int64_t alpha_layer = -1, alpha_head = -1, heads = 0;
  const bool adds = offset > 0 || sink_logit;
  for (const auto& L : r.layers) {
    const int64_t l = L.layer;
    const SinkRegion reg = sink_region(pr.layers[static_cast<std::size_t>(l)].attn.weights, offset, sink_logit, kAlphaWindow);
    for (int64_t h = 0; h < L.sink_rate.alpha.heads(); ++h, ++heads) {
      const double a = L.sink_rate.alpha[h];
      const double vr = h < L.value_norm_ratio.heads() ? L.value_norm_ratio[h] : NAN;
      const double dl = h < L.delta_logit.heads() ? L.delta_logit[h] : NAN;
      row.emplace_back(examples::head_metric(l, h, "alpha"), a);
      row.emplace_back(examples::head_metric(l, h, "attn0"), L.attn_to_sink[h]);
      row.emplace_back(examples::head_metric(l, h, "vratio"), vr);
      row.emplace_back(examples::head_metric(l, h, "dlogit"), dl);
      const double ad = reg.added[static_cast<std::size_t>(h)], rg = reg.region[static_cast<std::size_t>(h)];
      if (adds) row.emplace_back(examples::head_metric(l, h, "added"), ad), row.emplace_back(examples::head_metric(l, h, "region"), rg), added += ad;
      region_max = std::max(region_max, rg);
      region03 += rg > 0.3 ? 1 : 0;
      if (a > alpha_max) alpha_max = a, alpha_layer = l, alpha_head = h, vratio_sink = vr, dlogit_sink = dl;
      attn0_max = std::max(attn0_max, L.attn_to_sink[h]);
      attn0 += L.attn_to_sink[h];
    }
    rate03 += L.sink_rate.rate;
    rate08 += L.sink_rate_high.rate;
    const std::string p = experiment::Matrix::layer_metric(l, "");
    row.emplace_back(p + "stable_rank", L.attn_stable_rank);
    row.emplace_back(p + "massive", L.massive.ratio);
    sr += L.attn_stable_rank;
    gv0 += L.grad_v.token0();
    gve += examples::early_mean(L.grad_v.per_token);
    res0 += L.residual_norms.token0, rese += L.residual_norms.rest_mean;
    ffn0 += L.ffn_norms.token0, ffne += L.ffn_norms.rest_mean;
    cos += L.token_cosine, pca += double(L.pca.components);
    for (double x : L.residual_max_abs) max_act = std::max(max_act, x);
  }
  const double n = double(std::max<std::size_t>(r.layers.size(), 1));
  row.emplace_back("alpha_max", alpha_max);
  row.emplace_back("alpha_max_layer", alpha_layer);
  row.emplace_back("alpha_max_head", alpha_head);
  row.emplace_back("attn0_max", attn0_max);
  row.emplace_back("attn0_mean", attn0 / double(std::max<int64_t>(heads, 1)));
  row.emplace_back("vratio_sink", vratio_sink);
  row.emplace_back("dlogit_sink", dlogit_sink);
  row.emplace_back("sink03", rate03 / n);  // every layer has the same heads: the fraction of all heads
  row.emplace_back("sink08", rate08 / n);
  if (adds) row.emplace_back("added", added / double(std::max<int64_t>(heads, 1)));
  row.emplace_back("region_max", region_max);  // α of the sink region, strongest head (α₀ max without added places)
  row.emplace_back("region03", region03 / double(std::max<int64_t>(heads, 1)));
  row.emplace_back("massive", r.massive.ratio);
  row.emplace_back("max_act", max_act);
  row.emplace_back("massive_layer", r.massive_layer);
  row.emplace_back("massive_channel", r.massive.channel);
  row.emplace_back("massive_token", r.massive.token);
  row.emplace_back("max_inf_norm", r.max_inf_norm);
  row.emplace_back("avg_kurtosis", r.avg_kurtosis);
  row.emplace_back("stable_rank", sr / n);
  row.emplace_back("gv0", gv0 / n);
  row.emplace_back("gv_early", gve / n);
  row.emplace_back("gv_ratio", gv0 / gve);
  row.emplace_back("res0", res0 / n);
  row.emplace_back("res_early", rese / n);
  row.emplace_back("ffn0", ffn0 / n);
  row.emplace_back("ffn_early", ffne / n);
  row.emplace_back("token_cos", cos / n);
  row.emplace_back("pca", pca / n);
}

// Trains Model for one run; `extra` goes to the model's constructor after (prefix, cfg, rng): the
// attention's policies, then the mixing options.
template <class Model, class... Extra>
void fit(experiment::Run& run, const Context& c, const Tweaks& tw = {}, const Extra&... extra) {
  const Settings& s = *c.s;
  nn::ModelConfig cfg = c.cfg;
  if (tw.embed_scale)  // N(0, σ) embeddings × 1/σ: rms 1 (PyTorch's N(0, 1) tables need none)
    cfg.embed_scale = cfg.init.kind == nn::Init::Kind::Normal ? 1.0 / cfg.init.a : 1.0;
  if (tw.registers > 0) cfg.tokens = {.count = tw.registers, .placement = tokens::Placement::Prepend};
  Rng rng(run.seed());
  typename Model::template Module<float> model("", cfg, rng, extra...);
  if (tw.from_baseline)
    start_from_baseline(run, c, model, tw.preserve_output);
  else
    examples::paired_start(run, model, "sink_atlas", "the baseline init of this seed",
                           [&](Rng& r) { return Baseline::Module<float>("", c.cfg, r); });
  const int64_t offset = model.tokens.offset();
  constexpr bool sink_logit = std::remove_cvref_t<decltype(model.layers.front().attn.pol.score)>::has_sink;

  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = tw.lr > 0 ? tw.lr : s.lr, .beta1 = 0.9, .beta2 = s.beta2,
                                   .weight_decay = s.weight_decay});
  const int64_t total = tw.from_baseline ? retrofit_steps(s, c.steps) : c.steps;
  const int64_t eval_every = tw.from_baseline ? std::max<int64_t>(1, std::min(s.eval_every, total / 5)) : s.eval_every;
  const optim::Schedule sched({.decay = optim::Decay::Cosine,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(total) * s.warmup)),
                               .total_steps = total,
                               .min_lr_ratio = s.min_lr_ratio});
  autodiff::Tape<float> tape;
  const int64_t per_step = s.batch * s.seq_len;

  io::JsonlLog reports(run.dir() / "reports.jsonl", true);
  auto evaluate = [&](int64_t step) {
    io::LogRow row;
    const double val = quant::mean_token_loss(model, c.ev->validation).first;
    row.emplace_back("val_loss", val);
    row.emplace_back("val_ppl", std::exp(val));
    row.emplace_back("tokens", step * per_step);
    nn::ModelProbe<float> pr;
    pr.gradients = true;
    {
      autodiff::Tape<float> t;
      auto loss = model.loss(t, c.ev->probe.x, c.ev->probe.y, &pr);
      t.backward(loss);
      opt.zero_grad();  // the probe's parameter gradients are not a training step's
    }
    const probe::ModelReport r = probe::model_report(model, pr, {.epsilon = 0.3, .epsilon_high = 0.8, .T_eps = kAlphaWindow});
    report_metrics(r, pr, offset, sink_logit, row);
    probe::write_report(reports, r, {{"step", step}, {"tokens", step * per_step}});
    return row;
  };
  auto at_end = [&] {
    experiment::Json j = examples::ptq_deltas(model, c.ev->calibration, c.ev->validation);
    // The cost of a training step without the optimiser: forward and backward on a batch of the
    // training shape, the fastest of a few passes (the machine's other load inflates the rest).
    Rng timing_rng(s.eval_seed, 3);
    const data::TokenBatch tb = data::sample_lm_windows(*c.train, timing_rng, s.batch, s.seq_len, kBos);
    double best = INFINITY;
    for (int64_t i = 0; i < std::max<int64_t>(1, s.timing_passes); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      autodiff::Tape<float> t;
      t.backward(model.loss(t, tb.x, tb.y));
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    opt.zero_grad();
    j["ms_per_step"] = best;
    j["parameters"] = nn::parameter_count<float>(model);
    return j;
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "val %.3f | α₀ max %.3f (L%.0f h%.0f) | Sink^0.3 %.2f | v-drain %.2f | top/median %.0f | kurtosis %.1f | "
                  "‖∇v‖ tok0/1-15 %.2f",
                  get("val_loss"), get("alpha_max"), get("alpha_max_layer") + 1, get("alpha_max_head"), get("sink03"),
                  get("vratio_sink"), get("massive"), get("avg_kurtosis"), get("gv_ratio"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt,
      {.steps = total, .eval_every = eval_every, .report = report,
       .diverge_above = std::log(double(cfg.vocab)) + s.diverge_margin, .at_end = at_end},
      examples::lm_step(run, c, tape, model, opt, sched, params, kBos),
      evaluate);
}

}  // namespace sink_atlas
