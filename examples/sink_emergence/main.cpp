// When does a small decoder form an attention sink? A grid over the factors the literature names
// (Gu et al., ICLR 2025, "When Attention Sink Emerges in Language Models"; Barbero et al. 2025),
// at the scale two cores allow: context, learning rate and schedule, weight decay, a fixed BOS,
// unique against repeated data, depth and initialisation, one factor at a time from a base cell,
// every cell of a seed starting from the same weights and, at the same context, the same batches.
//
//   sink_emergence                                   # the default cells (docs/results/sink-emergence.md)
//   sink_emergence --variants base,T512,wd0.5+T512   # any cells: factors joined by '+'
//   sink_emergence --quick                           # minutes: d 64, 2 cells, 300 steps
//   sink_emergence --smoke                           # seconds, built-in sentences (the CTest smoke test)
//
// Per evaluation (fit.cpp) one probed forward pass on the probe batch: α₀ per layer and head,
// Sink^0.3 and Sink^0.8, the value- and key-norm ratios of token 0, the largest top-1 / median |x|
// of the layer outputs with its place, Max inf norm and Avg kurtosis; reports.jsonl per run holds
// every evaluation's full report. Output (--out): runs/<cell>/seed<k>/, summary.md with the
// tables and the verdicts, and the figures.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/error_line.hpp"
#include "../common/lm_flags.hpp"
#include "../common/optim_flags.hpp"
#include "../common/probe_keys.hpp"
#include "../common/sentences.hpp"
#include "../common/smoke_preset.hpp"
#include "../common/study_summary.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/io/files.hpp"
#include "study.hpp"

using namespace sinklab;
namespace fs = std::filesystem;
using experiment::fixed;
using experiment::Json;
using experiment::Matrix;
using experiment::Spread;
using sink_emergence::Settings;

namespace {

using Summary = examples::StudySummary<Settings>;

Json settings_json(const Settings& s, const std::string& source, int64_t vocab) {
  return Json{{"d_model", s.d_model}, {"layers", s.layers}, {"heads", s.heads}, {"seq_len", s.seq_len},
              {"batch", s.batch}, {"vocab", vocab}, {"lr", s.lr}, {"weight_decay", s.weight_decay},
              {"beta2", s.beta2}, {"warmup", s.warmup}, {"clip", s.clip}, {"min_lr_ratio", s.min_lr_ratio},
              {"init", s.init}, {"bos", s.bos}, {"unique_tokens", s.unique_tokens}, {"eval_every", s.eval_every},
              {"eval_batch", s.eval_batch}, {"val_batches", s.val_batches}, {"text", source}};
}

// The first evaluation of a run at which `pred` holds, as tokens seen (NaN: never).
template <class Pred>
double onset(const experiment::RunResult& r, Pred pred) {
  for (const Json& h : r.history)
    if (pred(h)) return experiment::number(h["tokens"]);
  return NAN;
}

// A run's final α₀ per layer and head ([layer][head]), as fit.cpp logged it.
std::vector<std::vector<double>> alpha_by_layer(const experiment::RunResult& r) {
  std::vector<std::vector<double>> a;
  for (int64_t l = 0;; ++l) {
    std::vector<double> heads;
    for (int64_t h = 0;; ++h) {
      const double x = r.metric(examples::head_metric(l, h, "alpha"));
      if (!std::isfinite(x)) break;
      heads.push_back(x);
    }
    if (heads.empty()) return a;
    a.push_back(std::move(heads));
  }
}

double num(const Json& h, const char* k) { return h.contains(k) ? experiment::number(h[k]) : NAN; }

// A sink in one evaluation: a head with α₀ ≥ alpha_sink, or Sink^0.3 ≥ rate_sink read over a full
// window of 64 queries (below it uniform attention alone gives α₀ > 0.3: 0.34 at T = 8).
bool sink_at(const Settings& s, const Json& h) {
  return num(h, "alpha_max") >= s.alpha_sink || (num(h, "window") >= 64 && num(h, "sink03") >= s.rate_sink);
}

std::string tables(const Summary& S) {
  const auto& cells = S.m.variants();
  experiment::Table t({"cell", "seeds", "tokens", "unique tokens", "epochs", "val loss", "α₀ max (first 64 queries)",
                       "α₀ uniform", "Sink^0.3", "Sink^0.8", "attention to token 0 (max head, all queries)",
                       "min ‖v₀‖ ratio", "top-1 / median |x|", "Avg kurtosis", "sink onset (tokens)",
                       "massive onset (tokens)"});
  for (const auto& v : cells) {
    const auto runs = S.m.of(v);
    if (runs.empty()) continue;
    std::vector<double> sink_on, massive_on;
    for (const auto* r : runs) {
      sink_on.push_back(onset(*r, [&](const Json& h) { return sink_at(S.s, h); }));
      massive_on.push_back(onset(*r, [&](const Json& h) { return num(h, "massive") >= S.s.massive_ratio; }));
    }
    auto onset_str = [](const std::vector<double>& xs) {
      const Spread sp = experiment::summarize(xs);
      return sp.n_finite == 0 ? std::string("none") : sp.short_str(0) + " (" + std::to_string(sp.n_finite) + "/" +
                                                          std::to_string(sp.n) + " seeds)";
    };
    t.row({v, std::to_string(runs.size()) + (S.diverged(v) ? " (" + std::to_string(S.diverged(v)) + " diverged)" : ""),
           S.spread(v, "tokens").short_str(0), S.spread(v, "unique_tokens").short_str(0), S.spread(v, "epochs").short_str(1),
           S.spread(v, "val_loss").short_str(), S.spread(v, "alpha_max").short_str(3), fixed(S.mean(v, "alpha_uniform"), 3),
           S.spread(v, "sink03").short_str(2), S.spread(v, "sink08").short_str(2), S.spread(v, "attn0_max").short_str(3),
           S.spread(v, "vratio_min").short_str(2), S.spread(v, "massive").short_str(1),
           S.spread(v, "avg_kurtosis").short_str(1), onset_str(sink_on), onset_str(massive_on)});
  }
  std::string md = "### Every cell at the end of training (mean ± sd over seeds)\n\n" + t.markdown() + "\n";
  // Where the largest α₀ and the massive activation sit (first seed).
  experiment::Table w({"cell", "α₀ max at", "α₀ per layer (max over heads)", "top-1 |x| at (layer, token, channel)",
                       "share of sequences with their top-1 at that token"});
  for (const auto& v : cells) {
    const auto runs = S.m.of(v);
    if (runs.empty() || runs.front()->diverged) continue;
    const auto* r = runs.front();
    std::string per_layer;
    for (const auto& heads : alpha_by_layer(*r))
      per_layer += (per_layer.empty() ? "" : " ") + fixed(*std::max_element(heads.begin(), heads.end()), 2);
    w.row({v, "layer " + fixed(r->metric("alpha_max_layer") + 1, 0) + ", head " + fixed(r->metric("alpha_max_head"), 0),
           per_layer,
           fixed(r->metric("massive_layer") + 1, 0) + ", " + fixed(r->metric("massive_token"), 0) + ", " +
               fixed(r->metric("massive_channel"), 0),
           fixed(r->metric("massive_token_share"), 2)});
  }
  md += "### Where (first seed; layers counted from 1)\n\n" + w.markdown() + "\n";
  // Each factor against the base, paired by seed.
  if (S.has("base")) {
    experiment::Table f({"cell", "Δ α₀ max", "Δ Sink^0.3", "Δ log10 top-1/median", "Δ val loss", "the factor's direction"});
    auto call = [](const experiment::PairedDifference& p, const char* what) {
      return p.sign() == 0 ? std::string("inconclusive (") + what + ")"
                           : std::string(p.sign() > 0 ? "raises " : "lowers ") + what;
    };
    for (const auto& v : cells) {
      if (v == "base" || !S.has(v)) continue;
      std::vector<double> dlog;
      for (const auto* x : S.m.of(v))
        for (const auto* b : S.m.of("base"))
          if (x->seed == b->seed && !x->diverged && !b->diverged)
            dlog.push_back(std::log10(x->metric("massive")) - std::log10(b->metric("massive")));
      const auto da = experiment::paired_difference(S.paired(v, "base", "alpha_max"));
      const auto dm = experiment::paired_difference(dlog);
      f.row({v, da.str(3), experiment::paired_difference(S.paired(v, "base", "sink03")).str(2), dm.str(2),
             experiment::paired_difference(S.paired(v, "base", "val_loss")).str(3),
             call(da, "α₀") + "; " + call(dm, "top-1/median")});
    }
    md += "### Each cell against the base, per seed (cell − base of the same seed; a direction needs every seed to "
          "agree in sign and |mean| ≥ sd, so one seed is always inconclusive)\n\n" + f.markdown() + "\n";
  }
  return md;
}

// The outcome the study exists for: the cells in which a sink, and separately a massive
// activation, formed in every seed.
std::string outcome(const Summary& S) {
  std::string sink_cells, massive_cells;
  for (const auto& v : S.m.variants()) {
    const auto runs = S.m.of(v);
    if (runs.empty()) continue;
    bool sink = true, massive = true;
    for (const auto* r : runs) {
      sink &= !r->diverged && !r->history.empty() && sink_at(S.s, r->history.back());
      massive &= !r->diverged && r->metric("massive") >= S.s.massive_ratio;
    }
    if (sink) sink_cells += (sink_cells.empty() ? "" : ", ") + v;
    if (massive) massive_cells += (massive_cells.empty() ? "" : ", ") + v;
  }
  return "### Outcome\n\n- A sink (a head with α₀ ≥ " + fixed(S.s.alpha_sink, 2) + " over the first 64 queries, or Sink^0.3 ≥ " +
         fixed(S.s.rate_sink, 2) + " at T ≥ 64) at the end of training in every seed: " +
         (sink_cells.empty() ? std::string("**no cell**") : "**" + sink_cells + "**") +
         ".\n- A massive activation (top-1 |x| / median |x| of a layer output ≥ " + fixed(S.s.massive_ratio, 0) +
         ") in every seed: " + (massive_cells.empty() ? std::string("**no cell**") : "**" + massive_cells + "**") + ".\n";
}

void figures(const Summary& S, const fs::path& out) {
  experiment::Figures fig(out);
  std::vector<std::pair<std::string, std::string>> series;  // cell, csv
  for (const auto& v : S.m.variants()) {
    if (!S.has(v)) continue;
    const std::string file = "dynamics_" + v + ".csv";
    experiment::write_dynamics(out / file, S.m.of(v),
                               {"tokens", "val_loss", "alpha_max", "alpha_uniform", "sink03", "sink08", "massive",
                                "avg_kurtosis", "attn0_max", "vratio_min"});
    series.emplace_back(v, file);
  }
  if (series.empty()) return;
  // Against tokens seen (cells at different contexts take different steps for the same tokens).
  std::string gp = "set terminal " + fig.terminal() + " size 1500,840\nset output 'emergence.png'\n"
                   "set multiplot layout 2,3 title 'sink and massive-activation measures against tokens seen (mean over "
                   "seeds)'\nset datafile separator ','\nset datafile columnheaders\nset grid\nset key top left font ',8'\n"
                   "set xlabel 'tokens seen'\nset format x '%.1s%c'\n";
  const std::vector<std::tuple<std::string, std::string, bool>> panels = {
      {"alpha_max", "largest alpha_0 of any head (first 64 queries); dashed: uniform", false},
      {"sink03", "Sink^0.3 (fraction of heads with alpha_0 > 0.3)", false},
      {"vratio_min", "smallest ||v_0|| / mean ||v_j|| of any head (value drain)", false},
      {"massive", "top-1 |x| / median |x| (largest layer output)", true},
      {"avg_kurtosis", "Avg kurtosis", true},
      {"val_loss", "validation loss", false}};
  for (const auto& [metric, title, log_y] : panels) {
    gp += "set title " + experiment::gp_quote(title) + "\n" + (log_y ? "set" : "unset") + " logscale y\n";
    gp += metric == "sink03" ? "set yrange [0:1]\n" : "set yrange [*:*]\n";  // a fraction: its whole range
    gp += "plot ";
    for (std::size_t i = 0; i < series.size(); ++i)
      gp += std::string(i ? ", " : "") + experiment::gp_quote(series[i].second) + " using (column('tokens_mean')):(" +
            // step 0's loss (ln V) would flatten the curves: the loss panel starts at the first evaluation after it
            (metric == "val_loss" ? "column('tokens_mean') > 0 ? column('val_loss_mean') : 1/0" : "column('" + metric + "_mean')") +
            ") with lines lw 2 lc rgb '" + experiment::palette(i) + "' title " + experiment::gp_quote(series[i].first);
    if (metric == "alpha_max")
      gp += ", " + experiment::gp_quote(series.front().second) +
            " using (column('tokens_mean')):(column('alpha_uniform_mean')) with lines dt 2 lc rgb 'gray' title 'uniform'";
    gp += "\n";
  }
  gp += "unset multiplot\nunset logscale y\nunset datafile columnheaders\nset format x\nunset xlabel\n";
  fig.script(gp, "emergence.png");
  // α₀ per layer and head at the end (first seed), one map per cell, one colour scale.
  std::vector<experiment::Figures::Series> maps;
  for (const auto& v : S.m.variants()) {
    const auto runs = S.m.of(v);
    if (runs.empty() || runs.front()->diverged) continue;
    const auto by_layer = alpha_by_layer(*runs.front());
    if (by_layer.empty()) continue;
    std::vector<double> a;
    for (const auto& heads : by_layer) a.insert(a.end(), heads.begin(), heads.end());
    const std::string file = "alpha_map_" + v + ".dat";
    experiment::write_matrix(out / file, a.data(), static_cast<int64_t>(by_layer.size()),
                             static_cast<int64_t>(by_layer.front().size()));
    maps.push_back({v, file});
  }
  // Layers and heads counted from 1 and 0 as the tables do.
  if (!maps.empty())
    fig.heatmaps("alpha_map.png", "alpha_0 (first 64 queries) per layer and head at the end, first seed; one scale 0..1",
                 maps, {.x = "head", .y = "layer", .y_first = 1, .tick = 1, .square = false});
  fig.render();
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  experiment::CommonFlags flags{.out = "out/sink_emergence", .steps = 1500};
  CLI::App app{"When does a small decoder form an attention sink? One factor at a time from a base cell: context, "
               "learning rate and schedule, weight decay, BOS, repeated data, depth, initialisation "
               "(docs/results/sink-emergence.md).",
               "sink_emergence"};
  experiment::add_common_flags(app, flags);
  app.get_option("--steps")->description(
      "training steps of a cell at the base context (--seq-len); a cell with another context trains for the same "
      "number of tokens");
  std::vector<std::string> cells;
  app.add_option("--variants,--cells", cells, "comma-separated cells (default: " + [] {
    std::string d;
    for (const auto& c : sink_emergence::default_cells()) d += (d.empty() ? "" : ",") + c;
    return d;
  }() + "); " + sink_emergence::factor_help())->delimiter(',');
  examples::add_lm_flags(app, s);
  examples::add_optimiser_flags(app, s);
  if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
  if (flags.quick) {
    experiment::preset(app, "--steps", flags.steps, 300);
    experiment::preset(app, "--d-model", s.d_model, 64);
    experiment::preset(app, "--seq-len", s.seq_len, 128);
    experiment::preset(app, "--eval-every", s.eval_every, 100);
    if (app.count("--seeds") == 0) flags.seeds = {0};
    if (cells.empty()) cells = {"base", "T64"};
  }
  if (s.smoke) {
    examples::smoke_preset(app, flags, s);
    if (cells.empty()) cells = {"base", "T8+nobos", "cosine+wd0.5+init-gu", "repeat500+depth3"};
  }

  try {
    SINKLAB_CHECK(s.d_model % s.heads == 0, "sink_emergence: --heads ", s.heads, " does not divide --d-model ", s.d_model);
    if (cells.empty()) cells = sink_emergence::default_cells();
    for (const auto& c : cells) sink_emergence::parse_cell(c, s);  // names the bad one before anything runs
    if (flags.threads > 0) set_num_threads(flags.threads);

    const examples::Sentences text = examples::load_corpus("sink_emergence", s.corpus, s.text_file, s.brown_dir, s.smoke);
    const data::WordLmCorpus corpus = data::make_word_lm(text.lines, {.vocab = s.vocab, .specials = 1});
    std::printf("text: %s; %zu training and %zu validation words, vocabulary %lld (<unk> %.1f%% of validation)\n",
                text.source.c_str(), corpus.train.size(), corpus.validation.size(), static_cast<long long>(corpus.vocab),
                100 * corpus.unk_rate);
    sink_emergence::Context c;
    c.base = &s;
    c.train = &corpus.train;
    c.validation = &corpus.validation;
    c.vocab = corpus.vocab;
    c.steps = flags.steps;
    c.base_tokens = s.batch * s.seq_len;
    std::printf("base: %lld layers, d = %lld, %lld heads; T = %lld, batch %lld; AdamW %g (wd %g), %s after %.0f%% "
                "warm-up; %lld tokens per cell, %zu cell(s) x %zu seed(s)\n",
                static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.heads),
                static_cast<long long>(s.seq_len), static_cast<long long>(s.batch), s.lr, s.weight_decay,
                s.min_lr_ratio == 1.0 ? "constant" : "cosine", 100 * s.warmup,
                static_cast<long long>(flags.steps * c.base_tokens), cells.size(), flags.seeds.size());

    Matrix m("sink_emergence", flags, cells, settings_json(s, text.source, corpus.vocab), argc, argv);
    for (const auto& v : cells) m.set_steps(v, sink_emergence::cell_steps(c, sink_emergence::parse_cell(v, s).s));
    const bool complete = m.run([&](experiment::Run& r) { sink_emergence::run(r, c); });
    const Summary S{m, s};
    std::string md = "# Sink emergence at d = " + std::to_string(s.d_model) + "\n\n" + text.source + "; " +
                     std::to_string(flags.steps * c.base_tokens) + " tokens per cell; seeds";
    for (auto seed : flags.seeds) md += " " + std::to_string(seed);
    md += ". Measures on the first validation batch of each cell's context at the end of training.\n\n";
    md += outcome(S) + "\n" + tables(S);
    io::write_file_atomically(m.out() / "summary.md", md);
    std::printf("\n%s\nsummary: %s\n", md.c_str(), (m.out() / "summary.md").string().c_str());
    if (s.plots) figures(S, m.out());
    if (!complete) return 130;
  } catch (const std::exception& e) {
    examples::print_error("sink_emergence", e);
    return 1;
  }
  return 0;
}
