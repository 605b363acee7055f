// The sink atlas: every mitigation of the five papers on one sink-forming language model, every
// diagnostic in one table. Each paper compares its own remedy with a baseline on its own model;
// here they share the data, the seeds, the initial weights (every variant of a seed starts from
// the baseline's tensors), the batches and the budget, at the setting in which the baseline
// decoder forms an attention sink (docs/results/sink-emergence.md).
//
//   sink_atlas                                      # every variant, 3 seeds (docs/results/sink-atlas.md)
//   sink_atlas --variants baseline,g1 --seeds 0 --out out/atlas-a   # a part; merge with --resume
//   sink_atlas --quick                              # minutes: d 64, T 128, 300 steps, six variants
//   sink_atlas --smoke                              # seconds, every variant, built-in sentences (CTest)
//
// Output (--out): runs/<variant>/seed<k>/ (metrics, every evaluation's full report), summary.md
// with the atlas table, the paired differences and the findings, dynamics.md with every run over
// training, and the figures.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "../common/error_line.hpp"
#include "../common/lm_flags.hpp"
#include "../common/optim_flags.hpp"
#include "../common/sentences.hpp"
#include "../common/sink_preset.hpp"
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
using sink_atlas::Settings;

namespace sink_atlas {

// The atlas' rows: every variant, what it changes and where it comes from (docs/papers.md).
struct VariantInfo {
  std::string name, what, source;
};
const std::vector<VariantInfo>& variant_table() {
  static const std::vector<VariantInfo> v = {
      {"baseline", "softmax attention", "—"},
      {"sink_logit", "a learnable sink logit per head", "gpt-oss; VGA §4.2 'learnable sink'"},
      {"registers", "register tokens (--registers), prepended", "Darcet et al.; VGA §4.2"},
      {"sink_token", "one learnable token at position 0", "a learnable sink / BOS token"},
      {"g1", "G1: σ(X·W_g) per channel of each head's output", "Gated Attention (Qiu et al.)"},
      {"g1_head", "G1 per head", "Gated Attention (Qiu et al.)"},
      {"iga", "σ(X·W_g) per head on each key's value", "VGA paper's IGA"},
      {"vga", "σ(V·W_g) per head on each key's value", "VGA eq. 4"},
      {"vga_out", "σ(V·W_g) per head on each query's output", "VGA App. B"},
      {"preaffine_g1", "PreAffine (per-channel scale before RMSNorm) + G1", "outlier-driven rescaling"},
      {"gatednorm_g1", "GatedNorm (rank-16 gate after RMSNorm) + G1", "outlier-driven rescaling"},
      {"dyt", "DyT tanh(αx) for every RMSNorm, at its best rate", "outlier-driven rescaling (DyT)"},
      {"vscale", "V-scale: v̂ = φ(‖v‖²) v", "gradient sinks"},
      {"resformer", "value residual to layer 1's values (0.5 / 0.5)", "ResFormer (ExoFormer's baseline)"},
      {"nuresformer", "G1 + layer 1's q, k, v, gate as anchors, static", "ExoFormer paper"},
      {"exoformer", "G1 + an embedding projection as anchors, static", "ExoFormer"},
      {"exoformer_dyn", "ExoFormer with dynamic (token-wise) mixing", "ExoFormer"},
      {"sigmoid", "σ(s − log n): no normaliser", "Gu et al. (no sink without a normaliser)"},
      {"relu", "ReLU(s) / n: no normaliser", "Gu et al."},
      {"clipped", "clipped softmax, ζ = 1, γ = −12/T", "Bondarenko et al."},
      {"finetune", "the baseline's final weights, trained --retrofit-fraction more", "VGA App. C (fine-tuning w/o VGA)"},
      {"retrofit_vga", "the same with VGA added (W_g = 0, W_O doubled: the same function at the start)",
       "VGA App. C (retrofit)"},
  };
  return v;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> n;
  for (const auto& v : variant_table()) n.push_back(v.name);
  return n;
}

const VariantInfo& info(const std::string& name) {
  const auto& t = variant_table();
  const auto it = std::find_if(t.begin(), t.end(), [&](const VariantInfo& v) { return v.name == name; });
  if (it == t.end()) {
    std::string known;
    for (const auto& v : t) known += (known.empty() ? "" : ", ") + v.name;
    throw Error("sink_atlas: --variants: '" + name + "' is not a variant; known: " + known);
  }
  return *it;
}

void run(experiment::Run& r, const Context& c) {
  info(r.variant());
  if (!detail::run_sinks(r, c) && !detail::run_gates(r, c) && !detail::run_norms(r, c) && !detail::run_mixing(r, c) &&
      !detail::run_scores(r, c))
    throw Error("sink_atlas: no model for the variant '" + r.variant() + "'");
}

}  // namespace sink_atlas

namespace {

using Summary = examples::StudySummary<Settings>;

Json settings_json(const Settings& s, const std::string& source, int64_t vocab) {
  Json j{{"d_model", s.d_model}, {"layers", s.layers}, {"heads", s.heads}, {"seq_len", s.seq_len},
              {"batch", s.batch}, {"vocab", vocab}, {"lr", s.lr}, {"dyt_lr", s.dyt_lr},
              {"weight_decay", s.weight_decay}, {"beta2", s.beta2}, {"warmup", s.warmup}, {"clip", s.clip},
              {"min_lr_ratio", s.min_lr_ratio}, {"init", s.init}, {"registers", s.registers},
              {"eval_every", s.eval_every}, {"eval_batch", s.eval_batch}, {"val_batches", s.val_batches},
              {"calib_batches", s.calib_batches}, {"eval_seed", s.eval_seed}, {"text", source}};
  // Recorded only where it differs from 0.1, so the runs kept from before the fine-tuning
  // variants existed (docs/results/runs/sink-atlas) resume with the same settings.
  if (s.retrofit_fraction != 0.1) j["retrofit_fraction"] = s.retrofit_fraction;
  return j;
}

// A column of the atlas: the final metric, its header, its precision.
struct Column {
  std::string key, title;
  int precision;
};
const std::vector<Column>& sink_columns() {
  static const std::vector<Column> c = {
      {"alpha_max", "α₀ max", 2},          {"sink03", "Sink^0.3", 2},       {"sink08", "Sink^0.8", 2},
      {"added", "attn → added", 2},        {"vratio_sink", "‖v₀‖ ratio", 2}, {"dlogit_sink", "Δlogit₀", 2},
      {"massive", "top-1 / median", 0},    {"max_inf_norm", "Max inf-norm", 1}, {"avg_kurtosis", "Avg kurtosis", 1},
      {"gv_ratio", "‖∇v‖ tok0 / 1–15", 2}, {"stable_rank", "stable rank", 2}};
  return c;
}
const std::vector<Column>& cost_columns() {
  static const std::vector<Column> c = {
      {"val_loss", "val loss", 3},        {"val_ppl", "ppl", 1},          {"ptq_w8a8_dloss", "W8A8", 3},
      {"ptq_w8a8_sq_dloss", "W8A8 SQ", 3}, {"ptq_w4a4_int4_dloss", "INT4", 3}, {"ptq_w4a4_int4_sq_dloss", "INT4 SQ", 3},
      {"ptq_w4a4_fp4_dloss", "FP4", 3},   {"ptq_w4a4_fp4_sq_dloss", "FP4 SQ", 3}, {"ms_per_step", "ms / step", 1},
      {"parameters", "params", 0}};
  return c;
}

// A run forms a sink: a head with α ≥ alpha_sink, or Sink^0.3 ≥ 0.1 (docs/results/sink-emergence.md),
// read on the sink region (fit.hpp's sink_region: BOS plus what the variant adds, so a sink that
// moves into register tokens or the sink logit still counts; α₀ itself where nothing is added).
// Below 64 tokens the α window is shorter and uniform attention alone passes 0.3 (0.34 at T = 8),
// so there the rate does not count.
bool forms_sink(const experiment::RunResult& r, const Settings& s) {
  return r.metric("region_max") >= s.alpha_sink || (s.seq_len >= 64 && r.metric("region03") >= 0.1);
}
bool massive(const experiment::RunResult& r, const Settings& s) { return r.metric("massive") >= s.massive_ratio; }
// "every" / "none" / "k of n" seeds in which pred holds, over the runs that did not diverge.
template <class Pred>
std::pair<int, int> count_runs(const Summary& S, const std::string& v, Pred pred) {
  int yes = 0, n = 0;
  for (const auto* x : S.m.of(v))
    if (!x->diverged) ++n, yes += pred(*x) ? 1 : 0;
  return {yes, n};
}

std::string tables(const Summary& S) {
  const auto& vs = S.m.variants();
  std::string md;
  {
    std::vector<std::string> head = {"variant", "diverged", "sink (seeds)", "massive (seeds)", "α sink region"};
    for (const auto& c : sink_columns()) head.push_back(c.title);
    experiment::Table t(head);
    for (const auto& v : vs) {
      if (!S.has(v)) continue;
      const auto [yes, n] = count_runs(S, v, [&](const experiment::RunResult& r) { return forms_sink(r, S.s); });
      const auto [big, nb] = count_runs(S, v, [&](const experiment::RunResult& r) { return massive(r, S.s); });
      std::vector<std::string> row = {v, std::to_string(S.diverged(v)) + "/" + std::to_string(S.m.of(v).size()),
                                      std::to_string(yes) + "/" + std::to_string(n), std::to_string(big) + "/" + std::to_string(nb),
                                      S.spread(v, "region_max").short_str(2)};
      for (const auto& c : sink_columns()) row.push_back(S.spread(v, c.key).short_str(c.precision));
      t.row(row);
    }
    md += "### The sink, the activations and the gradient at the end of training (mean ± sd over seeds)\n\n" +
          t.markdown() +
          "\nsink: a head with α ≥ " + fixed(S.s.alpha_sink, 1) + " or Sink^0.3 ≥ 0.1 on the sink region (BOS plus the "
          "variant's added tokens or sink logit); massive: top-1 / median ≥ " + fixed(S.s.massive_ratio, 0) +
          "; α sink region: the strongest head's; α₀: mean attention of the first 64 queries to key 0, the strongest head; Sink^ε: fraction of heads with "
          "α₀ > ε; attn → added: attention a query gives to the prepended tokens or the sink logit; ‖v₀‖ ratio and "
          "Δlogit₀: in the strongest head; top-1 / median: the largest |x| of a layer output over its median; Max "
          "inf-norm and Avg kurtosis over every module's inputs and outputs; stable rank of the attention update, mean "
          "over layers. Key 0 is BOS, or the first prepended token.\n\n";
  }
  {
    std::vector<std::string> head = {"variant", "Δ loss vs baseline (paired)"};
    for (const auto& c : cost_columns()) head.push_back(c.title);
    experiment::Table t(head);
    for (const auto& v : vs) {
      if (!S.has(v)) continue;
      std::vector<std::string> row = {
          v, v == "baseline" || !S.has("baseline") ? "—"
                                                   : experiment::paired_difference(S.paired(v, "baseline", "val_loss")).str()};
      for (const auto& c : cost_columns()) row.push_back(S.spread(v, c.key).short_str(c.precision));
      t.row(row);
    }
    md += "### Loss, post-training quantization (Δ loss in nats) and cost (mean ± sd over seeds)\n\n" + t.markdown() +
          "\nW8A8, INT4 (W4A4), FP4 (W4A4, E2M1): Δ validation loss after quantizing every projection's weights and "
          "inputs, calibrated on training windows; SQ: with SmoothQuant (α 0.5). ms / step: one forward and backward "
          "pass of a training batch on the threads the run used, the fastest of three.\n\n";
  }
  if (S.has("baseline")) {
    const std::vector<Column> keys = {{"val_loss", "val loss", 3},      {"alpha_max", "α₀ max", 2},
                                      {"sink03", "Sink^0.3", 2},        {"massive", "top-1 / median", 0},
                                      {"avg_kurtosis", "Avg kurtosis", 1}, {"max_inf_norm", "Max inf-norm", 1},
                                      {"gv_ratio", "‖∇v‖ tok0 / 1–15", 2}, {"ptq_w8a8_dloss", "W8A8 Δ", 3},
                                      {"ptq_w4a4_int4_dloss", "INT4 Δ", 3}};
    std::vector<std::string> head = {"variant − baseline"};
    for (const auto& c : keys) head.push_back(c.title);
    experiment::Table t(head);
    for (const auto& v : vs) {
      if (v == "baseline" || !S.has(v)) continue;
      std::vector<std::string> row = {v};
      for (const auto& c : keys) {
        const auto p = experiment::paired_difference(S.paired(v, "baseline", c.key));
        row.push_back((p.clear() ? "**" : "") + p.str(c.precision) + (p.clear() ? "**" : ""));
      }
      t.row(row);
    }
    md += "### Each variant against the baseline of the same seed (paired differences)\n\n" + t.markdown() +
          "\nBold: the same sign in every seed and |mean| ≥ sd (at least two seeds); the rest is inside the seed "
          "spread.\n\n";
  }
  {
    experiment::Table t({"variant", "what it changes", "from", "compute (s per run, mean)", "seeds"});
    for (const auto& v : vs) {
      if (!S.has(v)) continue;
      std::vector<double> secs;
      std::string seeds;
      for (const auto* x : S.m.of(v)) secs.push_back(x->seconds), seeds += (seeds.empty() ? "" : " ") + std::to_string(x->seed);
      const auto& i = sink_atlas::info(v);
      t.row({v, i.what, i.source, fixed(experiment::summarize(secs).mean, 0), seeds});
    }
    md += "### The variants\n\n" + t.markdown() + "\n";
  }
  return md;
}

// Spearman's rank correlation (average ranks for ties) over the finite pairs.
double spearman(const std::vector<double>& a, const std::vector<double>& b, int* n_out) {
  std::vector<std::pair<double, double>> p;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i])) p.emplace_back(a[i], b[i]);
  *n_out = static_cast<int>(p.size());
  if (p.size() < 3) return NAN;
  auto ranks = [&](bool first) {
    std::vector<std::size_t> idx(p.size());
    std::iota(idx.begin(), idx.end(), 0);
    auto val = [&](std::size_t i) { return first ? p[i].first : p[i].second; };
    std::sort(idx.begin(), idx.end(), [&](std::size_t x, std::size_t y) { return val(x) < val(y); });
    std::vector<double> r(p.size());
    for (std::size_t i = 0; i < idx.size();) {
      std::size_t j = i;
      while (j + 1 < idx.size() && val(idx[j + 1]) == val(idx[i])) ++j;
      for (std::size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * double(i + j) + 1;
      i = j + 1;
    }
    return r;
  };
  const auto ra = ranks(true), rb = ranks(false);
  const double ma = experiment::summarize(ra).mean, mb = experiment::summarize(rb).mean;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i)
    sab += (ra[i] - ma) * (rb[i] - mb), saa += (ra[i] - ma) * (ra[i] - ma), sbb += (rb[i] - mb) * (rb[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

// What the table supports across papers, computed from it: which variants form the sink, whether
// the sink travels with the outliers and the quantization error across architectures, and which
// sink-free variant costs the least loss.
std::string findings(const Summary& S) {
  if (!S.has("baseline")) return "";
  std::string md = "### Findings\n\n";
  const auto [b_yes, b_n] = count_runs(S, "baseline", [&](const experiment::RunResult& r) { return forms_sink(r, S.s); });
  md += "- The baseline forms a sink (a head with α₀ ≥ " + fixed(S.s.alpha_sink, 1) + ", or Sink^0.3 ≥ 0.1) in " +
        std::to_string(b_yes) + " of " + std::to_string(b_n) + " seeds (α₀ max " +
        S.spread("baseline", "alpha_max").short_str(2) + "); the other variants are read on their sink region.";
  if (b_n == 0 || b_yes < b_n)
    md += " The comparisons below ask which variants remove a sink the baseline has; with a baseline that does not "
          "form one in every seed they are **untestable here** and stand as descriptions.";
  md += "\n";
  std::vector<std::string> keep, remove, mixed;
  // The fine-tuned baselines (finetune, retrofit_vga) trained longer than the rest: they are
  // judged against each other in the claims, not ranked here.
  for (const auto& v : S.m.variants()) {
    if (v == "baseline" || !S.has(v) || sink_atlas::continues_baseline(v)) continue;
    const auto [yes, n] = count_runs(S, v, [&](const experiment::RunResult& r) { return forms_sink(r, S.s); });
    if (n == 0) continue;
    (yes == n ? keep : yes == 0 ? remove : mixed).push_back(v);
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("none") : s;
  };
  md += "- A sink in every seed: " + list(keep) + ". In no seed: " + list(remove) + ". In some: " + list(mixed) + ".\n";
  // Across variants (their seed means): does the sink's strength (α of the sink region) rank the
  // outliers and the W4A4 error?
  std::vector<double> alpha, kurt, massive, inf, int4;
  for (const auto& v : S.m.variants()) {
    if (!S.has(v) || sink_atlas::continues_baseline(v)) continue;
    alpha.push_back(S.mean(v, "region_max"));
    kurt.push_back(S.mean(v, "avg_kurtosis"));
    massive.push_back(S.mean(v, "massive"));
    inf.push_back(S.mean(v, "max_inf_norm"));
    int4.push_back(S.mean(v, "ptq_w4a4_int4_dloss"));
  }
  for (const auto& [name, ys] : std::vector<std::pair<std::string, const std::vector<double>*>>{
           {"Avg kurtosis", &kurt}, {"top-1 / median", &massive}, {"Max inf-norm", &inf}, {"INT4 Δ loss", &int4}}) {
    int n = 0;
    const double rho = spearman(alpha, *ys, &n);
    md += "- Across the " + std::to_string(n) + " variants, the rank correlation of the sink region's α with " + name + " is ρ = " +
          fixed(rho, 2) + (n < 8 ? " (too few variants to read)" : std::abs(rho) >= 0.5 ? "" : " (weak)") + ".\n";
  }
  // The sink-free variant with the lowest loss against the baseline (paired), where the baseline
  // has a sink for it to remove.
  std::string best;
  double best_d = INFINITY;
  for (const auto& v : remove) {
    const auto d = experiment::summarize(S.paired(v, "baseline", "val_loss"));
    if (d.n_finite > 0 && d.mean < best_d) best_d = d.mean, best = v;
  }
  if (!best.empty() && b_n > 0 && b_yes == b_n) {
    md += "- Of the variants that remove the sink in every seed, " + best + " has the lowest mean loss against the "
          "baseline: Δ " + experiment::paired_difference(S.paired(best, "baseline", "val_loss")).str();
    // Separated from the runner-up only when their own paired difference is clear.
    std::string second;
    double second_d = INFINITY;
    for (const auto& v : remove) {
      const auto d = experiment::summarize(S.paired(v, "baseline", "val_loss"));
      if (v != best && d.n_finite > 0 && d.mean < second_d) second_d = d.mean, second = v;
    }
    if (!second.empty()) {
      const auto p = experiment::paired_difference(S.paired(best, second, "val_loss"));
      md += p.clear() ? "; below " + second + " by " + p.str() : " — not separated from " + second + " (" + p.str() + ")";
    }
    md += ".\n";
  }
  return md + "\n";
}

// The retrofit starts from the trained function: its first evaluation (before any step) against
// the baseline's final one of the same seed.
std::string retrofit_check(const Summary& S) {
  if (!S.has("retrofit_vga") || !S.has("baseline")) return "";
  double worst = 0;
  int n = 0;
  for (const auto* r : S.m.of("retrofit_vga"))
    for (const auto* b : S.m.of("baseline"))
      if (b->seed == r->seed && !r->history.empty() && r->history.front().contains("val_loss")) {
        worst = std::max(worst, std::abs(experiment::number(r->history.front()["val_loss"]) - b->metric("val_loss")));
        ++n;
      }
  if (n == 0) return "";
  char worst_str[32];
  std::snprintf(worst_str, sizeof worst_str, "%.1e", worst);
  return "Check: retrofit_vga before its first step (VGA added at W_g = 0, every W_O doubled) against the baseline's "
         "final validation loss of the same seed: largest |Δ| " + std::string(worst_str) + " nats over " +
         std::to_string(n) + " seed(s).\n\n";
}

// Every run over training, at step 0 and every fifth of its steps (dynamics.md beside
// summary.md): when the sink forms and what moves with it, per seed — the figures show the
// seeds' mean and range only. ‖x₀‖ and MLP ‖out₀‖ / 1–15 are token 0's residual and MLP-output
// norms over those of tokens 1–15 (each a mean over layers).
std::string over_training(const Summary& S) {
  const auto num = [](const Json& e, const char* k) { return e.contains(k) ? experiment::number(e[k]) : NAN; };
  // The sink region's α and the attention to added tokens or the sink logit, where a variant has them.
  const auto added = [&](const Json& e) { return e.contains("added") ? fixed(num(e, "added"), 3) : std::string("—"); };
  experiment::Table t({"run", "step", "tokens (M)", "val loss", "α₀ max", "(layer, head)", "α sink region", "Sink^0.3",
                       "attn → key 0", "attn → added", "‖v₀‖ ratio", "top-1/median", "kurtosis", "‖∇v‖ 0/1–15",
                       "‖x₀‖ / 1–15", "MLP ‖out₀‖ / 1–15"});
  for (const auto& v : S.m.variants()) {
    if (!S.has(v)) continue;
    for (const auto* r : S.m.of(v)) {
      const int64_t last = r->history.empty() ? 0 : int64_t(num(r->history.back(), "step"));
      const int64_t every = std::max<int64_t>(1, last / 5);
      for (const auto& e : r->history) {
        const int64_t step = int64_t(num(e, "step"));
        if (step % every != 0 && step != last) continue;
        t.row({v + " s" + std::to_string(r->seed), std::to_string(step), fixed(num(e, "tokens") / 1e6, 1),
               fixed(num(e, "val_loss"), 3), fixed(num(e, "alpha_max"), 2),
               "L" + std::to_string(int64_t(num(e, "alpha_max_layer")) + 1) + " h" +
                   std::to_string(int64_t(num(e, "alpha_max_head"))),
               fixed(num(e, "region_max"), 2), fixed(num(e, "sink03"), 2), fixed(num(e, "attn0_mean"), 3), added(e), fixed(num(e, "vratio_sink"), 2),
               fixed(num(e, "massive"), 0), fixed(num(e, "avg_kurtosis"), 1), fixed(num(e, "gv_ratio"), 2),
               fixed(num(e, "res0") / num(e, "res_early"), 2), fixed(num(e, "ffn0") / num(e, "ffn_early"), 2)});
      }
    }
  }
  return "# The sink atlas over training\n\nEvery run at step 0 and every fifth of its steps, on the first validation "
         "batch (the fine-tuning variants count their steps from the baseline's end). ‖x₀‖ / 1–15 and MLP ‖out₀‖ / "
         "1–15: token 0's residual and MLP-output norms over those of tokens 1–15, means over layers; (layer, head) "
         "of the strongest α₀, layers from 1; α sink region: the strongest head's α on BOS plus what the variant "
         "adds (= α₀ max where it adds nothing); attn → added: the attention a query gives to the prepended tokens or "
         "the sink logit.\n\n" +
         t.markdown();
}

// The claims of the language-model studies that read "untestable here" while their baselines
// formed no sink (docs/results/gradient-sinks.md, vga-lm.md, outlier-rescaling.md,
// exoformer.md), judged on the atlas' runs, which share the setting in which the baseline forms
// one. A claim about a difference needs it in every seed with |mean| ≥ sd
// (PairedDifference::clear); the opposite sign so is "not reproduced", anything else
// "inconclusive"; without a sink in every baseline seed, a claim about the sink is untestable.
std::string claims(const Summary& S) {
  using experiment::Claim;
  using experiment::Verdict;
  if (!S.has("baseline")) return "";
  const auto [b_yes, b_n] = count_runs(S, "baseline", [&](const experiment::RunResult& r) { return forms_sink(r, S.s); });
  const bool sink = b_n > 0 && b_yes == b_n;
  std::vector<Claim> cl;
  // "v − ref of metric has sign `dir` (−1: lower)" from the paired differences.
  auto sign_verdict = [](const experiment::PairedDifference& p, int dir) {
    return p.sign() == dir ? Verdict::Reproduced : p.sign() == -dir ? Verdict::Not : Verdict::Inconclusive;
  };
  auto direction = [&](const std::string& v, const std::string& ref, const std::string& metric, int dir) {
    return sign_verdict(experiment::paired_difference(S.paired(v, ref, metric)), dir);
  };
  auto pd = [&](const std::string& v, const std::string& ref, const std::string& metric, int prec) {
    return experiment::paired_difference(S.paired(v, ref, metric)).str(prec);
  };
  // Several parts of one claim: all reproduced → reproduced; some → partly; else any not → not;
  // else inconclusive.
  auto combine = [](const std::vector<Verdict>& vs) {
    const auto has = [&](Verdict x) { return std::find(vs.begin(), vs.end(), x) != vs.end(); };
    if (!vs.empty() && std::all_of(vs.begin(), vs.end(), [](Verdict x) { return x == Verdict::Reproduced; }))
      return Verdict::Reproduced;
    if (has(Verdict::Reproduced) || has(Verdict::Partly)) return Verdict::Partly;
    return has(Verdict::Not) ? Verdict::Not : Verdict::Inconclusive;
  };
  auto both = [&](Verdict a, Verdict b) { return combine({a, b}); };
  auto gated = [&](Verdict v) { return sink ? v : Verdict::Untestable; };
  const std::string paired_rule = "paired rule";
  cl.push_back({"the baseline forms an attention sink (the precondition of the rest)", "Sink^0.3 near 1 in trained LLMs (Gu et al.)",
                "α₀ max " + S.spread("baseline", "alpha_max").short_str(2) + ", Sink^0.3 " +
                    S.spread("baseline", "sink03").short_str(2) + "; a sink in " + std::to_string(b_yes) + "/" +
                    std::to_string(b_n) + " seeds",
                sink ? Verdict::Reproduced : b_yes > 0 ? Verdict::Partly : Verdict::Not,
                "a head with α₀ ≥ " + fixed(S.s.alpha_sink, 1) + " or Sink^0.3 ≥ 0.1 in every seed"});
  // Gradient sinks (Fig. 2, Fig. 5). Without a sink-free control the spike can be "partly" at best.
  {
    // A causal mask alone already favours token 0 (the ratio is about 2.5 at initialisation), so
    // the spike is judged against each run's own value at its first evaluation.
    std::vector<double> grown, at_init;
    for (const auto* x : S.m.of("baseline"))
      if (!x->diverged && !x->history.empty() && x->history.front().contains("gv_ratio")) {
        at_init.push_back(experiment::number(x->history.front()["gv_ratio"]));
        grown.push_back(x->metric("gv_ratio") / at_init.back());
      }
    const bool spike = !grown.empty() && std::all_of(grown.begin(), grown.end(), [](double g) { return g >= 2; });
    std::vector<Verdict> parts = {spike ? Verdict::Reproduced : Verdict::Not};
    std::string ours = "‖∇v‖ token 0 / 1–15: baseline " + S.spread("baseline", "gv_ratio").short_str(2) + " (at init " +
                       experiment::summarize(at_init).short_str(2) + ")";
    // Both controls are part of the claim: one not run leaves it open.
    std::string missing;
    for (const std::string c : {"g1", "sink_logit"})
      if (S.has(c)) {
        ours += "; − " + c + " " + pd("baseline", c, "gv_ratio", 2);
        parts.push_back(direction("baseline", c, "gv_ratio", +1));
      } else {
        missing += (missing.empty() ? "" : ", ") + c;
      }
    if (!missing.empty()) {
      ours += "; sink-free control not run yet: " + missing;
      parts.push_back(Verdict::Inconclusive);
    }
    const Verdict v = combine(parts);
    cl.push_back({"gradient sinks: ∇v concentrates on the sink token, beyond the sink-free controls", "Fig. 2: a spike of ‖∇v_t‖ at the sink",
                  ours, gated(v), "ratio at least twice its value at init in every seed, and above G1's and the sink logit's (" + paired_rule + ")"});
  }
  if (S.has("vscale")) {
    const double keep = S.mean_ratio("vscale", "baseline", "sink03");
    // The ratio of means judges; the paired difference and the per-seed count show whether the
    // seeds agree on it.
    const auto rate = experiment::paired_difference(S.paired("vscale", "baseline", "sink03"));
    const auto [sinks, runs] = count_runs(S, "vscale", [&](const experiment::RunResult& r) { return forms_sink(r, S.s); });
    cl.push_back({"V-scale keeps the sink", "Fig. 5: sink rate about unchanged",
                  "Sink^0.3 " + S.spread_on_shared("vscale", "baseline", "sink03").short_str(2) + " vs " +
                      S.spread_on_shared("baseline", "vscale", "sink03").short_str(2) +
                      " (" + fixed(100 * keep, 0) + "%; paired Δ " + rate.str(2) + "); a sink in " +
                      std::to_string(sinks) + "/" + std::to_string(runs) + " seeds",
                  gated(experiment::verdict_at_least(keep, 0.8, 0.5)), "≥ 80% of the baseline's rate: reproduced; ≥ 50%: partly"});
    // Token 0 against tokens 1–15 (the paper's Fig. 5 compares exactly that): lower norms
    // everywhere would not be what V-scale is said to do.
    const auto mlp = experiment::paired_difference(S.paired_ratio("vscale", "baseline", "ffn0", "ffn_early"));
    const auto res = experiment::paired_difference(S.paired_ratio("vscale", "baseline", "res0", "res_early"));
    const auto loss = experiment::paired_difference(S.paired("vscale", "baseline", "val_loss"));
    cl.push_back({"V-scale trains as well as the baseline", "§5.2: slightly lower validation loss",
                  "Δ val loss " + loss.str(3),
                  loss.sign() == -1 ? Verdict::Reproduced : loss.diff.mean <= 0.01 ? Verdict::Partly : Verdict::Not,
                  "lower (" + paired_rule + "): reproduced; within +0.01 nats in the mean: partly"});
    cl.push_back({"V-scale lowers token 0's MLP output and residual norms (against tokens 1–15)", "Fig. 5: both lower, the MLP most",
                  "Δ MLP ‖out₀‖ / 1–15 " + mlp.str(2) + "; Δ residual ‖x₀‖ / 1–15 " + res.str(2),
                  gated(both(sign_verdict(mlp, -1), sign_verdict(res, -1))), "both ratios lower (" + paired_rule + "); one: partly"});
  }
  // VGA (Table 1–2, OPT-125m).
  if (S.has("vga")) {
    cl.push_back({"VGA lowers Max inf-norm and Avg kurtosis", "OPT: 1.01 → 0.45 and 2177 → 34.77",
                  "Δ Max inf-norm " + pd("vga", "baseline", "max_inf_norm", 2) + "; Δ kurtosis " + pd("vga", "baseline", "avg_kurtosis", 1),
                  gated(both(direction("vga", "baseline", "max_inf_norm", -1), direction("vga", "baseline", "avg_kurtosis", -1))),
                  "both lower (" + paired_rule + "); one: partly"});
    cl.push_back({"VGA lowers the W8A8 error", "OPT: Δppl 27.83 → 0.93", "Δ(W8A8 Δ loss) " + pd("vga", "baseline", "ptq_w8a8_dloss", 3),
                  gated(direction("vga", "baseline", "ptq_w8a8_dloss", -1)), paired_rule});
  }
  // VGA App. C: both start from the baseline's final weights of the seed and see the same batches;
  // only the gate differs.
  if (S.has("retrofit_vga") && S.has("finetune")) {
    cl.push_back({"retrofitting VGA lowers Max inf-norm and Avg kurtosis against plain fine-tuning",
                  "GPT-2: 398.67 → 24.05 and 9863.87 → 32.47 (fine-tuned without → with VGA)",
                  "retrofit − fine-tuned: Δ Max inf-norm " + pd("retrofit_vga", "finetune", "max_inf_norm", 2) +
                      "; Δ kurtosis " + pd("retrofit_vga", "finetune", "avg_kurtosis", 1),
                  gated(both(direction("retrofit_vga", "finetune", "max_inf_norm", -1),
                             direction("retrofit_vga", "finetune", "avg_kurtosis", -1))),
                  "both lower (" + paired_rule + "); one: partly"});
    cl.push_back({"the retrofit's loss is below plain fine-tuning's", "GPT-2: ppl 16.94 vs 17.01",
                  "retrofit − fine-tuned: Δ val loss " + pd("retrofit_vga", "finetune", "val_loss", 3),
                  gated(direction("retrofit_vga", "finetune", "val_loss", -1)), paired_rule});
  }
  if (S.has("finetune"))
    cl.push_back({"plain fine-tuning does not lower Max inf-norm (in the paper it rises)", "GPT-2: 256.84 → 398.67",
                  "fine-tuned − baseline: Δ Max inf-norm " + pd("finetune", "baseline", "max_inf_norm", 2),
                  gated(direction("finetune", "baseline", "max_inf_norm", +1)),
                  "higher: " + paired_rule + " (inside the spread: inconclusive)"});
  if (S.has("registers"))
    cl.push_back({"register tokens do not tame the kurtosis", "OPT: 2177 → 8322.68", "Δ kurtosis " + pd("registers", "baseline", "avg_kurtosis", 1),
                  gated(direction("registers", "baseline", "avg_kurtosis", +1)), "higher: " + paired_rule});
  if (S.has("sink_logit"))
    cl.push_back({"a learnable sink lowers the kurtosis", "OPT: 2177 → 22.23", "Δ kurtosis " + pd("sink_logit", "baseline", "avg_kurtosis", 1),
                  gated(direction("sink_logit", "baseline", "avg_kurtosis", -1)), paired_rule});
  // Outlier-driven rescaling (max activation, W4A4).
  if (S.has("g1"))
    cl.push_back({"G1 lowers the largest activation", "6000 → 2800", "Δ max |x| " + pd("g1", "baseline", "max_act", 1),
                  gated(direction("g1", "baseline", "max_act", -1)), paired_rule});
  if (S.has("g1") && S.has("gatednorm_g1"))
    cl.push_back({"GatedNorm lowers it further than G1", "2800 → 430", "Δ max |x| vs G1 " + pd("gatednorm_g1", "g1", "max_act", 1),
                  gated(direction("gatednorm_g1", "g1", "max_act", -1)), paired_rule});
  if (S.has("g1") && S.has("gatednorm_g1"))
    cl.push_back({"W4A4 (FP4) loses less with GatedNorm than with G1", "−1.23 pts GatedNorm vs −1.50 G1 (accuracy)",
                  "Δ(FP4 Δ loss) vs G1 " + pd("gatednorm_g1", "g1", "ptq_w4a4_fp4_dloss", 3),
                  gated(direction("gatednorm_g1", "g1", "ptq_w4a4_fp4_dloss", -1)), paired_rule});
  // ExoFormer (Table 2): gating and mixing collapse the sink; representation collapse.
  const std::vector<std::pair<std::string, std::string>> exo = {
      {"g1", "0.0091"}, {"resformer", "0.0212"}, {"nuresformer", "0.0112"}, {"exoformer", "0.0041"}, {"exoformer_dyn", "0.0073"}};
  for (const auto& [v, paper] : exo) {
    if (!S.has(v)) continue;
    const double ratio = S.mean_ratio(v, "baseline", "attn0_mean");
    const Verdict d = direction(v, "baseline", "attn0_mean", -1);
    cl.push_back({"sink: " + v + " ≪ baseline", paper + " vs 0.2572 (mean attention to key 0)",
                  S.spread_on_shared(v, "baseline", "attn0_mean").short_str(3) + " vs " +
                      S.spread_on_shared("baseline", v, "attn0_mean").short_str(3) + " (" +
                      fixed(100 * ratio, 0) + "%)",
                  gated(d == Verdict::Reproduced && ratio < 0.25 ? Verdict::Reproduced : d == Verdict::Reproduced ? Verdict::Partly : d),
                  "lower by the paired rule and under a quarter of the baseline's: reproduced; lower only: partly"});
  }
  for (const std::string v : {"exoformer", "exoformer_dyn"})
    if (S.has(v))
      cl.push_back({v + ": representation collapse (token similarity up, PCA core features down)",
                    "sim 0.83–0.86 vs 0.54; PCA 752–818 vs 839 (of d = 1024)",
                    "Δ token cosine " + pd(v, "baseline", "token_cos", 3) + "; Δ PCA " + pd(v, "baseline", "pca", 1),
                    both(direction(v, "baseline", "token_cos", +1), direction(v, "baseline", "pca", -1)),
                    "both (" + paired_rule + "); one: partly"});
  return "### The studies' claims that needed a sink\n\nThe paired rule: the variant's difference from its reference "
         "of the same seed has the claimed sign in every seed and |mean| ≥ sd (two seeds at least): reproduced; the "
         "opposite sign so: not reproduced; anything else: inconclusive. A claim about the sink is untestable unless "
         "the baseline forms one in every seed.\n\n" +
         experiment::claims_table(cl) + "\n" + retrofit_check(S);
}

void figures(const Summary& S, const fs::path& out) {
  experiment::Figures fig(out);
  std::vector<std::string> vs;
  for (const auto& v : S.m.variants())
    if (S.has(v)) vs.push_back(v);
  if (vs.empty()) return;
  // The atlas as a heat map: each column normalised over the variants (min 0, max 1; a column
  // without spread all 0), grey where a diagnostic does not apply. Its first column is the sink
  // region's α, as in the table: α₀ alone would read a sink moved into a sink logit as none.
  {
    std::vector<Column> cols = {{"region_max", "α sink region", 2}};
    for (const auto& c : sink_columns()) cols.push_back(c);
    for (const auto& c : cost_columns())
      if (c.key != "val_ppl" && c.key != "parameters") cols.push_back(c);
    std::vector<double> m(vs.size() * cols.size(), -0.1);
    for (std::size_t j = 0; j < cols.size(); ++j) {
      double lo = INFINITY, hi = -INFINITY;
      for (const auto& v : vs) {
        const double x = S.mean(v, cols[j].key);
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
      }
      for (std::size_t i = 0; i < vs.size(); ++i) {
        const double x = S.mean(vs[i], cols[j].key);
        if (std::isfinite(x)) m[i * cols.size() + j] = hi > lo ? (x - lo) / (hi - lo) : 0.0;
      }
    }
    experiment::write_matrix(out / "atlas_heatmap.dat", m.data(), int64_t(vs.size()), int64_t(cols.size()));
    std::string xt, yt;
    for (std::size_t j = 0; j < cols.size(); ++j) xt += (j ? ", " : "") + experiment::gp_quote(cols[j].title) + " " + std::to_string(j);
    for (std::size_t i = 0; i < vs.size(); ++i) yt += (i ? ", " : "") + experiment::gp_quote(vs[i]) + " " + std::to_string(i);
    fig.script("set terminal " + fig.terminal() + " size 1300," + std::to_string(200 + 28 * vs.size()) +
                   "\nset output 'atlas_heatmap.png'\nset title 'the atlas, each column scaled to its range over the "
                   "variants (0: lowest, 1: highest; white throughout: no spread; grey: does not apply)'\nset datafile separator whitespace\n"
                   "unset key\nunset grid\nset palette defined (-0.1 'gray80', -0.0001 'gray80', 0 'white', 0.5 '#6baed6', "
                   "1 '#08306b')\nset cbrange [-0.1:1]\nset xrange [-0.5:" + std::to_string(cols.size()) + "-0.5]\n"
                   "set yrange [" + std::to_string(vs.size()) + "-0.5:-0.5]\nset xtics (" + xt + ") rotate by 40 right font ',9'\n"
                   "set ytics (" + yt + ") font ',9'\nplot 'atlas_heatmap.dat' matrix with image\n"
                   "set xtics autofreq norotate\nset ytics autofreq\nset xrange [*:*]\nset yrange [*:*]\n"
                   "set datafile separator ','\nset grid\nset key default\nunset title\n",
               "atlas_heatmap.png");
  }
  // Per-layer sink maps: α₀ per layer (rows) and head (columns), mean over seeds, one scale.
  {
    std::vector<experiment::Figures::Series> maps;
    for (const auto& v : vs) {
      std::vector<double> a(static_cast<std::size_t>(S.s.layers * S.s.heads), NAN);
      for (int64_t l = 0; l < S.s.layers; ++l)
        for (int64_t h = 0; h < S.s.heads; ++h) {
          const double region = S.mean(v, examples::head_metric(l, h, "region"));  // logged where a variant adds tokens
          a[std::size_t(l * S.s.heads + h)] = std::isfinite(region) ? region : S.mean(v, examples::head_metric(l, h, "alpha"));
        }
      experiment::write_matrix(out / ("sinkmap_" + v + ".dat"), a.data(), S.s.layers, S.s.heads);
      maps.push_back({v, "sinkmap_" + v + ".dat"});
    }
    for (std::size_t first = 0, part = 1; first < maps.size(); first += 5, ++part) {
      const std::vector<experiment::Figures::Series> chunk(maps.begin() + long(first),
                                                          maps.begin() + long(std::min(maps.size(), first + 5)));
      fig.heatmaps("sink_maps_" + std::to_string(part) + ".png",
                   "alpha per layer and head (first 64 queries to key 0, or to the sink region where a variant adds tokens or a sink logit; mean over seeds; one scale 0..1)", chunk,
                   {.x = "head", .y = "layer", .labels = {}, .x_first = 0, .y_first = 1, .tick = 1, .square = false}, 1.0);
    }
  }
  // Over training, ten lines a figure (the palette's ten colours), the baseline in each.
  {
    std::vector<experiment::Figures::Series> ss;
    for (const auto& v : vs) {
      if (sink_atlas::continues_baseline(v)) continue;  // their steps count from the baseline's end
      const std::string file = "dynamics_" + v + ".csv";
      experiment::write_dynamics(out / file, S.m.of(v),
                                 {"val_loss", "alpha_max", "sink03", "massive", "avg_kurtosis", "gv_ratio"});
      if (v != "baseline") ss.push_back({v, file});
    }
    const int64_t after_warmup = std::llround(S.s.warmup * double(experiment::last_step(S.m.of(vs.front())))) + 1;
    std::vector<std::vector<experiment::Figures::Series>> groups(std::max<std::size_t>(1, (ss.size() + 8) / 9));
    for (std::size_t i = 0; i < ss.size(); ++i) groups[i / 9].push_back(ss[i]);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::vector<experiment::Figures::Series> chunk;
      if (S.has("baseline")) chunk.push_back({"baseline", "dynamics_baseline.csv"});
      chunk.insert(chunk.end(), groups[g].begin(), groups[g].end());
      if (chunk.empty()) continue;
      fig.dynamics("dynamics_" + std::to_string(g + 1) + ".png", "over training (band: min..max over seeds)",
                   {{"alpha_max", "alpha_0 max"}, {"sink03", "Sink^0.3"}, {"massive", "top-1 / median", true},
                    {"avg_kurtosis", "Avg kurtosis"}, {"gv_ratio", "||grad v|| token 0 / 1-15"},
                    {"val_loss", "validation loss", false, after_warmup}},
                   chunk, 3);
    }
  }
  fig.render();
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  experiment::CommonFlags flags{.out = "out/sink_atlas", .steps = 5000};
  CLI::App app{"The sink atlas: every mitigation of the five papers on one sink-forming Llama-like decoder, every "
               "diagnostic in one table (docs/results/sink-atlas.md).",
               "sink_atlas"};
  experiment::add_common_flags(app, flags);
  std::vector<std::string> variants;
  app.add_option("--variants", variants, "comma-separated variants (default: all 22; see the summary's table; finetune and retrofit_vga "
                 "continue the baseline of their seed, so list baseline before them)")
      ->delimiter(',');
  examples::add_lm_flags(app, s);
  examples::add_optimiser_flags(app, s);
  app.get_option("--weight-decay")
      ->description("AdamW's decoupled weight decay, on every parameter (as in the runs that formed the sink)");
  app.add_option("--dyt-lr", s.dyt_lr, "DyT's peak learning rate (its best in outlier_rescaling's sweep)")
      ->check(CLI::Range(1e-7, 1.0))->capture_default_str();
  app.add_option("--registers", s.registers, "register tokens of the 'registers' variant (prepended)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))->capture_default_str();
  app.add_option("--retrofit-fraction", s.retrofit_fraction,
                 "finetune and retrofit_vga train the baseline's final weights this fraction of --steps more")
      ->check(CLI::Range(1e-4, 1.0))->capture_default_str();
  app.add_option("--calib-batches", s.calib_batches, "PTQ calibration batches (from the training text)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))->capture_default_str();
  if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
  examples::sink_preset(app, flags, s);  // the defaults already are the preset; it is accepted for uniformity
  if (flags.quick) {
    experiment::preset(app, "--steps", flags.steps, 300);
    experiment::preset(app, "--d-model", s.d_model, 64);
    experiment::preset(app, "--seq-len", s.seq_len, 128);
    experiment::preset(app, "--eval-every", s.eval_every, 100);
    if (app.count("--seeds") == 0) flags.seeds = {0};
    if (variants.empty()) variants = {"baseline", "sink_logit", "g1", "vga", "vscale", "sigmoid"};
  }
  if (s.smoke) {
    examples::smoke_preset(app, flags, s);
    experiment::preset(app, "--registers", s.registers, 2);
  }

  try {
    SINKLAB_CHECK(s.d_model % s.heads == 0, "sink_atlas: --heads ", s.heads, " does not divide --d-model ", s.d_model);
    if (variants.empty()) variants = sink_atlas::variant_names();
    for (std::size_t i = 0; i < variants.size(); ++i) {  // names the bad one before anything runs
      sink_atlas::info(variants[i]);
      SINKLAB_CHECK(std::find(variants.begin(), variants.begin() + long(i), variants[i]) == variants.begin() + long(i),
                    "sink_atlas: --variants: '", variants[i], "' is listed twice");
    }
    if (flags.threads > 0) set_num_threads(flags.threads);

    const examples::Sentences text = examples::load_corpus("sink_atlas", s.corpus, s.text_file, s.brown_dir, s.smoke);
    const data::WordLmCorpus corpus = data::make_word_lm(text.lines, {.vocab = s.vocab, .specials = 1});
    std::printf("text: %s; %zu training and %zu validation words, vocabulary %lld\n", text.source.c_str(),
                corpus.train.size(), corpus.validation.size(), static_cast<long long>(corpus.vocab));
    sink_atlas::EvalData ev;
    ev.validation = data::consecutive_lm_windows(corpus.validation, s.seq_len, s.eval_batch, s.val_batches, sink_atlas::kBos);
    ev.probe = ev.validation.front();
    Rng calib(s.eval_seed, 2);
    for (int64_t i = 0; i < s.calib_batches; ++i)
      ev.calibration.push_back(data::sample_lm_windows(corpus.train, calib, s.eval_batch, s.seq_len, sink_atlas::kBos));

    auto c = examples::lm_context<sink_atlas::Context>(s, corpus.train, ev, corpus.vocab, flags.steps);
    const double tokens = double(flags.steps) * double(s.batch * s.seq_len);
    std::printf("model: %lld layers, d = %lld, %lld heads, pre-norm RMSNorm, RoPE, SwiGLU; T = %lld, batch %lld; AdamW "
                "%g (wd %g), %s; %lld steps (%.1f M tokens, %.1f epochs) per run, %zu variant(s) x %zu seed(s)\n",
                static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.heads),
                static_cast<long long>(s.seq_len), static_cast<long long>(s.batch), s.lr, s.weight_decay,
                s.min_lr_ratio < 1 ? ("cosine to " + fixed(s.min_lr_ratio, 2) + " of the peak").c_str() : "constant after warm-up",
                static_cast<long long>(flags.steps), tokens / 1e6, tokens / double(corpus.train.size()), variants.size(),
                flags.seeds.size());

    Matrix m("sink_atlas", flags, variants, settings_json(s, text.source, corpus.vocab), argc, argv);
    c.matrix = &m;
    // A variant that continues the baseline needs the baseline's final weights of each seed: in
    // --out already, or from the baseline listed before it (--summarize trains nothing).
    const auto listed = [&](const std::string& v) { return std::find(variants.begin(), variants.end(), v); };
    for (const auto& v : variants) {
      if (!sink_atlas::continues_baseline(v)) continue;
      m.set_steps(v, sink_atlas::retrofit_steps(s, flags.steps));
      const bool after_baseline = listed("baseline") < listed(v) || flags.summarize;
      for (const auto seed : flags.seeds)
        SINKLAB_CHECK(after_baseline || fs::exists(m.run_dir(v, seed) / "result.json") ||
                          fs::exists(m.run_dir("baseline", seed) / "final.safetensors"),
                      "sink_atlas: --variants: ", v, " continues the baseline run of seed ", seed, ", but '",
                      (m.run_dir("baseline", seed) / "final.safetensors").string(),
                      "' does not exist and baseline is not listed before it");
    }
    const bool complete = m.run([&](experiment::Run& r) { sink_atlas::run(r, c); });
    const Summary S{m, s};
    std::string md = "# The sink atlas at " + std::to_string(s.layers) + " layers, d = " + std::to_string(s.d_model) +
                     "\n\n" + text.source + "; " + std::to_string(flags.steps) + " steps of " +
                     std::to_string(s.batch * s.seq_len) + " tokens per run (" + fixed(tokens / 1e6, 1) +
                     " M tokens), seeds";
    std::set<uint64_t> seeds;  // of the runs read (--summarize may find fewer than listed; the variants table says which)
    for (const auto& r : m.results()) seeds.insert(r.seed);
    for (auto seed : seeds) md += " " + std::to_string(seed);
    md += ". Every measure on the first validation batch at the end of training (one forward and backward pass).\n\n";
    md += tables(S) + findings(S) + claims(S);
    io::write_file_atomically(m.out() / "summary.md", md);
    io::write_file_atomically(m.out() / "dynamics.md", over_training(S));
    std::printf("\n%s\nsummary: %s\n", md.c_str(), (m.out() / "summary.md").string().c_str());
    if (s.plots) figures(S, m.out());
    if (!complete) return 130;
  } catch (const std::exception& e) {
    examples::print_error("sink_atlas", e);
    return 1;
  }
  return 0;
}
