// ExoFormer (docs/papers.md): mixing learned anchors into every layer's queries, keys, values and
// gate logits. Pre-norm decoders with QK-norm, RoPE, SwiGLU and zero-initialised output
// projections and head, trained with Muon (matrices) + AdamW (the rest) on the Brown corpus: the
// base Transformer, Gated Attention, ResFormer (fixed and learnable value residual, and with the
// gate), NuResFormer (layer 1's projections as anchors) and ExoFormer (a separate projection of
// the embeddings) at scalar / per-head / per-element granularity, static and dynamic; plus an
// ablation that mixes one stream at a time. One paired run per variant and seed.
//
//   exoformer                      # the full study (docs/results/exoformer.md)
//   exoformer --quick              # a few minutes: d 64, 4 layers, 500 steps, seed 0, no ablation
//   exoformer --variants base,exoformer_only_v --seeds 0,1,2 --out out/exo-v
//   exoformer --smoke              # seconds, built-in sentences (the CTest smoke test)
//
// Variants: base, gated, resformer, resformer_learn, resformer_gated, resformer_gated_learn,
// and <nuresformer|exoformer>[_s|_h|_e][_dyn][_only_<streams>]: granularity scalar / per head /
// per element (default), dynamic mixing (element-wise only), and which of q, k, v, g are mixed
// ("exoformer_only_kv"; default all four); then any of _raw (the anchors mixed without their
// RMSNorm), _l<N> (N layers: the paper's parameter-matched depth) and _steps<N> (an N-step
// schedule: tokens to the base model's loss): "nuresformer_only_vg_raw", "gated_l5".
//
// Per evaluation (fit.hpp): validation loss and perplexity; per layer the attention to key 0,
// the token similarity, the cosine to the input embedding and the PCA core features. At the end
// the learned mixing coefficients per layer and stream. Output (--out): runs/<variant>/seed<k>/,
// summary.md with the tables and the claims, and the figures (plots.gp, PNGs with gnuplot).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "../common/sentences.hpp"
#include "../common/error_line.hpp"
#include "../common/seed_rule.hpp"
#include "../common/lm_flags.hpp"
#include "../common/optim_flags.hpp"
#include "../common/study_summary.hpp"
#include "../common/sink_preset.hpp"
#include "../common/smoke_preset.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/io/files.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "study.hpp"

using namespace sinklab;
namespace fs = std::filesystem;
using experiment::Json;
using experiment::fixed;
using experiment::Spread;
using exoformer::Settings;

namespace exoformer {

Variant parse_variant(const std::string& name) {
  static const std::regex modifiers(R"(^(.+?)(_raw)?(?:_l(\d+))?(?:_steps(\d+))?$)");
  static const std::regex plain(R"(^(base|gated|resformer(_gated)?(_learn)?)$)");
  static const std::regex anchor(R"(^(nuresformer|exoformer)(?:_([seh]))?(_dyn)?(?:_only_([qkvg]+))?$)");
  static const std::string known =
      "known: base, gated, resformer, resformer_learn, resformer_gated, resformer_gated_learn, "
      "<nuresformer|exoformer>[_s|_h|_e][_dyn][_only_<q,k,v,g>], each followed by any of [_raw][_l<layers>]"
      "[_steps<steps>] (e.g. exoformer_h, exoformer_dyn, exoformer_only_v, nuresformer_only_vg_raw, gated_l5, "
      "exoformer_dyn_steps543)";
  Variant v;
  v.name = name;
  std::smatch mod;
  SINKLAB_CHECK(std::regex_match(name, mod, modifiers), "exoformer: --variants: '", name, "' is not a variant; ", known);
  const std::string core = mod[1].str();
  v.core = core;
  v.raw_anchors = mod[2].matched;
  auto count = [&](int group, const char* what, int64_t least) {
    if (!mod[group].matched) return int64_t{0};
    const std::string digits = mod[group].str();
    SINKLAB_CHECK(digits.size() <= 6 && std::stoll(digits) >= least, "exoformer: --variants: '", name, "': ", what,
                  " must be at least ", least, " (and at most 999999), not ", digits);
    return static_cast<int64_t>(std::stoll(digits));
  };
  v.layers = count(3, "the layer count after _l", 2);  // layer 1 is NuResFormer's anchor: mixing needs a second
  v.steps = count(4, "the step count after _steps", 1);
  std::smatch m;
  if (std::regex_match(core, m, plain)) {
    SINKLAB_CHECK(!v.raw_anchors, "exoformer: --variants: '", name,
                  "': _raw leaves the anchors un-normalised, and only nuresformer and exoformer have anchors");
    v.family = m[1].str().rfind("resformer", 0) == 0 ? "resformer" : m[1].str();
    v.gate = v.family == "gated" || m[2].matched;
    v.learnable = m[3].matched;
    return v;
  }
  SINKLAB_CHECK(std::regex_match(core, m, anchor), "exoformer: --variants: '", name, "' is not a variant; ", known);
  v.family = m[1].str();
  v.gate = true;
  if (m[2].matched) v.granularity = m[2].str()[0];
  v.dynamic = m[3].matched;
  SINKLAB_CHECK(!v.dynamic || v.granularity == 'e', "exoformer: --variants: '", name,
                "': dynamic mixing is built with element-wise coefficients only (the paper's dynamic model)");
  if (m[4].matched) {
    const std::string s = m[4].str();
    const char* names = "qkvg";
    for (int c = 0; c < 4; ++c) v.streams[c] = s.find(names[c]) != std::string::npos;
  }
  return v;
}

void run(experiment::Run& r, const Context& c) {
  const Variant v = parse_variant(r.variant());
  if (!detail::run_plain(r, c, v) && !detail::run_nures(r, c, v) && !detail::run_exo(r, c, v))
    throw Error("exoformer: no model for the variant '" + v.name + "'");
}

}  // namespace exoformer

namespace {

using namespace exoformer;

const std::vector<std::string> kMain = {"base",       "gated",       "resformer", "resformer_learn", "nuresformer",
                                        "exoformer_s", "exoformer_h", "exoformer", "exoformer_dyn"};
const std::vector<std::string> kAblation = {"exoformer_only_q", "exoformer_only_k", "exoformer_only_v",
                                            "exoformer_only_g"};
// The paper's 450M / 10B-token figures (Tables 1–3): perplexity, attention sink, token
// similarity, PCA core features (of d = 1024).
struct PaperRow {
  double ppl, sink, sim, pca;
};
const std::map<std::string, PaperRow> kPaper = {
    {"base", {14.79, 0.2572, 0.5365, 838.9}},        {"gated", {14.64, 0.0091, 0.6328, 880.0}},
    {"resformer", {14.32, 0.0212, 0.6558, 853.8}},   {"resformer_gated", {14.25, NAN, NAN, NAN}},
    {"nuresformer", {14.15, 0.0112, 0.5783, 887.9}}, {"nuresformer_h", {14.17, NAN, NAN, NAN}},
    {"nuresformer_only_vg_raw", {14.24, NAN, NAN, NAN}},  // Table 3: V and G mixed, anchors not normalised
    {"nuresformer_s", {14.17, NAN, NAN, NAN}},       {"exoformer", {14.13, 0.0041, 0.8265, 818.3}},
    {"exoformer_h", {14.14, NAN, NAN, NAN}},         {"exoformer_s", {14.15, NAN, NAN, NAN}},
    {"exoformer_dyn", {14.09, 0.0073, 0.8622, 752.1}}};

Json settings_json(const Settings& s, const std::string& source, int64_t vocab) {
  return Json{{"d_model", s.d_model},     {"layers", s.layers},       {"heads", s.heads},
              {"seq_len", s.seq_len},     {"batch", s.batch},         {"vocab", vocab},
              {"muon_lr", s.muon_lr},     {"adamw_lr", s.adamw_lr},   {"muon_wd", s.muon_wd},
              {"beta2", s.beta2},         {"warmup", s.warmup},       {"decay", s.decay},
              {"min_lr_ratio", s.min_lr_ratio}, {"clip", s.clip},     {"z_loss", s.z_loss},
              {"rope_theta", s.rope_theta}, {"diverge_margin", s.diverge_margin},
              {"pca_threshold", s.pca_threshold}, {"eval_every", s.eval_every}, {"eval_batch", s.eval_batch},
              {"val_batches", s.val_batches}, {"eval_seed", s.eval_seed}, {"init", s.init}, {"text", source}};
}


// ---- summary ---------------------------------------------------------------------------------

struct Summary : examples::StudySummary<Settings> {
  int64_t steps = 0;

  // The first step at which v's validation loss reaches `target` (linear between evaluations;
  // NaN when it never does), averaged over v's seeds that reach it.
  double steps_to(const std::string& v, double target) const {
    std::vector<double> at;
    for (const auto* r : m.of(v)) {
      double prev_step = 0, prev = NAN;
      for (const Json& h : r->history) {
        if (!h.contains("val_loss") || !h.contains("step")) continue;
        const double st = h["step"].get<double>(), x = h["val_loss"].get<double>();
        if (x <= target) {
          at.push_back(std::isfinite(prev) && prev > x ? prev_step + (st - prev_step) * (prev - target) / (prev - x) : st);
          break;
        }
        prev_step = st, prev = x;
      }
    }
    return at.size() == m.of(v).size() && !at.empty() ? experiment::summarize(at).mean : NAN;
  }
};

std::string tables(const Summary& S) {
  const auto& vs = S.m.variants();
  std::string md;
  experiment::Table t({"variant", "params", "diverged", "val loss", "ppl", "Δ loss vs base (paired)", "Δ loss vs gated (paired)",
                       "attn sink", "token sim", "cos to embedding", "PCA core", "paper: ppl / sink / sim / PCA"});
  for (const auto& v : vs) {
    const auto it = kPaper.find(v);
    const std::string paper = it == kPaper.end() ? "—"
                                                 : fixed(it->second.ppl, 2) + " / " + fixed(it->second.sink, 4) + " / " +
                                                       fixed(it->second.sim, 3) + " / " + fixed(it->second.pca, 1);
    t.row({v, fixed(S.mean(v, "parameters"), 0),
           std::to_string(S.m.diverged(v)) + "/" + std::to_string(S.m.of(v).size()), S.spread(v, "val_loss").short_str(),
           S.spread(v, "val_ppl").short_str(2),
           v == "base" ? "—" : experiment::summarize(S.paired(v, "base", "val_loss")).short_str(),
           v == "gated" ? "—" : experiment::summarize(S.paired(v, "gated", "val_loss")).short_str(),
           S.spread(v, "sink").short_str(), S.spread(v, "token_sim").short_str(), S.spread(v, "emb_cos").short_str(),
           S.spread(v, "pca").short_str(1), paper});
  }
  md += "### Final values (mean ± sd over seeds; averages over layers)\n\n" + t.markdown() + "\n";

  for (const auto& [key, title, prec] : std::vector<std::tuple<std::string, std::string, int>>{
           {"sink", "Attention to key 0 by layer", 3},
           {"token_sim", "Token similarity by layer", 3},
           {"emb_cos", "Cosine to the input embedding by layer", 3},
           {"pca", "PCA core features by layer", 1}}) {
    md += "### " + title + " (mean over seeds)\n\n" + S.m.layer_table(key, S.s.layers, vs, prec) + "\n";
  }

  // Mixing coefficients: per layer and stream the mean λ₁ (anchor) and λ₂ (current layer); for
  // dynamic mixing the effective λ·γ, γ's mean over tokens (and its spread over tokens).
  for (const auto& v : vs) {
    if (S.m.of(v).empty() || S.m.of(v).front()->diverged) continue;
    const Variant x = parse_variant(v);
    if (x.family != "nuresformer" && x.family != "exoformer" && !(x.family == "resformer" && x.learnable)) continue;
    std::vector<std::string> head = {"layer"};
    const char* comp[4] = {"q", "k", "v", "g"};
    for (int c = 0; c < 4; ++c)
      if (x.family == "resformer" ? c == 2 : x.streams[c]) head.push_back(std::string(comp[c]) + ": λ₁ / λ₂");
    experiment::Table l(head);
    for (int64_t n = 0; n < S.s.layers; ++n) {
      std::vector<std::string> row = {std::to_string(n + 1)};
      bool any = false;
      for (int c = 0; c < 4; ++c) {
        if (!(x.family == "resformer" ? c == 2 : x.streams[c])) continue;
        const std::string p = experiment::Matrix::layer_metric(n, std::string(comp[c]) + "_");
        double l1 = S.mean(v, p + "lambda1"), l2 = S.mean(v, p + "lambda2");
        std::string cell;
        if (x.dynamic && std::isfinite(l1)) {
          const double g1 = S.mean(v, p + "gamma1_mean"), g2 = S.mean(v, p + "gamma2_mean");
          cell = fixed(l1 * g1, 2) + " / " + fixed(l2 * g2, 2) + " (γ " + fixed(g1, 2) + "±" + fixed(S.mean(v, p + "gamma1_sd"), 2) +
                 ", " + fixed(g2, 2) + "±" + fixed(S.mean(v, p + "gamma2_sd"), 2) + ")";
        } else {
          cell = fixed(l1, 2) + " / " + fixed(l2, 2);
        }
        any |= std::isfinite(l1);
        row.push_back(cell);
      }
      if (any) l.row(row);
    }
    md += "### Mixing coefficients of " + v + " (mean over entries and seeds" +
          (x.dynamic ? "; dynamic: effective λ·γ, and γ's mean ± spread over tokens" : std::string()) + ")\n\n" +
          l.markdown() + "\n";
  }
  return md;
}

std::string claims(const Summary& S) {
  using experiment::Claim;
  using experiment::Verdict;
  std::vector<Claim> cl;
  using examples::every_seed;
  auto below = [](double x) { return x < 0; };

  // A paired difference of the loss decides an ordering: below zero in every seed and outside the
  // seed spread reproduces it, above likewise refutes it, anything else is inconclusive.
  const std::string ordering = "paired Δ loss < 0 in every seed with |mean| ≥ sd: reproduced; > 0 likewise: not "
                               "reproduced; otherwise inside the seed spread: inconclusive";
  auto order_verdict = [](const experiment::PairedDifference& p) {
    return p.sign() < 0 ? Verdict::Reproduced : p.sign() > 0 ? Verdict::Not : Verdict::Inconclusive;
  };
  auto params = [&](const std::string& v) { return fixed(S.mean(v, "parameters") / 1e6, 2) + " M"; };

  // 1. The perplexity ordering, one step at a time (paper, Tables 1 and 3), and the paper's two
  //    "value path without ExoFormer" rows: ResFormer's value residual on the gated model, and
  //    NuResFormer mixing V and G only with un-normalised anchors.
  const std::vector<std::pair<std::string, std::string>> steps = {{"gated", "base"},
                                                                  {"resformer", "gated"},
                                                                  {"nuresformer", "resformer"},
                                                                  {"exoformer", "nuresformer"},
                                                                  {"exoformer_dyn", "exoformer"},
                                                                  {"resformer_gated", "gated"},
                                                                  {"exoformer", "resformer_gated"},
                                                                  {"nuresformer_only_vg_raw", "gated"}};
  for (const auto& [v, ref] : steps) {
    if (!S.has(v) || !S.has(ref)) continue;
    const auto pv = kPaper.at(v), pr = kPaper.at(ref);
    const auto d = experiment::paired_difference(S.paired(v, ref, "val_loss"));
    cl.push_back({"ppl: " + v + (pv.ppl < pr.ppl - 0.05 ? " < " : " ≤ ") + ref,
                  fixed(pv.ppl, 2) + " vs " + fixed(pr.ppl, 2),
                  fixed(S.mean(v, "val_ppl"), 2) + " vs " + fixed(S.mean(ref, "val_ppl"), 2) + "; Δ loss " + d.str(),
                  order_verdict(d), ordering});
  }
  // 1b. Parameters: the paper drops layers from the gated models so that they have no more
  //     parameters than the base model; a variant with fewer layers (_l<N>) is that comparison.
  for (const auto& v : S.m.variants()) {
    const Variant x = parse_variant(v);
    if (x.layers == 0 || x.layers >= S.s.layers || x.raw_anchors || x.steps || !S.has(v) || !S.has("base") ||
        !kPaper.count(x.core))
      continue;
    const auto d = experiment::paired_difference(S.paired(v, "base", "val_loss"));
    cl.push_back({"ppl: " + x.core + " < base with no more parameters (" + std::to_string(x.layers) + " layers against " +
                      std::to_string(S.s.layers) + ")",
                  fixed(kPaper.at(x.core).ppl, 2) + " vs " + fixed(kPaper.at("base").ppl, 2) +
                      " (the gated models 3 layers fewer, 29 against 32)",
                  fixed(S.mean(v, "val_ppl"), 2) + " vs " + fixed(S.mean("base", "val_ppl"), 2) + " at " + params(v) +
                      " vs " + params("base") + " parameters; Δ loss " + d.str(),
                  S.mean(v, "parameters") > S.mean("base", "parameters") ? Verdict::Untestable : order_verdict(d),
                  ordering + " (untestable while the variant has more parameters than the base)"});
  }
  // 1c. Tokens: a variant trained on a shorter schedule (_steps<N>, with its own warm-up and decay)
  //     against the base model's final loss — the paper's "as good with 1.84× fewer tokens".
  for (const auto& v : S.m.variants()) {
    const Variant x = parse_variant(v);
    if (x.steps == 0 || x.steps >= S.steps || x.layers || x.raw_anchors || !S.has(v) || !S.has("base")) continue;
    const auto d = experiment::paired_difference(S.paired(v, "base", "val_loss"));
    const double fewer = double(S.steps) / double(x.steps);
    cl.push_back({x.core + " trained on " + fixed(fewer, 2) + "× fewer tokens (" + std::to_string(x.steps) + " of " +
                      std::to_string(S.steps) + " steps, a full schedule) reaches the base model's final loss",
                  x.core == "exoformer_dyn" ? std::string("1.84× fewer tokens") : std::string("—"),
                  fixed(S.mean(v, "val_loss"), 3) + " vs " + fixed(S.mean("base", "val_loss"), 3) + "; Δ loss " + d.str(),
                  order_verdict(d), ordering});
  }
  // 2. The sink: the base model forms one; gating and mixing remove it (paper, Table 2).
  const double uni = probe::uniform_first_key_attention(S.s.seq_len);
  if (S.has("base")) {
    const Spread b = S.spread("base", "sink");
    const bool formed = b.mean > 1.5 * uni;
    cl.push_back({"the base model forms an attention sink", "0.257 (mean attention to key 0)",
                  b.short_str() + " (uniform attention: " + fixed(uni) + ")",
                  b.min > 2 * uni ? Verdict::Reproduced : formed ? Verdict::Partly : Verdict::Not,
                  "above 2× the uniform level in every seed: reproduced; mean above 1.5×: partly"});
    for (const std::string v : {"gated", "resformer", "nuresformer", "exoformer", "exoformer_dyn"}) {
      if (!S.has(v)) continue;
      const auto d = S.paired(v, "base", "sink");
      const double ratio = S.mean(v, "sink") / b.mean;
      const double pratio = kPaper.at(v).sink / kPaper.at("base").sink;
      cl.push_back({"sink: " + v + " ≪ base", fixed(kPaper.at(v).sink, 4) + " (" + fixed(100 * pratio, 1) + "% of base)",
                    S.spread(v, "sink").short_str() + " (" + fixed(100 * ratio, 0) + "% of base)",
                    !formed                          ? Verdict::Untestable
                    : every_seed(d, below) && ratio < 0.25 ? Verdict::Reproduced
                    : ratio < 0.75                    ? Verdict::Partly
                                                      : Verdict::Not,
                    "below the base in every seed and under a quarter of it: reproduced; under three quarters: partly "
                    "(untestable when the base formed no sink)"});
    }
  }
  // 3. ExoFormer's "representation collapse": higher token similarity, fewer PCA core features.
  for (const std::string v : {"exoformer", "exoformer_dyn"}) {
    if (!S.has(v) || !S.has("base")) continue;
    const auto ds = S.paired(v, "base", "token_sim"), dp = S.paired(v, "base", "pca");
    const bool sim = every_seed(ds, [](double x) { return x > 0; }), pca = every_seed(dp, below);
    const auto p = kPaper.at(v), b = kPaper.at("base");
    cl.push_back({v + ": representation collapse (token similarity up, PCA core features down vs base)",
                  "sim " + fixed(p.sim, 2) + " vs " + fixed(b.sim, 2) + "; PCA " + fixed(p.pca, 0) + " vs " + fixed(b.pca, 0),
                  "sim " + S.spread(v, "token_sim").short_str() + " vs " + S.spread("base", "token_sim").short_str() +
                      "; PCA " + S.spread(v, "pca").short_str(1) + " vs " + S.spread("base", "pca").short_str(1),
                  sim && pca ? Verdict::Reproduced : (sim || pca) ? Verdict::Partly : Verdict::Not,
                  "both in every seed: reproduced; one of them: partly"});
  }
  // 4. Data efficiency: steps to reach the base model's final validation loss (paper: 1.84× fewer
  //    tokens for dynamic ExoFormer).
  if (S.has("base") && S.has("exoformer_dyn")) {
    const double target = S.mean("base", "val_loss"), at = S.steps_to("exoformer_dyn", target);
    const double gain = std::isfinite(at) && at > 0 ? double(S.steps) / at : NAN;
    cl.push_back({"dynamic ExoFormer reaches the base model's final loss with fewer tokens", "1.84× fewer",
                  std::isfinite(gain) ? fixed(gain, 2) + "× fewer (step " + fixed(at, 0) + " of " +
                                            std::to_string(S.steps) + ", mean over seeds)"
                                      : std::string("never reached in every seed"),
                  gain >= 1.5 ? Verdict::Reproduced : gain > 1.05 ? Verdict::Partly : Verdict::Not,
                  "≥ 1.5×: reproduced; > 1.05×: partly"});
  }
  return cl.empty() ? std::string() : "### Claims\n\n" + experiment::claims_table(cl) + "\n";
}

// Which anchor carries the effect: ExoFormer mixing one stream at a time, against the gated model
// (the same attention without anchors) and the full ExoFormer.
std::string ablation(const Summary& S) {
  if (!S.has("gated")) return {};
  experiment::Table t({"variant", "Δ loss vs gated (paired)", "share of ExoFormer's gain", "attn sink", "token sim", "PCA core"});
  const double full = S.has("exoformer") ? experiment::summarize(S.paired("exoformer", "gated", "val_loss")).mean : NAN;
  bool any = false;
  for (const auto& v : S.m.variants()) {
    const Variant x = parse_variant(v);
    if (x.family != "exoformer" || x.dynamic || x.granularity != 'e' || x.core != v) continue;
    const Spread d = experiment::summarize(S.paired(v, "gated", "val_loss"));
    t.row({v, d.short_str(), std::isfinite(full) && full != 0 ? fixed(100 * d.mean / full, 0) + "%" : "—",
           S.spread(v, "sink").short_str(), S.spread(v, "token_sim").short_str(), S.spread(v, "pca").short_str(1)});
    any |= v != "exoformer";
  }
  return any ? "### Which anchor carries the effect (ExoFormer mixing one stream at a time)\n\n" + t.markdown() + "\n" : "";
}

// The modified variants (_raw, _l<N>, _steps<N>) against the base model and against the same
// variant unmodified: what the anchors' norm, the depth and the schedule length are worth.
std::string modifications(const Summary& S) {
  experiment::Table t({"variant", "change", "params", "Δ loss vs base (paired)", "Δ loss vs unmodified (paired)",
                       "attn sink"});
  bool any = false;
  for (const auto& v : S.m.variants()) {
    const Variant x = parse_variant(v);
    if (x.core == v || !S.has(v)) continue;
    std::string change;
    if (x.raw_anchors) change += "anchors not normalised";
    if (x.layers) change += (change.empty() ? "" : "; ") + std::to_string(x.layers) + " layers";
    if (x.steps) change += (change.empty() ? "" : "; ") + std::to_string(x.steps) + "-step schedule";
    auto delta = [&](const std::string& ref) {
      return S.has(ref) ? experiment::paired_difference(S.paired(v, ref, "val_loss")).str() : std::string("—");
    };
    t.row({v, change, fixed(S.mean(v, "parameters"), 0), delta("base"), x.core + ": " + delta(x.core),
           S.spread(v, "sink").short_str()});
    any = true;
  }
  return any ? "### Anchors' norm, depth and schedule length\n\n" + t.markdown() + "\n" : "";
}

// ---- figures -----------------------------------------------------------------------------------

void figures(const Summary& S, const fs::path& out) {
  const auto& vs = S.m.variants();
  experiment::Figures fig(out);
  // The loss panels start after the first tenth of training, past the warm-up's fall from ln(V).
  int64_t settled = 0;
  for (const auto& v : vs) settled = std::max(settled, experiment::last_step(S.m.of(v)) / 10);
  const std::vector<experiment::Figures::Panel> panels = {
      {"val_loss", "validation loss (after the first 10% of steps)", false, settled},
      {"train_loss", "training loss, smoothed (after the first 10% of steps)", false, settled},
      {"sink", "attention to key 0 (mean over layers)"}, {"token_sim", "token similarity (mean over layers)"}};
  auto series = [&](const std::vector<std::string>& names) {
    std::vector<experiment::Figures::Series> ss;
    for (const auto& v : names) {
      if (!S.has(v)) continue;
      const std::string file = "dynamics_" + v + ".csv";
      experiment::write_dynamics(out / file, S.m.of(v), {"val_loss", "train_loss", "sink", "token_sim", "pca"});
      ss.push_back({v, file});
    }
    return ss;
  };
  std::vector<std::string> main_vs, abl = {"gated", "exoformer"};
  for (const auto& v : vs) {
    const Variant x = parse_variant(v);
    const bool partial = !std::all_of(x.streams.begin(), x.streams.end(), [](bool b) { return b; });
    (partial ? abl : main_vs).push_back(v);
  }
  if (auto ss = series(main_vs); !ss.empty())
    fig.dynamics("curves.png", "training dynamics (band: min..max over seeds)", panels, ss, 2);
  if (auto ss = series(abl); ss.size() > 2)
    fig.dynamics("curves_ablation.png", "ExoFormer mixing one stream at a time", panels, ss, 2);

  // Final perplexity by variant, with the seed spread.
  {
    std::vector<std::pair<std::string, Spread>> bars;
    for (const auto& v : vs)
      if (S.spread(v, "val_ppl").n_finite > 0) bars.emplace_back(v, S.spread(v, "val_ppl"));
    if (!bars.empty()) {
      experiment::write_bars(out / "ppl_bars.csv", bars);
      fig.bars("perplexity.png", "validation perplexity (mean ± sd over seeds)", "ppl_bars.csv", "perplexity");
    }
  }
  // Per-layer measures: one panel each, a line per variant.
  fig.by_layer("by_layer.png", "final model, mean over seeds", S.s.layers,
               {{"sink", "attention to key 0"}, {"token_sim", "token similarity"},
                {"emb_cos", "cosine to input embedding"}, {"pca", "PCA core features"}},
               main_vs, [&](const std::string& v, int64_t l, const std::string& k) {
                 return S.mean(v, experiment::Matrix::layer_metric(l, k));
               });
  // Mixing coefficients by layer: λ₁/λ₂ (anchor over current layer) for q, k, v, g.
  {
    std::vector<std::string> mixed;
    for (const auto& v : main_vs) {
      const Variant x = parse_variant(v);
      if ((x.family == "nuresformer" || x.family == "exoformer") && S.has(v) && !S.m.of(v).front()->diverged)
        mixed.push_back(v);
    }
    if (!mixed.empty())
      fig.by_layer("mixing.png", "anchor reliance λ₁/λ₂ by layer (dynamic: λ₁γ₁/λ₂γ₂; mean over entries and seeds)",
                   S.s.layers, {{"q", "q"}, {"k", "k"}, {"v", "v"}, {"g", "g"}}, mixed,
                   [&](const std::string& v, int64_t n, const std::string& c) {
                     const std::string p = experiment::Matrix::layer_metric(n, c) + "_";
                     double r = S.mean(v, p + "lambda1") / S.mean(v, p + "lambda2");
                     if (parse_variant(v).dynamic) r *= S.mean(v, p + "gamma1_mean") / S.mean(v, p + "gamma2_mean");
                     return r;
                   });
  }
  fig.render();
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  experiment::CommonFlags flags{.out = "out/exoformer", .steps = 1000};
  CLI::App app{"ExoFormer: anchor mixing of queries, keys, values and gate logits (base, gated, ResFormer, NuResFormer, "
               "ExoFormer) on decoders trained on the Brown corpus (docs/results/exoformer.md).",
               "exoformer"};
  experiment::add_common_flags(app, flags);
  std::vector<std::string> variants;
  bool ablate = true;
  app.add_option("--variants", variants,
                 "comma-separated variants (default: base, gated, resformer, resformer_learn, nuresformer, exoformer_s, "
                 "exoformer_h, exoformer, exoformer_dyn and the one-stream ablation exoformer_only_{q,k,v,g}); forms: "
                 "base, gated, resformer[_gated][_learn], <nuresformer|exoformer>[_s|_h|_e][_dyn][_only_<qkvg>], each followed "
                 "by any of _raw (anchors not normalised), _l<N> (N layers), _steps<N> (an N-step schedule)")
      ->delimiter(',');
  app.add_flag("!--no-ablation", ablate, "leave the one-stream ablation out of the default variants");
  examples::add_lm_flags(app, s);
  app.add_option("--muon-lr", s.muon_lr, "Muon's peak learning rate (matrices)")->check(CLI::Range(1e-7, 1.0))->capture_default_str();
  app.add_option("--adamw-lr", s.adamw_lr, "AdamW's peak learning rate (gains, λ, embeddings, head)")
      ->check(CLI::Range(1e-7, 1.0))->capture_default_str();
  app.add_option("--muon-wd", s.muon_wd, "Muon's decoupled weight decay")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  examples::add_optimiser_flags(app, s);  // β₂, warmup, the final rate, clipping
  app.add_option("--decay", s.decay, "final linear decay to --min-lr-ratio, as a fraction of the steps")
      ->check(CLI::Range(0.01, 1.0))->capture_default_str();
  app.add_option("--z-loss", s.z_loss, "z-loss weight")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--pca-threshold", s.pca_threshold, "variance fraction the PCA core features explain")
      ->check(CLI::Range(0.01, 1.0))->capture_default_str();
  if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
  examples::sink_preset(app, flags, s);
  if (flags.quick) {
    experiment::preset(app, "--steps", flags.steps, 500);
    experiment::preset(app, "--d-model", s.d_model, 64);
    experiment::preset(app, "--layers", s.layers, 4);
    experiment::preset(app, "--seq-len", s.seq_len, 64);
    if (app.count("--seeds") == 0) flags.seeds = {0};
    ablate = false;  // the nine main variants only
  }
  if (s.smoke) {
    examples::smoke_preset(app, flags, s);
    experiment::preset(app, "--layers", s.layers, 3);  // NuResFormer needs layers past the first to mix into
  }

  try {
    SINKLAB_CHECK(s.d_model % s.heads == 0, "exoformer: --heads ", s.heads, " does not divide --d-model ", s.d_model);
    if (variants.empty()) {
      variants = kMain;
      if (ablate) variants.insert(variants.end(), kAblation.begin(), kAblation.end());
    }
    for (const auto& v : variants) parse_variant(v);  // names the bad one before anything runs
    if (flags.threads > 0) set_num_threads(flags.threads);

    const examples::Sentences text = examples::load_corpus("exoformer", s.corpus, s.text_file, s.brown_dir, s.smoke);
    const data::WordLmCorpus corpus = data::make_word_lm(text.lines, {.vocab = s.vocab, .specials = 1});
    std::printf("text: %s; %zu training and %zu validation words, vocabulary %lld (BOS, <unk> %.1f%% of validation "
                "words)\n",
                text.source.c_str(), corpus.train.size(), corpus.validation.size(), static_cast<long long>(corpus.vocab),
                100.0 * corpus.unk_rate);

    EvalData ev;
    ev.validation = data::consecutive_lm_windows(corpus.validation, s.seq_len, s.eval_batch, s.val_batches, kBos);
    ev.probe = ev.validation.front();

    Context c = examples::lm_context<Context>(s, corpus.train, ev, corpus.vocab, flags.steps);
    c.cfg.qk_norm = true;
    c.cfg.zero_init_output = true;
    c.cfg.z_loss = s.z_loss;
    c.cfg.rope_theta = s.rope_theta;
    c.cfg.norm.eps = 1e-6;
    std::printf("model: %lld layers, d = %lld, %lld heads, pre-norm RMSNorm, QK-norm, RoPE, SwiGLU, zero-initialised "
                "W_O / FFN output / head; T = %lld, batch %lld; Muon %g + AdamW %g; %lld steps per run, %zu variant(s) x "
                "%zu seed(s)\n",
                static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.heads),
                static_cast<long long>(s.seq_len), static_cast<long long>(s.batch), s.muon_lr, s.adamw_lr,
                static_cast<long long>(flags.steps), variants.size(), flags.seeds.size());

    experiment::Matrix m("exoformer", flags, variants, settings_json(s, text.source, corpus.vocab), argc, argv);
    for (const auto& v : variants)
      if (const int64_t n = parse_variant(v).steps; n > 0) m.set_steps(v, n);
    const bool complete = m.run([&](experiment::Run& r) { exoformer::run(r, c); });
    const Summary S{{m, s}, flags.steps};
    std::string md = "# ExoFormer at " + std::to_string(s.layers) + " layers, d = " + std::to_string(s.d_model) + "\n\n" +
                     text.source + ", " + std::to_string(flags.steps) + " steps of " +
                     std::to_string(s.batch * s.seq_len) + " tokens per run, seeds";
    for (auto seed : flags.seeds) md += " " + std::to_string(seed);
    md += ". Attention sink: mean attention of queries 1..T−1 to key 0 over heads and layers (uniform attention "
          "gives " + fixed(probe::uniform_first_key_attention(s.seq_len)) + "); token similarity, cosine to the embedding and PCA core features "
          "(components for " + fixed(100 * s.pca_threshold, 0) + "% of the variance, of d = " + std::to_string(s.d_model) +
          ") of each layer's output on the first validation batch, averaged over layers.\n\n";
    md += tables(S) + ablation(S) + modifications(S) + claims(S);
    io::write_file_atomically(m.out() / "summary.md", md);
    std::printf("\n%s\nsummary: %s\n", md.c_str(), (m.out() / "summary.md").string().c_str());
    if (s.plots) figures(S, m.out());
    if (!complete) return 130;
  } catch (const std::exception& e) {
    examples::print_error("exoformer", e);
    return 1;
  }
  return 0;
}
