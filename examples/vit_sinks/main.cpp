// Gating vs registers in a small ViT (NOP vs broadcast sinks, docs/papers.md; its §5 and App. D):
// "gating removes NOP sinks, registers host the
// broadcast, gating + registers gives the best dense features". A pre-norm ViT on Fashion-MNIST
// (28×28 in 4×4 patches, CLS + 49 patches) in four variants — vanilla, gated (the G1 gate
// σ(LN1(x)·W_g + b) per channel before W_O, W_g = 0, b = 2), registers (4 appended register
// tokens) and gated_registers — trained from paired starts on the same batches, three seeds.
//
//   vit_sinks                      # the full study
//   vit_sinks --quick              # a few minutes: 4 layers, fewer steps, seed 0
//   vit_sinks --variants vanilla,gated --seeds 0,1 --out out/vit-g
//   vit_sinks --smoke              # seconds, built-in synthetic images (the CTest smoke test)
//
// Per evaluation (fit.hpp): test accuracy and loss; on the probe images per layer the sink score
// (max_j mean_i A_ij), the per-image peak inflow and where it sits (CLS / patch / register), the
// attention mass on CLS and on the registers, the value-norm ratio at each image's own inflow
// token, the stable rank of the attention update and the mean gate; per head its sink score, value
// ratio and the stable rank of its own update (the paper's two phenotype axes, Fig. 6: heads.png,
// and the claims that sink heads split into NOP and broadcast and that CLS hands the sink to the
// patches across layers, Fig. 4). At the end the dense probe: a
// linear classifier on the frozen final-norm patch tokens predicting background or the image's
// class per patch (a segmentation analogue, 11 classes): patch accuracy and mIoU. Output (--out):
// runs/<variant>/seed<k>/ (with the attention maps of the final model), summary.md with the
// tables and the claims, and the figures (plots.gp, PNGs with gnuplot).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../common/error_line.hpp"
#include "../common/seed_rule.hpp"
#include "../common/optim_flags.hpp"
#include "../common/study_summary.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/io/files.hpp"
#include "study.hpp"

using namespace sinklab;
namespace fs = std::filesystem;
using experiment::fixed;
using experiment::Json;
using experiment::Spread;
using vit_sinks::Settings;

namespace vit_sinks {

Variant parse_variant(const std::string& name) {
  if (name == "vanilla") return {name, false, false};
  if (name == "gated") return {name, true, false};
  if (name == "registers") return {name, false, true};
  if (name == "gated_registers") return {name, true, true};
  throw Error("vit_sinks: --variants: '" + name + "' is not a variant; known: vanilla, gated, registers, gated_registers");
}

void run(experiment::Run& r, const Context& c) {
  const Variant v = parse_variant(r.variant());
  if (!detail::run_plain(r, c, v) && !detail::run_gated(r, c, v))
    throw Error("vit_sinks: no model for the variant '" + v.name + "'");
}

}  // namespace vit_sinks

namespace {

using namespace vit_sinks;

const std::vector<std::string> kVariants = {"vanilla", "gated", "registers", "gated_registers"};

// The paper's Table 1 (ViT-L LeJEPA, 3 seeds): ImageNet-1k online linear accuracy, ADE20K and
// Pascal VOC 2012 linear-probe mIoU.
struct PaperRow {
  double acc, ade, voc;
};
const std::map<std::string, PaperRow> kPaper = {{"vanilla", {0.694, 0.166, 0.438}},
                                                {"registers", {0.693, 0.187, 0.499}},
                                                {"gated", {0.695, 0.186, 0.480}},
                                                {"gated_registers", {0.694, 0.200, 0.524}}};

// --smoke: 10 classes of simple shapes (filled square, ring, horizontal bar, vertical bar,
// cross; small and large) at random positions and intensities, with a little noise.
data::ImageDataset synthetic_shapes(int64_t n, uint64_t seed) {
  data::ImageDataset ds{Tensor<float>::zeros({n, 28, 28}), Tensor<int32_t>::zeros({n})};
  Rng rng(seed, 99);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t k = static_cast<int32_t>(i % 10);
    ds.labels.data()[i] = k;
    const int shape = k % 5;
    const int64_t r = k < 5 ? 4 + rng.randint(0, 2) : 8 + rng.randint(0, 3);
    const int64_t cy = rng.randint(r, 28 - r), cx = rng.randint(r, 28 - r);
    const double level = 0.6 + 0.4 * rng.uniform();
    float* img = ds.images.data() + i * 28 * 28;
    for (int64_t y = 0; y < 28; ++y)
      for (int64_t x = 0; x < 28; ++x) {
        const int64_t dy = std::abs(y - cy), dx = std::abs(x - cx);
        const double rr = std::sqrt(double(dy * dy + dx * dx));
        bool on = false;
        switch (shape) {
          case 0: on = dy <= r && dx <= r; break;
          case 1: on = rr <= r && rr >= r - 2; break;
          case 2: on = dy <= 1 && dx <= r; break;
          case 3: on = dx <= 1 && dy <= r; break;
          default: on = (dy <= 1 && dx <= r) || (dx <= 1 && dy <= r); break;
        }
        img[y * 28 + x] = static_cast<float>(std::clamp((on ? level : 0.0) + 0.05 * rng.uniform(), 0.0, 1.0));
      }
  }
  return ds;
}

Json settings_json(const Settings& s, const std::string& source) {
  return Json{{"d_model", s.d_model},         {"layers", s.layers},           {"heads", s.heads},
              {"patch", s.patch},             {"registers", s.registers},     {"batch", s.batch},
              {"lr", s.lr},                   {"weight_decay", s.weight_decay}, {"warmup", s.warmup},
              {"clip", s.clip},               {"eval_every", s.eval_every},   {"test_images", s.test_images},
              {"probe_images", s.probe_images}, {"dense_train", s.dense_train}, {"dense_test", s.dense_test},
              {"dense_steps", s.dense_steps}, {"dense_lr", s.dense_lr},       {"foreground", s.foreground},
              {"data", source}};
}

// ---- summary ---------------------------------------------------------------------------------

struct Summary : examples::StudySummary<Settings> {
  int64_t tokens = 0;  // S: CLS + patches (+ registers where a variant has them, added per variant)

  int64_t seq(const std::string& v) const { return tokens + (parse_variant(v).registers ? s.registers : 0); }
  // A sink, by every claim here: a sink score (or peak column mass) above three times uniform.
  double sink_level(const std::string& v) const { return 3.0 / double(seq(v)); }
};

std::string tables(const Summary& S) {
  const auto& vs = S.m.variants();
  std::string md;
  experiment::Table t({"variant", "params", "test acc", "Δ acc vs vanilla", "dense acc", "dense mIoU",
                       "Δ mIoU vs vanilla (paired)", "sink score", "peak inflow", "inflow on CLS / patch / reg",
                       "reg mass", "value ratio", "stable rank", "paper: acc / ADE20K / VOC mIoU"});
  for (const auto& v : vs) {
    const auto it = kPaper.find(v);
    const std::string paper = it == kPaper.end() ? "—"
                                                 : fixed(it->second.acc, 3) + " / " + fixed(it->second.ade, 3) + " / " +
                                                       fixed(it->second.voc, 3);
    const bool reg = parse_variant(v).registers;
    t.row({v, fixed(S.mean(v, "parameters"), 0), S.spread(v, "test_acc").short_str(),
           v == "vanilla" ? "—" : experiment::summarize(S.m.paired(v, "vanilla", "test_acc")).short_str(),
           S.spread(v, "dense_acc").short_str(), S.spread(v, "dense_miou").short_str(),
           v == "vanilla" ? "—" : experiment::summarize(S.m.paired(v, "vanilla", "dense_miou")).short_str(),
           S.spread(v, "sink").short_str(), S.spread(v, "inflow").short_str(),
           fixed(S.mean(v, "inflow_cls"), 2) + " / " + fixed(S.mean(v, "inflow_patch"), 2) + " / " +
               (reg ? fixed(S.mean(v, "inflow_reg"), 2) : std::string("—")),
           reg ? S.spread(v, "reg_mass").short_str() : "—", S.spread(v, "vratio").short_str(),
           S.spread(v, "srank").short_str(2), paper});
  }
  md += "### Final values (mean ± sd over seeds; attention measures averaged over layers)\n\n" + t.markdown() + "\n";

  for (const auto& [key, title, prec] : std::vector<std::tuple<std::string, std::string, int>>{
           {"sink", "Sink score max_j mean_i A_ij by layer (uniform: 1/S)", 3},
           {"vratio", "Value-norm ratio at each image's inflow token by layer (< 0.2: NOP)", 3},
           {"srank", "Stable rank of the attention update by layer (≈ 1: broadcast)", 2},
           {"inflow_reg", "Fraction of (image, head) inflow peaks on a register, by layer", 2},
           {"inflow_cls", "Fraction of (image, head) inflow peaks on CLS, by layer", 2}}) {
    std::vector<std::string> shown;
    for (const auto& v : vs)
      if (key != "inflow_reg" || parse_variant(v).registers) shown.push_back(v);
    md += "### " + title + " (mean over seeds)\n\n" + S.m.layer_table(key, S.s.layers, shown, prec) + "\n";
  }
  return md;
}

// One head of one finished run at the end of training: the two axes of the paper's sink
// phenotypes (Fig. 6), and whether it is a sink head at all (its sink score above 3/S).
struct HeadPoint {
  std::string variant;
  uint64_t seed = 0;
  int64_t layer = 0, head = 0;
  double sink = NAN, vratio = NAN, srank = NAN;
  bool is_sink = false;
  bool nop() const { return is_sink && vratio < 0.2; }                      // the paper: < 0.2× the others' norm
  // A normal value and a rank-1 update. Rank 1 is a signature only where ordinary heads are not
  // rank 1 too (diffuse attention gives every query nearly the same average: rank ≈ 1 at init).
  bool broadcast() const { return is_sink && vratio >= 0.5 && srank < 1.05; }
};

std::vector<HeadPoint> head_points(const Summary& S, const std::string& v) {
  std::vector<HeadPoint> out;
  const double level = S.sink_level(v);
  for (const auto* r : S.m.of(v)) {
    if (r->diverged) continue;
    for (int64_t l = 0; l < S.s.layers; ++l)
      for (int64_t h = 0; h < S.s.heads; ++h) {
        std::string head = "h";  // appended, not "h" + …: GCC 12 warns falsely on that (-Wrestrict, PR 105329)
        head += std::to_string(h) + "_";
        const std::string p = experiment::Matrix::layer_metric(l, head);
        HeadPoint x{v, r->seed, l, h, r->metric(p + "sink"), r->metric(p + "vratio"), r->metric(p + "srank")};
        if (!std::isfinite(x.sink)) continue;  // a run from before the per-head measures
        x.is_sink = x.sink > level;
        out.push_back(x);
      }
  }
  return out;
}

std::string claims(const Summary& S) {
  using experiment::Claim;
  using experiment::Verdict;
  std::vector<Claim> cl;
  using examples::every_seed;

  // 1. Gating removes NOP sinks. A NOP layer of the vanilla model: sink score above 3/S (three
  //    times uniform) with the value ratio at the inflow token below 0.2 (means over seeds).
  if (S.has("vanilla")) {
    const double uni = 1.0 / double(S.seq("vanilla"));
    std::vector<int64_t> nop;
    for (int64_t l = 0; l < S.s.layers; ++l) {
      const std::string p = experiment::Matrix::layer_metric(l, "");
      if (S.mean("vanilla", p + "sink") > S.sink_level("vanilla") && S.mean("vanilla", p + "vratio") < 0.2) nop.push_back(l);
    }
    std::string layers;
    for (auto l : nop) layers += (layers.empty() ? "" : ", ") + std::to_string(l + 1);
    for (const std::string v : {"gated", "gated_registers"}) {
      if (!S.has(v)) continue;
      if (nop.empty()) {
        double best_sink = 0, vr = NAN;
        for (int64_t l = 0; l < S.s.layers; ++l) {
          const std::string p = experiment::Matrix::layer_metric(l, "");
          if (S.mean("vanilla", p + "sink") > best_sink) best_sink = S.mean("vanilla", p + "sink"), vr = S.mean("vanilla", p + "vratio");
        }
        cl.push_back({"gating removes NOP sinks (" + v + ")", "NOP sinks (value ratio < 0.2) gone with the gate (§5, Fig. 6)",
                      "vanilla has no NOP layer: its strongest sink layer scores " + fixed(best_sink) + " (uniform " +
                          fixed(uni) + ") with value ratio " + fixed(vr, 2),
                      Verdict::Untestable,
                      "testable only if some vanilla layer has sink score > 3/S and value ratio < 0.2; then: the sink "
                      "score over those layers below half of vanilla's in every seed: reproduced; below 80% in the mean: partly"});
        continue;
      }
      // Per seed: mean sink score over the NOP layers, variant vs vanilla.
      auto nop_sink = [&](const std::string& var) {
        std::map<uint64_t, double> out;
        for (const auto* r : S.m.of(var)) {
          if (r->diverged) continue;
          double x = 0;
          for (auto l : nop) x += r->metric(experiment::Matrix::layer_metric(l, "sink"));
          out[r->seed] = x / double(nop.size());
        }
        return out;
      };
      const auto a = nop_sink(v), b = nop_sink("vanilla");
      std::vector<double> ratio;
      for (const auto& [seed, x] : a)
        if (b.count(seed) && b.at(seed) > 0) ratio.push_back(x / b.at(seed));
      const Spread rs = experiment::summarize(ratio);
      double vr = 0;
      for (auto l : nop) vr += S.mean(v, experiment::Matrix::layer_metric(l, "vratio")) / double(nop.size());
      cl.push_back({"gating removes NOP sinks (" + v + ")", "NOP sinks (value ratio < 0.2) gone with the gate (§5, Fig. 6)",
                    "NOP layers " + layers + ": sink score " + rs.short_str(2) + "× vanilla's; value ratio there " + fixed(vr, 2),
                    every_seed(ratio, [](double x) { return x < 0.5; }) ? Verdict::Reproduced
                    : rs.mean < 0.8                                 ? Verdict::Partly
                                                                    : Verdict::Not,
                    "NOP layer: vanilla sink score > 3/S and value ratio < 0.2; sink score over those layers below half "
                    "of vanilla's in every seed: reproduced; below 80% in the mean: partly"});
    }
  }
  // 2. Registers host the broadcast: the inflow peaks of the register variants sit on registers.
  //    Testable only where the vanilla model has a sink for the registers to take over: some layer
  //    whose sink score max_j mean_i A_ij is above 3/S (claim 1's sink, without its value
  //    condition: a broadcast sink keeps a normal value) and some layer whose per-image peak column
  //    mass is above 3/S (a hub). The per-image peak alone is not enough: the largest of S noisy
  //    column masses sits above 1/S without any sink.
  double hub = NAN, sink_best = NAN;
  if (S.has("vanilla")) {
    hub = 0, sink_best = 0;
    for (int64_t l = 0; l < S.s.layers; ++l) {
      hub = std::max(hub, S.mean("vanilla", experiment::Matrix::layer_metric(l, "inflow")));
      sink_best = std::max(sink_best, S.mean("vanilla", experiment::Matrix::layer_metric(l, "sink")));
    }
  }
  const double hub_level = S.has("vanilla") ? S.sink_level("vanilla") : NAN;
  const bool has_sink = sink_best > hub_level && hub > hub_level;
  const std::string no_sink = has_sink ? std::string()
                                       : "; untestable here: vanilla formed no sink for the registers to host (sink "
                                         "score and peak column mass must both exceed 3/S)";
  for (const std::string v : {"registers", "gated_registers"}) {
    if (!S.has(v)) continue;
    const double chance = double(S.s.registers) / double(S.seq(v));
    std::vector<double> f;
    for (const auto* r : S.m.of(v))
      if (!r->diverged) f.push_back(r->metric("inflow_reg"));
    const Spread sp = experiment::summarize(f);
    double best = 0;
    int64_t at = 0;
    for (int64_t l = 0; l < S.s.layers; ++l)
      if (S.mean(v, experiment::Matrix::layer_metric(l, "inflow_reg")) > best) best = S.mean(v, experiment::Matrix::layer_metric(l, "inflow_reg")), at = l;
    cl.push_back({"registers host the broadcast (" + v + ")", "registers capture nearly all sink mass across layers (Fig. 8)",
                  "inflow peaks on a register: " + sp.short_str(2) + " of (image, head) pairs over layers (most: layer " +
                      std::to_string(at + 1) + ", " + fixed(best, 2) + "); registers are " + fixed(chance, 3) +
                      " of the tokens; vanilla's strongest sink layer: sink score " + fixed(sink_best) +
                      ", strongest hub layer: peak column mass " + fixed(hub) + " (3/S = " + fixed(hub_level) + ")" +
                      no_sink,
                  !has_sink                                   ? Verdict::Untestable
                  : every_seed(f, [](double x) { return x > 0.5; }) ? Verdict::Reproduced
                  : sp.mean > 2 * chance                      ? Verdict::Partly
                                                              : Verdict::Not,
                  "testable only if vanilla has a sink (some layer's sink score > 3/S) and a hub (some layer's "
                  "per-image peak column mass > 3/S); then over half "
                  "the inflow peaks on registers in every seed: reproduced; more than twice the registers' share of "
                  "the tokens in the mean: partly"});
  }
  // 2b. Two phenotypes in one model (Fig. 6 left): the vanilla model's sink heads split into
  //     NOP-like (value ratio < 0.2) and broadcast-like (a normal value and a rank-1 update).
  if (S.has("vanilla")) {
    const auto pts = head_points(S, "vanilla");
    if (!pts.empty()) {
      int64_t sinks = 0, nop = 0, bc = 0;
      bool both_in_one = false;
      std::vector<double> other_rank;
      for (const auto& x : pts)
        if (!x.is_sink) other_rank.push_back(x.srank);
      std::sort(other_rank.begin(), other_rank.end());
      const std::size_t n = other_rank.size();
      const double median = n == 0 ? NAN : (other_rank[(n - 1) / 2] + other_rank[n / 2]) / 2;
      // Rank < 1.05 marks a head only where three quarters of the ordinary heads lie above 1.1.
      const bool rank_tells = n > 0 && other_rank[n / 4] >= 1.1;
      for (const auto seed : S.m.seeds()) {
        bool has_nop = false, has_broadcast = false;
        for (const auto& x : pts)
          if (x.seed == seed) has_nop |= x.nop(), has_broadcast |= rank_tells && x.broadcast();
        both_in_one |= has_nop && has_broadcast;
      }
      for (const auto& x : pts) sinks += x.is_sink, nop += x.nop(), bc += rank_tells && x.broadcast();
      cl.push_back({"sink heads fall into two phenotypes that coexist in one model: NOP (value ratio < 0.2) and broadcast "
                    "(normal value, rank-1 update)",
                    "DINOv2-G: NOP cluster in early-to-mid layers, broadcast cluster (strict rank-1) deeper (§5, Fig. 6)",
                    std::to_string(sinks) + " sink heads (score > 3/S) of " + std::to_string(pts.size()) +
                        " (heads × layers × seeds): " + std::to_string(nop) + " NOP-like, " + std::to_string(bc) +
                        " broadcast-like (value ratio ≥ 0.5, stable rank < 1.05); the other heads' median stable rank " +
                        fixed(median, 2) + (rank_tells ? "" : " (rank 1 is no signature here: broadcast not counted)"),
                    sinks == 0                        ? Verdict::Untestable
                    : both_in_one                      ? Verdict::Reproduced
                    : nop > 0 || bc > 0                ? Verdict::Partly
                                                       : Verdict::Not,
                    "per head of vanilla at the end; broadcast counted only where three quarters of the other heads "
                    "have stable rank ≥ 1.1; both kinds in one seed: reproduced; one kind: partly; untestable without "
                    "a sink head"});
    }
  }
  // 2c. The hand-off (Fig. 4): CLS is the sink in the early sink layers, patches in the later
  //     ones. Read from where vanilla's inflow peaks sit, over the layers whose sink score is
  //     above 3/S (means over seeds).
  if (S.has("vanilla")) {
    const double level = S.sink_level("vanilla");
    std::vector<int64_t> sink_layers;
    for (int64_t l = 0; l < S.s.layers; ++l)
      if (S.mean("vanilla", experiment::Matrix::layer_metric(l, "sink")) > level) sink_layers.push_back(l);
    std::string ours = "CLS share of the inflow peaks by layer:";
    for (int64_t l = 0; l < S.s.layers; ++l)
      ours += " " + fixed(S.mean("vanilla", experiment::Matrix::layer_metric(l, "inflow_cls")), 2);
    Verdict v = Verdict::Untestable;
    if (sink_layers.size() >= 2) {
      const double first = S.mean("vanilla", experiment::Matrix::layer_metric(sink_layers.front(), "inflow_cls"));
      const double last = S.mean("vanilla", experiment::Matrix::layer_metric(sink_layers.back(), "inflow_patch"));
      ours += "; sink score above 3/S in layers";
      for (std::size_t i = 0; i < sink_layers.size(); ++i) ours += (i ? ", " : " ") + std::to_string(sink_layers[i] + 1);
      // Patches late is the default; the hand-off needs CLS first.
      v = first <= 0.5 ? Verdict::Not : last > 0.5 ? Verdict::Reproduced : Verdict::Partly;
    } else {
      ours += "; " + std::to_string(sink_layers.size()) + " layer(s) with a sink score above 3/S";
    }
    cl.push_back({"CLS is the sink in early layers and hands it to patch tokens in later ones (vanilla)",
                  "DINOv2 L/G, OpenCLIP-L: a hand-off from [CLS] to patches across layers (Fig. 4)", ours, v,
                  "over the layers with a sink score above 3/S: the first peaks on CLS and the last on patches for over "
                  "half the (image, head) pairs: reproduced; CLS first but not patches last: partly; the first not on "
                  "CLS: not reproduced; untestable with fewer than two sink layers"});
  }
  // 3. Gating + registers gives the best dense features.
  if (S.has("gated_registers")) {
    bool all_seeds = true, in_mean = true;
    std::string ours = "mIoU " + S.spread("gated_registers", "dense_miou").short_str();
    int others = 0;
    for (const auto& v : S.m.variants()) {
      if (v == "gated_registers") continue;
      const auto d = S.m.paired("gated_registers", v, "dense_miou");
      if (d.empty()) continue;
      ++others;
      all_seeds &= every_seed(d, [](double x) { return x > 0; });
      in_mean &= experiment::summarize(d).mean > 0;
      ours += "; Δ vs " + v + " " + experiment::summarize(d).short_str();
    }
    if (others > 0)
      cl.push_back({"gating + registers gives the best dense features", "mIoU .200 / .524 vs .166–.187 / .438–.499 (Table 1)",
                    ours, all_seeds ? Verdict::Reproduced : in_mean ? Verdict::Partly : Verdict::Not,
                    "dense mIoU above every other variant in every seed (paired): reproduced; in the mean: partly"});
  }
  // 4. Classification accuracy roughly unchanged.
  if (S.has("vanilla")) {
    double worst = 0;
    std::string ours;
    int n = 0;
    for (const auto& v : S.m.variants()) {
      if (v == "vanilla") continue;
      const Spread d = experiment::summarize(S.m.paired(v, "vanilla", "test_acc"));
      if (d.n_finite == 0) continue;
      ++n;
      worst = std::max(worst, std::abs(d.mean));
      ours += (ours.empty() ? "Δ acc " : "; ") + v + " " + d.short_str();
    }
    if (n > 0)
      cl.push_back({"classification accuracy roughly unchanged", ".694 / .693 / .695 / .694 (vanilla / reg / gated / both)",
                    ours, worst < 0.01 ? Verdict::Reproduced : worst < 0.02 ? Verdict::Partly : Verdict::Not,
                    "every mean paired Δ within 1 point: reproduced; within 2 points: partly"});
  }
  return cl.empty() ? std::string() : "### Claims\n\n" + experiment::claims_table(cl) + "\n";
}

// ---- figures -----------------------------------------------------------------------------------

void figures(const Summary& S, const fs::path& out) {
  const auto& vs = S.m.variants();
  experiment::Figures fig(out);
  std::vector<experiment::Figures::Series> ss;
  for (const auto& v : vs) {
    if (!S.has(v)) continue;
    const std::string file = "dynamics_" + v + ".csv";
    experiment::write_dynamics(out / file, S.m.of(v), {"test_acc", "train_loss", "sink", "vratio", "inflow_reg", "srank"});
    ss.push_back({v, file});
  }
  if (!ss.empty())
    fig.dynamics("curves.png", "training dynamics (band: min..max over seeds)",
                 {{"test_acc", "test accuracy"}, {"train_loss", "training loss (smoothed)"},
                  {"sink", "sink score (mean over layers)"}, {"vratio", "value ratio at the inflow token (mean over layers)"}},
                 ss, 2);
  {
    std::vector<std::pair<std::string, Spread>> bars;
    for (const auto& v : vs)
      if (S.spread(v, "dense_miou").n_finite > 0) bars.emplace_back(v, S.spread(v, "dense_miou"));
    if (!bars.empty()) {
      experiment::write_bars(out / "miou_bars.csv", bars);
      fig.bars("dense_miou.png", "dense linear probe mIoU (mean ± sd over seeds)", "miou_bars.csv", "mIoU");
    }
  }
  // Attention maps of the first seed's final models: the last layer's mean attention, and the CLS
  // row over the patch grid of probe image 0.
  const uint64_t seed = S.m.seeds().front();
  const std::string last = std::to_string(S.s.layers - 1);
  std::vector<experiment::Figures::Series> attn, cls;
  for (const auto& v : vs) {
    const fs::path dir = fs::relative(S.m.run_dir(v, seed), out);
    if (fs::exists(out / dir / ("attn_L" + last + ".dat"))) attn.push_back({v, (dir / ("attn_L" + last + ".dat")).string()});
    if (fs::exists(out / dir / ("cls_L" + last + ".dat"))) cls.push_back({v, (dir / ("cls_L" + last + ".dat")).string()});
  }
  // Colour scale: the largest entry of the maps shown (the final attention is often diffuse).
  auto scale = [&](const std::vector<experiment::Figures::Series>& maps) {
    double mx = 0;
    for (const auto& m : maps) {
      std::ifstream in(out / m.file);
      for (double x; in >> x;) mx = std::max(mx, x);
    }
    return mx > 0 ? mx : 1.0;
  };
  if (!attn.empty())
    fig.heatmaps("attention_last.png",
                 "layer " + std::to_string(S.s.layers) + ": mean attention over probe images and heads (seed " +
                     std::to_string(seed) + "; key 0 = CLS, registers last)",
                 attn, {}, scale(attn));
  if (!cls.empty()) {
    const fs::path img = fs::relative(S.m.run_dir(vs.front(), seed), out) / "image0.dat";
    if (fs::exists(out / img))
      fig.heatmaps("image0.png", "probe image 0", {{"image", img.string()}}, {.x = "pixel column", .y = "pixel row"});
    fig.heatmaps("cls_maps.png",
                 "layer " + std::to_string(S.s.layers) + ": CLS attention over the patches of probe image 0 (mean over heads)",
                 cls, {.x = "patch column", .y = "patch row"}, scale(cls));
  }
  // Every head at the end on the paper's two axes (Fig. 6): value ratio at its inflow tokens against
  // the stable rank of its update; sink heads (score > 3/S) filled, the others open.
  {
    std::string csv = "variant_index,variant,seed,layer,head,sink,vratio,srank,is_sink\n";
    std::vector<std::string> shown;
    double xlo = 0.1, xhi = 2.0, yhi = 1.5;  // the ranges always show the NOP line (0.2) and rank 1 to 1.5
    for (const auto& v : vs) {
      const auto pts = head_points(S, v);
      if (pts.empty()) continue;
      shown.push_back(v);
      for (const auto& x : pts) {
        if (std::isfinite(x.vratio) && x.vratio > 0) xlo = std::min(xlo, x.vratio / 1.5), xhi = std::max(xhi, x.vratio * 1.5);
        if (std::isfinite(x.srank)) yhi = std::max(yhi, x.srank * 1.05);
      }
      for (const auto& x : pts)
        csv += std::to_string(shown.size() - 1) + "," + v + "," + std::to_string(x.seed) + "," + std::to_string(x.layer) + "," +
               std::to_string(x.head) + "," + fixed(x.sink, 5) + "," + fixed(x.vratio, 5) + "," + fixed(x.srank, 5) + "," +
               (x.is_sink ? "1" : "0") + "\n";
    }
    if (!shown.empty()) {
      io::write_file_atomically(out / "heads.csv", csv);
      std::string gp = "set terminal " + fig.terminal() + " size 900,600\nset output 'heads.png'\n"
                       "set title 'every head at the end (all seeds): filled = sink head (score > 3/S); NOP: ratio < 0.2, "
                       "broadcast: rank ≈ 1'\nset datafile separator ','\nset datafile columnheaders\nset grid\n"
                       "set logscale x\nset xrange [" + fixed(xlo, 4) + ":" + fixed(xhi, 4) + "]\nset yrange [0.95:" + fixed(yhi, 3) +
                       "]\nset xlabel 'value ratio at the inflow tokens'\nset ylabel 'stable rank of the head update'\n"
                       "set key outside right font ',9'\nset arrow from 0.2, graph 0 to 0.2, graph 1 nohead dt 2 lc rgb 'gray'\nplot ";
      for (std::size_t i = 0; i < shown.size(); ++i) {
        const std::string sel = "(column('variant_index') == " + std::to_string(i) + " && column('is_sink') == ";
        gp += std::string(i ? ", " : "") + "'heads.csv' using " + sel + "0 ? column('vratio') : 1/0):(column('srank')) "
              "with points pt 6 ps 0.8 lc rgb '" + experiment::palette(i) + "' title '" + shown[i] + "', " +
              "'heads.csv' using " + sel + "1 ? column('vratio') : 1/0):(column('srank')) with points pt 7 ps 1.3 lc rgb '" +
              experiment::palette(i) + "' title '" + shown[i] + " (sink)'";
      }
      gp += "\nunset arrow\nunset logscale\nset autoscale xy\nunset datafile columnheaders\nunset xlabel\nunset ylabel\n"
            "unset title\nset key default\n";
      fig.script(gp, "heads.png");
    }
  }
  // Per-layer measures: one panel each, a line per variant.
  fig.by_layer("by_layer.png", "final model, mean over seeds", S.s.layers,
               {{"sink", "sink score"}, {"vratio", "value ratio at the inflow token"},
                {"srank", "stable rank of the update"}, {"inflow_reg", "inflow peaks on registers"}},
               vs, [&](const std::string& v, int64_t l, const std::string& k) {
                 return S.mean(v, experiment::Matrix::layer_metric(l, k));
               });
  fig.render();
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  experiment::CommonFlags flags{.out = "out/vit_sinks", .steps = 800};
  CLI::App app{"Gating vs registers in a small ViT on Fashion-MNIST (NOP-vs-broadcast paper §5): vanilla, gated (G1), "
               "registers, gated_registers; sink diagnostics per layer and a dense linear probe.",
               "vit_sinks"};
  experiment::add_common_flags(app, flags);
  std::vector<std::string> variants;
  app.add_option("--variants", variants, "comma-separated variants (default: vanilla, gated, registers, gated_registers)")
      ->delimiter(',');
  app.add_option("--data-dir", s.data_dir, "Fashion-MNIST folder (default: ${SINKLAB_DATA:-~/.cache/sinklab}/fashion-mnist, "
                                           "then /usr/share/datasets/fashion-mnist)");
  app.add_flag("!--no-plots", s.plots, "write no figures");
  app.add_flag("--smoke", s.smoke, "seconds: built-in synthetic images, a tiny model, a few steps (the CTest smoke test)");
  const auto R = [](int64_t lo, int64_t hi) { return CLI::Range(lo, hi); };
  app.add_option("--d-model", s.d_model, "model width")->check(R(2, 4096))->capture_default_str();
  app.add_option("--layers", s.layers, "encoder layers")->check(R(1, 128))->capture_default_str();
  app.add_option("--heads", s.heads, "attention heads (must divide --d-model)")->check(R(1, 256))->capture_default_str();
  app.add_option("--patch", s.patch, "patch side (divides 28)")->check(CLI::IsMember({1, 2, 4, 7, 14, 28}))->capture_default_str();
  app.add_option("--registers", s.registers, "register tokens of the register variants")->check(R(1, 64))->capture_default_str();
  app.add_option("--batch", s.batch, "training images per step")->check(R(1, 1 << 16))->capture_default_str();
  examples::add_optimiser_flags(app, s);  // then cosine decay to 0
  app.add_option("--eval-every", s.eval_every, "steps between evaluations")->check(R(1, int64_t{1} << 40))->capture_default_str();
  app.add_option("--test-images", s.test_images, "test images for accuracy and loss (0: all)")
      ->check(R(0, 1 << 20))->capture_default_str();
  app.add_option("--probe-images", s.probe_images, "test images whose attention the per-layer measures read")
      ->check(R(1, 4096))->capture_default_str();
  app.add_option("--dense-train", s.dense_train, "training images of the dense probe")->check(R(1, 1 << 20))->capture_default_str();
  app.add_option("--dense-test", s.dense_test, "test images of the dense probe")->check(R(1, 1 << 20))->capture_default_str();
  app.add_option("--dense-steps", s.dense_steps, "AdamW steps of the dense probe (512 patches each)")
      ->check(R(1, 1 << 24))->capture_default_str();
  app.add_option("--dense-lr", s.dense_lr, "the dense probe's learning rate")->check(CLI::Range(1e-7, 10.0))->capture_default_str();
  app.add_option("--foreground", s.foreground, "a patch with mean pixel at least this is foreground")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
  using experiment::preset;
  if (flags.quick) {
    preset(app, "--steps", flags.steps, 400);
    preset(app, "--layers", s.layers, 4);
    preset(app, "--eval-every", s.eval_every, 100);
    preset(app, "--test-images", s.test_images, 2000);
    preset(app, "--dense-train", s.dense_train, 2000);
    preset(app, "--dense-test", s.dense_test, 1000);
    preset(app, "--dense-steps", s.dense_steps, 600);
    if (app.count("--seeds") == 0) flags.seeds = {0};
  }
  if (s.smoke) {
    preset(app, "--steps", flags.steps, 6);
    preset(app, "--d-model", s.d_model, 16);
    preset(app, "--layers", s.layers, 2);
    preset(app, "--heads", s.heads, 2);
    preset(app, "--patch", s.patch, 7);
    preset(app, "--registers", s.registers, 2);
    preset(app, "--batch", s.batch, 16);
    preset(app, "--eval-every", s.eval_every, 3);
    preset(app, "--test-images", s.test_images, 0);
    preset(app, "--probe-images", s.probe_images, 8);
    preset(app, "--dense-train", s.dense_train, 40);
    preset(app, "--dense-test", s.dense_test, 20);
    preset(app, "--dense-steps", s.dense_steps, 20);
    if (app.count("--seeds") == 0) flags.seeds = {0};
  }

  try {
    SINKLAB_CHECK(s.d_model % s.heads == 0, "vit_sinks: --heads ", s.heads, " does not divide --d-model ", s.d_model);
    if (variants.empty()) variants = kVariants;
    for (const auto& v : variants) parse_variant(v);  // names the bad one before anything runs
    if (flags.threads > 0) set_num_threads(flags.threads);

    Data d;
    std::string source;
    if (s.smoke) {
      d.train = synthetic_shapes(400, 1);
      d.test = synthetic_shapes(200, 2);
      source = "built-in synthetic images (10 classes of shapes; --smoke)";
      std::printf("data: built-in synthetic images for the smoke test (10 classes of shapes, %lld training and %lld "
                  "test images), not Fashion-MNIST\n",
                  static_cast<long long>(d.train.size()), static_cast<long long>(d.test.size()));
    } else {
      std::optional<fs::path> dir;
      if (!s.data_dir.empty()) dir = fs::path(s.data_dir);
      d.train = data::load_fashion_mnist(data::FashionSplit::Train, dir);
      d.test = data::load_fashion_mnist(data::FashionSplit::Test, dir);
      source = "Fashion-MNIST";
      std::printf("data: Fashion-MNIST, %lld training and %lld test images\n", static_cast<long long>(d.train.size()),
                  static_cast<long long>(d.test.size()));
    }
    s.probe_images = std::min<int64_t>(s.probe_images, d.test.size());
    {
      const int64_t n = s.probe_images, px = d.test.images.size(1) * d.test.images.size(2);
      d.probe = Tensor<float>::empty({n, d.test.images.size(1), d.test.images.size(2)});
      std::copy(d.test.images.data(), d.test.images.data() + n * px, d.probe.data());
    }

    Context c;
    c.s = &s;
    c.d = &d;
    c.steps = flags.steps;
    c.cfg.image_h = 28;
    c.cfg.image_w = 28;
    c.cfg.patch = s.patch;
    c.cfg.classes = 10;
    c.cfg.d_model = s.d_model;
    c.cfg.layers = s.layers;
    c.cfg.heads = s.heads;
    c.cfg.tokens.count = s.registers;
    const int64_t patches = (28 / s.patch) * (28 / s.patch);
    std::printf("model: ViT, %lld layers, d = %lld, %lld heads, %lldx%lld patches (%lld + CLS; %lld registers in the "
                "register variants), pre-norm LayerNorm, GELU MLP; batch %lld, AdamW %g (wd %g), warmup %g + cosine; "
                "%lld steps per run, %zu variant(s) x %zu seed(s)\n",
                static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.heads),
                static_cast<long long>(s.patch), static_cast<long long>(s.patch), static_cast<long long>(patches),
                static_cast<long long>(s.registers), static_cast<long long>(s.batch), s.lr, s.weight_decay, s.warmup,
                static_cast<long long>(flags.steps), variants.size(), flags.seeds.size());

    experiment::Matrix m("vit_sinks", flags, variants, settings_json(s, source), argc, argv);
    const bool complete = m.run([&](experiment::Run& r) { vit_sinks::run(r, c); });
    const Summary S{{m, s}, 1 + patches};
    std::string md = "# Gating vs registers in a ViT at " + std::to_string(s.layers) + " layers, d = " +
                     std::to_string(s.d_model) + "\n\n" + source + ", " + std::to_string(flags.steps) + " steps of " +
                     std::to_string(s.batch) + " images per run, seeds";
    for (auto seed : flags.seeds) md += " " + std::to_string(seed);
    md += ". Attention measures on the first " + std::to_string(s.probe_images) +
          " test images, averaged over layers and heads: sink score max_j mean_i A_ij (uniform attention gives 1/S = " +
          fixed(1.0 / double(1 + patches)) + " without registers), peak inflow (per image the largest column mass), "
          "where the inflow peak sits, the value-norm ratio ‖W_O v_ĵ‖ / mean_{j≠ĵ} ‖W_O v_j‖ at each image's inflow "
          "token ĵ, and the stable rank of the attention update. Dense probe: a linear classifier on the frozen final-norm "
          "patch tokens (" + std::to_string(s.dense_train) + " training, " + std::to_string(s.dense_test) +
          " test images; label per patch: background if its mean pixel < " + fixed(s.foreground, 2) +
          ", else 1 + the image's class), patch accuracy and mIoU over the classes present. The paper's figures are "
          "ViT-L LeJEPA on ImageNet-1k / ADE20K / VOC12: the comparison is of direction, not size.\n\n";
    md += tables(S) + claims(S);
    io::write_file_atomically(m.out() / "summary.md", md);
    std::printf("\n%s\nsummary: %s\n", md.c_str(), (m.out() / "summary.md").string().c_str());
    if (s.plots) figures(S, m.out());
    if (!complete) return 130;
  } catch (const std::exception& e) {
    examples::print_error("vit_sinks", e);
    return 1;
  }
  return 0;
}
