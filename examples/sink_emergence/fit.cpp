// examples/sink_emergence: the cells of the grid (the factors a name sets) and one run of one
// cell — the decoder at the cell's depth and initialisation, AdamW with warm-up and a constant or
// cosine rate, windows of the cell's context with or without BOS over the whole training text or
// its first N tokens, and per evaluation one probed forward pass on the probe batch read through
// probe::model_report: α₀ per layer and head (first 64 queries: Gu et al.'s T = 64, exactly, under
// a causal mask) and over every query, Sink^0.3 and Sink^0.8, the value- and key-norm ratios of
// token 0, the largest top-1 / median |x| of the layer outputs with its token and channel, Max
// inf norm and Avg kurtosis. Every evaluation's full report goes to reports.jsonl.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/model_report.hpp"
#include "sinklab/probe/report_log.hpp"
#include "sinklab/quant/model.hpp"
#include "study.hpp"

namespace sink_emergence {

using namespace sinklab;
using Decoder = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU, pos::RoPE>;

const std::vector<std::string>& default_cells() {
  // The base, then one factor at a time (context, schedule, rate, weight decay, BOS, data
  // repetition, depth, initialisation).
  static const std::vector<std::string> cells = {"base", "T64", "T128", "T512", "cosine", "lr1e-3", "lr1e-2",
                                                 "wd0", "wd0.5", "nobos", "repeat100k", "depth8", "init-gu"};
  return cells;
}

std::string factor_help() {
  return "a cell is 'base' or factors joined by '+': T<n> (context), lr<x>, wd<x>, cosine (decay to 0.1 of the "
         "peak instead of constant), nobos (no fixed first token), repeat<n>[k|M] (train on the first n tokens only), "
         "depth<n>, heads<n>, init-gu (N(0, sqrt(2/5d))), init-pytorch";
}

namespace {

double number_after(const std::string& part, std::size_t prefix, const std::string& cell) {
  std::string t = part.substr(prefix);
  double mult = 1;
  if (!t.empty() && (t.back() == 'k' || t.back() == 'M')) mult = t.back() == 'k' ? 1e3 : 1e6, t.pop_back();
  std::size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  SINKLAB_CHECK(used == t.size() && used > 0 && std::isfinite(v) && v >= 0, "sink_emergence: cell '", cell,
                "': cannot read a number in '", part, "'; ", factor_help());
  return v * mult;
}

bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

Cell parse_cell(const std::string& name, const Settings& base) {
  Cell c{name, base, {}};
  SINKLAB_CHECK(!name.empty(), "sink_emergence: an empty cell name; ", factor_help());
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t plus = std::min(name.find('+', at), name.size());
    const std::string f = name.substr(at, plus - at);
    at = plus + 1;
    Settings& s = c.s;
    auto integer = [&](std::size_t prefix, int64_t lo, int64_t hi) {
      const double v = number_after(f, prefix, name);
      SINKLAB_CHECK(v == std::floor(v) && v >= double(lo) && v <= double(hi), "sink_emergence: cell '", name, "': ", f,
                    " is outside ", lo, "..", hi);
      return static_cast<int64_t>(v);
    };
    if (f == "base") {
      SINKLAB_CHECK(name == "base", "sink_emergence: cell '", name, "': 'base' stands alone");
    } else if (f == "cosine") {
      s.min_lr_ratio = 0.1;
    } else if (f == "nobos") {
      s.bos = false;
    } else if (f == "init-gu" || f == "init-pytorch" || f == "init-normal") {
      s.init = f.substr(5);
    } else if (starts(f, "T")) {
      s.seq_len = integer(1, 8, 1 << 16);
    } else if (starts(f, "lr")) {
      s.lr = number_after(f, 2, name);
      SINKLAB_CHECK(s.lr > 0 && s.lr <= 1, "sink_emergence: cell '", name, "': ", f, " is outside (0, 1]");
    } else if (starts(f, "wd")) {
      s.weight_decay = number_after(f, 2, name);
    } else if (starts(f, "repeat")) {
      s.unique_tokens = integer(6, 100, int64_t{1} << 40);
    } else if (starts(f, "depth")) {
      s.layers = integer(5, 1, 256);
    } else if (starts(f, "heads")) {
      s.heads = integer(5, 1, 1024);
      SINKLAB_CHECK(s.d_model % s.heads == 0, "sink_emergence: cell '", name, "': ", s.heads, " heads do not divide d ",
                    s.d_model);
    } else {
      throw Error("sink_emergence: cell '" + name + "': unknown factor '" + f + "'; " + factor_help());
    }
    c.factors.push_back(f);
  }
  return c;
}

int64_t cell_steps(const Context& c, const Settings& s) {
  const double tokens = double(c.steps) * double(c.base_tokens);
  // Two steps at least: the cosine schedule needs one after its warm-up step (a longer-context
  // cell under --smoke would otherwise get a single step and be refused).
  return std::max<int64_t>(2, std::llround(tokens / double(s.batch * s.seq_len)));
}

namespace {

nn::ModelConfig config_of(const Context& c, const Settings& s) {
  nn::ModelConfig cfg;
  cfg.vocab = c.vocab;
  cfg.d_model = s.d_model;
  cfg.layers = s.layers;
  cfg.heads = s.heads;
  cfg.max_len = s.seq_len;
  cfg.init = examples::model_init(s.init, s.d_model);
  return cfg;
}

// Uniform causal attention's α₀ over the first w queries: (1/w) Σ_{t=1}^{w} 1/t.
double uniform_alpha(int64_t w) {
  double a = 0;
  for (int64_t t = 1; t <= w; ++t) a += 1.0 / double(t);
  return a / double(w);
}

// The scalars of one report: per layer and head α₀ ("L<l>_h<h>_alpha", first 64 queries) and the
// value- and key-norm ratios of token 0; over the model the largest α₀ and its place, Sink^0.3 and
// Sink^0.8 (fraction of all heads), the largest massive activation and its place, Max inf norm,
// Avg kurtosis.
void report_metrics(const probe::ModelReport& r, io::LogRow& row) {
  double alpha_max = -1, attn0_max = -1, vratio_min = INFINITY, rate03 = 0, rate08 = 0;  // rates: sums over layers
  int64_t alpha_layer = -1, alpha_head = -1;
  for (const auto& L : r.layers) {
    const int64_t l = L.layer;
    for (int64_t h = 0; h < L.sink_rate.alpha.heads(); ++h) {
      const std::string p = experiment::Matrix::layer_metric(l, "h" + std::to_string(h) + "_");
      const double a = L.sink_rate.alpha[h];
      row.emplace_back(p + "alpha", a);
      row.emplace_back(p + "attn0", L.attn_to_sink[h]);
      if (h < L.value_norm_ratio.heads()) row.emplace_back(p + "vratio", L.value_norm_ratio[h]);
      if (h < L.key_norm_ratio.heads()) row.emplace_back(p + "kratio", L.key_norm_ratio[h]);
      if (a > alpha_max) alpha_max = a, alpha_layer = l, alpha_head = h;
      attn0_max = std::max(attn0_max, L.attn_to_sink[h]);
      if (h < L.value_norm_ratio.heads()) vratio_min = std::min(vratio_min, L.value_norm_ratio[h]);
    }
    rate03 += L.sink_rate.rate;  // every layer has the same heads: the mean of the layers' rates is the
    rate08 += L.sink_rate_high.rate;  // fraction of all heads
    row.emplace_back(experiment::Matrix::layer_metric(l, "massive"), L.massive.ratio);
  }
  row.emplace_back("alpha_max", alpha_max);
  row.emplace_back("alpha_max_layer", alpha_layer);
  row.emplace_back("alpha_max_head", alpha_head);
  row.emplace_back("attn0_max", attn0_max);
  row.emplace_back("vratio_min", vratio_min);
  row.emplace_back("sink03", r.layers.empty() ? NAN : rate03 / double(r.layers.size()));
  row.emplace_back("sink08", r.layers.empty() ? NAN : rate08 / double(r.layers.size()));
  row.emplace_back("massive", r.massive.ratio);
  row.emplace_back("massive_top", r.massive.top);
  row.emplace_back("massive_layer", r.massive_layer);
  row.emplace_back("massive_token", r.massive.token);
  row.emplace_back("massive_channel", r.massive.channel);
  row.emplace_back("massive_token_share", r.massive.token_share);
  row.emplace_back("max_inf_norm", r.max_inf_norm);
  row.emplace_back("avg_kurtosis", r.avg_kurtosis);
}

}  // namespace

void run(experiment::Run& run, const Context& c) {
  const Cell cell = parse_cell(run.variant(), *c.base);
  const Settings& s = cell.s;
  const int64_t steps = cell_steps(c, s);
  const int32_t first = s.bos ? kBos : data::kNoFirstToken;
  const nn::ModelConfig cfg = config_of(c, s);

  // The cell's data: its training stream (all of it, or its first N tokens) and windows.
  std::vector<int32_t> repeated;
  if (s.unique_tokens > 0) {
    SINKLAB_CHECK(s.unique_tokens <= static_cast<int64_t>(c.train->size()), "sink_emergence: cell '", cell.name,
                  "' asks for ", s.unique_tokens, " unique tokens; the training text has ", c.train->size());
    repeated.assign(c.train->begin(), c.train->begin() + s.unique_tokens);
  }
  const std::vector<int32_t>& train = s.unique_tokens > 0 ? repeated : *c.train;
  EvalData ev;
  ev.validation = data::consecutive_lm_windows(*c.validation, s.seq_len, s.eval_batch, s.val_batches, first);
  ev.probe = ev.validation.front();
  const int64_t window = std::min<int64_t>(64, s.seq_len);

  Rng rng(run.seed());
  Decoder::Module<float> model("", cfg, rng);
  examples::paired_start(run, model, "sink_emergence", "every cell of this seed with this depth and initialisation",
                         [&](Rng& r) { return Decoder::Module<float>("", cfg, r); });
  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = s.lr, .beta1 = 0.9, .beta2 = s.beta2, .weight_decay = s.weight_decay});
  const optim::Schedule sched({.decay = optim::Decay::Cosine,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(steps) * s.warmup)),
                               .total_steps = steps,
                               .min_lr_ratio = s.min_lr_ratio});
  autodiff::Tape<float> tape;
  const int64_t per_step = s.batch * s.seq_len;

  io::JsonlLog reports(run.dir() / "reports.jsonl", true);
  auto evaluate = [&](int64_t step) {
    io::LogRow row;
    const double val = quant::mean_token_loss(model, ev.validation).first;
    row.emplace_back("val_loss", val);
    row.emplace_back("tokens", step * per_step);
    row.emplace_back("epochs", double(step * per_step) / double(train.size()));
    nn::ModelProbe<float> pr;
    autodiff::Tape<float> t;
    model.loss(t, ev.probe.x, ev.probe.y, &pr);
    const probe::ModelReport r = probe::model_report(model, pr, {.epsilon = 0.3, .epsilon_high = 0.8, .T_eps = 64});
    report_metrics(r, row);
    row.emplace_back("alpha_uniform", uniform_alpha(window));
    row.emplace_back("window", window);
    probe::write_report(reports, r, {{"step", step}, {"tokens", step * per_step}});
    return row;
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "val %.3f | α₀ max %.3f (L%.0f h%.0f; uniform %.3f) | Sink^0.3 %.2f Sink^0.8 %.2f | top/median %.0f "
                  "(L%.0f tok %.0f ch %.0f) | kurtosis %.1f",
                  get("val_loss"), get("alpha_max"), get("alpha_max_layer") + 1, get("alpha_max_head"),
                  get("alpha_uniform"), get("sink03"), get("sink08"), get("massive"), get("massive_layer") + 1,
                  get("massive_token"), get("massive_channel"), get("avg_kurtosis"));
    return std::string(buf);
  };
  auto at_end = [&] {
    experiment::Json j;
    j["parameters"] = nn::parameter_count<float>(model);
    j["unique_tokens"] = static_cast<int64_t>(train.size());
    j["steps"] = steps;
    return j;
  };
  const int64_t eval_every = std::max<int64_t>(1, std::llround(double(s.eval_every) * double(c.base_tokens) / double(per_step)));
  auto step = [&, first](Rng& data) {
    const data::TokenBatch b = data::sample_lm_windows(train, data, s.batch, s.seq_len, first);
    run.see_batch(b.x);
    return experiment::optimisation_step(tape, model, opt, b, sched, params, s.clip);
  };
  experiment::train(run, model, opt,
                    {.steps = steps, .eval_every = eval_every, .report = report,
                     .diverge_above = std::log(double(cfg.vocab)) + 2.0, .at_end = at_end},
                    step, evaluate);
}

}  // namespace sink_emergence
