// Value-State Gated Attention on Bigram-Backcopy (VGA paper §4.1, Figs. 4–6, App. D; docs/papers.md):
// a vanilla transformer, IGA, VGA (gate on each key's value, and on the head output), a learnable
// sink logit and a register token, all from the same initial weights on the same data stream,
// tracking the attention sink on <s> and the value-state drain that goes with it.
//
//   vga_bigram_backcopy [--steps 2000] [--seeds 0,1,2] [--variants vanilla,iga,vga_values,...]
//                       [--batch 64] [--init pytorch|normal] [--out DIR] [--resume|--force] ...
//
// Model (Guo et al.'s BBM code): pre-LN (LayerNorm), 1 head, causal, no biases in the linear
// maps, ReLU FFN d→4d→d, learned absolute positions, untied LM head. Init: PyTorch's module
// defaults by default (--init pytorch: Embedding and positions N(0, 1), Linear U(±1/√fan_in),
// LayerNorm γ = 1, β = 0 trained), which is what that code gets; --init normal is every matrix
// N(0, 0.02) with LayerNorm shifts frozen at 0 (the sink forms far more slowly there).
// Gates g = σ(S·W_g), one per head and token, S = the layer input X (IGA) or the values V
// (VGA), W_g zero-initialised and no bias, so every gate starts at 0.5 (the paper publishes no
// init; this is the neutral choice). The learnable sink adds one logit S_h per head to the
// softmax's normaliser (gpt-oss; starts at 0); the register variant prepends one learnable
// token (N(0, 1) under --init pytorch) before <s>. AdamW lr 3e-4, wd 1e-4, betas (0.9, 0.99).
//
// Output (--out): the harness's run directories (runs/<variant>/seed<s>/ with metrics.jsonl/csv,
// final.safetensors, attn.dat and value_norms.csv of eval sequence 0), dynamics_<variant>.csv
// (mean/min/max over seeds), summary.md (table + claims), plots.gp and PNGs.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "../common/error_line.hpp"
#include "../common/optim_flags.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/data/brown.hpp"
#include "sinklab/io/files.hpp"
#include "study.hpp"

using namespace sinklab;
namespace ex = sinklab::experiment;
namespace fs = std::filesystem;

namespace vga_bigram_backcopy {

void run(ex::Run& r, const Context& c, const ex::TensorBank& reference) {
  if (!detail::run_plain(r, c, reference) && !detail::run_gated(r, c, reference))
    sinklab::detail::fail("vga_bigram_backcopy: unknown variant '", r.variant(), "'");
}

}  // namespace vga_bigram_backcopy

namespace {

using namespace vga_bigram_backcopy;

// ---------------------------------------------------------------------------------------------
// Variants

struct Variant {
  const char* name;
  const char* description;
};
const std::vector<Variant> kVariants = {
    {"vanilla", "vanilla softmax attention"},
    {"iga", "IGA: g_j = sigmoid(X_j W_g) on each key's value"},
    {"vga_values", "VGA: g_j = sigmoid(V_j W_g) on each key's value (eq. 4/6)"},
    {"vga_output", "VGA: g_i = sigmoid(V_i W_g) on each query's head output (App. B)"},
    {"sink", "learnable sink: one logit per head in the softmax normaliser, no value"},
    {"register", "one learnable register token prepended before <s>"},
};
std::vector<std::string> variant_names() {
  std::vector<std::string> v;
  for (const auto& x : kVariants) v.push_back(x.name);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Metrics

struct Column {
  const char* name;   // key in the logs
  const char* title;  // plots and tables
};
// What every evaluation logs (after step and train_loss), in order.
const std::vector<Column> kColumns = {
    {"loss", "eval loss"},
    {"bigram_risk", "bigram risk"},
    {"backcopy_risk", "backcopy risk"},
    {"attn_sink", "Attn_<s>"},
    {"attn_extra", "Attn to sink logit / register"},
    {"attn_triggers", "Attn to triggers"},
    {"val_sink", "‖v_<s>‖"},
    {"val_sink_ratio", "‖v_<s>‖ / others"},
    {"wo_val_sink", "‖W_O v_<s>‖"},
    {"wo_val_sink_ratio", "‖W_O v_<s>‖ / others"},
    {"delta_logit", "Δlogit_<s>"},
    {"gate_sink", "gate at <s>"},
    {"gate_rest", "gate at other tokens"},
    {"grad_v_sink_ratio", "‖∂L/∂v_<s>‖ / others"},
};
std::vector<std::string> column_names() {
  std::vector<std::string> v;
  for (const auto& c : kColumns) v.push_back(c.name);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Summary, claims and figures

std::string title_of(const std::string& name) {
  for (const auto& c : kColumns)
    if (name == c.name) return c.title;
  return name;
}

bool has(const std::vector<std::string>& order, const std::string& v) {
  return std::find(order.begin(), order.end(), v) != order.end();
}

std::vector<ex::Claim> claims(const ex::Matrix& m, const std::vector<std::string>& order) {
  std::vector<ex::Claim> out;
  auto spread = [&](const std::string& v, const std::string& k) { return m.spread(v, k); };
  auto all_below = [](const std::vector<double>& d, double by) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [&](double x) { return x < -by; });
  };
  if (has(order, "vanilla")) {
    const ex::Spread a = spread("vanilla", "attn_sink");
    out.push_back({"vanilla: non-trigger queries sink onto <s>", "Attn_<s> rises toward 1 (Figs. 4a, 5)",
                   "Attn_<s> " + a.str(), ex::verdict_at_least(a.mean, 0.8, 0.5),
                   "mean ≥ 0.8 reproduced, ≥ 0.5 partly"});
    const ex::Spread r = spread("vanilla", "val_sink_ratio");
    out.push_back({"vanilla: the value state of <s> drains", "‖Val_<s>‖ collapses toward 0 (Figs. 4b, 5)",
                   "‖v_<s>‖ / others " + r.str(), ex::verdict_at_most(r.mean, 0.5, 0.8),
                   "ratio ≤ 0.5 reproduced, ≤ 0.8 partly"});
    const ex::Spread d = spread("vanilla", "delta_logit");
    out.push_back({"vanilla: Δlogit_<s> grows with the sink", "Δlogit_<s> increases steadily (Fig. 5)",
                   "final Δlogit_<s> " + d.str(2), ex::verdict_at_least(d.min, 2.0, 0.5),
                   "every seed ≥ 2 reproduced, ≥ 0.5 partly"});
  }
  // Preventing a sink is testable only where the vanilla model of the same seeds formed one.
  const bool vanilla_sinks = has(order, "vanilla") && spread("vanilla", "attn_sink").mean >= 0.5;
  const std::string untested = vanilla_sinks ? "" : " (untestable here: vanilla formed no sink)";
  for (const std::string v : {"vga_values", "vga_output"}) {
    if (!has(order, v) || !has(order, "vanilla")) continue;
    const auto da = m.paired(v, "vanilla", "attn_sink");
    const ex::Spread a = ex::summarize(da);
    out.push_back({v + ": no sink on <s>", "Attn_<s> stays at a healthy level (Fig. 4a)",
                   "Attn_<s> " + spread(v, "attn_sink").str() + "; paired change vs vanilla " + a.str(),
                   !vanilla_sinks         ? ex::Verdict::Untestable
                   : all_below(da, 0.2)   ? ex::Verdict::Reproduced
                   : all_below(da, 0.05)  ? ex::Verdict::Partly
                                          : ex::Verdict::Not,
                   "below vanilla by > 0.2 in every seed reproduced, by > 0.05 partly" + untested});
    const ex::Spread r = spread(v, "val_sink_ratio");
    out.push_back({v + ": ‖v_<s>‖ comparable to other tokens", "no value-state drain (Fig. 4b)",
                   "‖v_<s>‖ / others " + r.str(),
                   vanilla_sinks ? ex::verdict_at_least(r.min, 0.8, 0.5) : ex::Verdict::Untestable,
                   "every seed ≥ 0.8 reproduced, ≥ 0.5 partly" + untested});
    const auto db = m.paired(v, "vanilla", "backcopy_risk"), dg = m.paired(v, "vanilla", "bigram_risk");
    const ex::Spread sb = ex::summarize(db), sg = ex::summarize(dg);
    out.push_back({v + ": learns the task equally well", "same backcopy and bigram risk (Fig. 5)",
                   "paired Δ backcopy " + sb.short_str() + ", Δ bigram " + sg.short_str(),
                   std::max(std::abs(sb.mean), std::abs(sg.mean)) <= 0.02 ? ex::Verdict::Reproduced
                   : std::max(sb.mean, sg.mean) <= 0.1                   ? ex::Verdict::Partly
                                                                         : ex::Verdict::Not,
                   "|mean Δ| ≤ 0.02 nats reproduced, ≤ 0.1 worse partly"});
  }
  // Eq. 8: under the value gate the gradient that reaches V_<s> is g_s times the vanilla path, so it
  // vanishes as the gate at <s> closes; in vanilla the sink's value takes the pull of every query
  // that rests on it (the drain). Paired per seed: the gated run's ratio over vanilla's.
  for (const std::string v : {"vga_values", "iga"}) {
    if (!has(order, v) || !has(order, "vanilla")) continue;
    const std::vector<double> fold = m.paired_by(v, "vanilla", [](const auto& r, const auto& b) {
      return r.metric("grad_v_sink_ratio") / b.metric("grad_v_sink_ratio");
    });
    if (fold.empty() || std::any_of(fold.begin(), fold.end(), [](double x) { return !std::isfinite(x); })) continue;
    const ex::Spread f = ex::summarize(fold);
    const bool all10 = std::all_of(fold.begin(), fold.end(), [](double x) { return x < 0.1; }),
               all2 = std::all_of(fold.begin(), fold.end(), [](double x) { return x < 0.5; });
    out.push_back({v + ": the gradient to V_<s> is severed (eq. 8)",
                   v == "vga_values" ? "∂L/∂V_s → 0 as g_s → 0 (§3.3, eq. 8)"
                                     : "§3.3 argues it for VGA; IGA's gate multiplies the same content path",
                   "‖∂L/∂v_<s>‖ / others: " + spread(v, "grad_v_sink_ratio").str(2) + " vs vanilla " +
                       spread("vanilla", "grad_v_sink_ratio").str(2) + "; paired ratio " + f.str(3) +
                       "; gate at <s> " + spread(v, "gate_sink").short_str(3),
                   !vanilla_sinks ? ex::Verdict::Untestable
                   : all10        ? ex::Verdict::Reproduced
                   : all2         ? ex::Verdict::Partly
                                  : ex::Verdict::Not,
                   "gated over vanilla below 0.1 in every seed reproduced, below 0.5 partly" + untested});
  }
  if (has(order, "iga") && has(order, "vga_values") && has(order, "vanilla")) {
    const double van = spread("vanilla", "attn_sink").mean, iga = spread("iga", "attn_sink").mean,
                 vga = spread("vga_values", "attn_sink").mean;
    char buf[128];
    std::snprintf(buf, sizeof buf, "Attn_<s>: vanilla %.3f, IGA %.3f, VGA %.3f", van, iga, vga);
    const bool mitigates = all_below(m.paired("iga", "vanilla", "attn_sink"), 0.02),
               less = all_below(m.paired("vga_values", "iga", "attn_sink"), 0.02);
    out.push_back({"IGA mitigates, but less than VGA", "IGA between vanilla and VGA (App. D, Fig. 6)", buf,
                   !vanilla_sinks       ? ex::Verdict::Untestable
                   : mitigates && less  ? ex::Verdict::Reproduced
                   : mitigates || less  ? ex::Verdict::Partly
                                        : ex::Verdict::Not,
                   "Attn_<s> vanilla > IGA > VGA by > 0.02 in every seed (paired) reproduced, one of the two partly" +
                       untested});
  }
  return out;
}

void write_outputs(const ex::Matrix& m, const Settings& s, const std::vector<std::string>& order,
                   const std::vector<std::string>& labels, int layer) {
  const fs::path out = m.out();
  std::vector<std::string> done;
  for (const auto& v : order)
    if (!m.of(v).empty()) done.push_back(v);
  if (done.empty()) return;
  const std::vector<std::string> cols = {"bigram_risk",    "backcopy_risk", "attn_sink",        "attn_extra",
                                         "attn_triggers",  "val_sink_ratio", "wo_val_sink_ratio", "delta_logit",
                                         "gate_sink",      "grad_v_sink_ratio"};
  std::vector<std::string> header{"variant", "seeds"};
  for (const auto& c : cols) header.push_back(title_of(c));
  ex::Table t(header);
  io::CsvLog csv(out / "summary.csv");
  for (const auto& v : done) {
    std::vector<std::string> row{v, std::to_string(m.of(v).size())};
    io::LogRow cr{{"variant", v}, {"seeds", static_cast<int64_t>(m.of(v).size())}};
    for (const auto& c : cols) {
      const ex::Spread sp = ex::summarize(m.finals(v, c));
      row.push_back(sp.short_str());
      cr.emplace_back(c + "_mean", sp.mean);
      cr.emplace_back(c + "_sd", sp.sd);
      cr.emplace_back(c + "_min", sp.min);
      cr.emplace_back(c + "_max", sp.max);
    }
    t.row(row);
    csv.log(cr);
    ex::write_dynamics(out / ("dynamics_" + v + ".csv"), m.of(v), column_names());
  }
  const auto cl = claims(m, done);
  std::string md = "# Bigram-Backcopy: final metrics on the eval batch (layer " + std::to_string(layer) +
                   "; mean ± sd over seeds)\n\n" + t.markdown() + "\n## Claims of the VGA paper (§4.1, App. D)\n\n" +
                   ex::claims_table(cl) + "\nSettings: " + s.json().dump() + "\n";
  io::write_file_atomically(out / "summary.md", md);
  std::printf("\nFinal metrics on the eval batch (layer %d; mean ± sd over seeds):\n%s", layer, t.text().c_str());
  std::printf("\nClaims:\n");
  for (const auto& c : cl) std::printf("  %-15s %s: %s\n", ex::to_string(c.verdict), c.claim.c_str(), c.ours.c_str());

  if (!s.plots) return;
  ex::Figures fig(out);
  std::vector<ex::Figures::Series> series;
  for (const auto& v : done) series.push_back({v, "dynamics_" + v + ".csv"});
  const std::string setting = std::to_string(s.layers) + " layer(s), d " + std::to_string(s.d_model) + ", T " +
                              std::to_string(s.seq_len) + ", batch " + std::to_string(s.batch) + ", init " + s.init +
                              ", " + std::to_string(m.seeds().size()) + " seed(s): mean, band = min..max";
  fig.dynamics("dynamics.png", "Bigram-Backcopy training dynamics (" + setting + ")",
               {{"backcopy_risk", "backcopy risk", true},
                {"bigram_risk", "bigram risk", true},
                {"attn_sink", "Attn_<s> (non-trigger queries)"},
                {"attn_extra", "attention to the sink logit / register"},
                {"attn_triggers", "attention to trigger keys"},
                {"delta_logit", "Delta logit_<s>"},
                {"val_sink", "||v_<s>||"},
                {"val_sink_ratio", "||v_<s>|| / mean of other tokens"},
                {"gate_sink", "gate at <s> (1 = no gate)"},
                {"grad_v_sink_ratio", "||dL/dv_<s>|| / mean of other tokens", true}},
               series);
  const std::string first = "seed" + std::to_string(m.seeds().front());
  std::vector<ex::Figures::Series> maps;
  for (const auto& v : done) maps.push_back({v, "runs/" + v + "/" + first + "/attn.dat"});
  fig.heatmaps("attention.png",
               "Attention of eval sequence 0 (" + first + ", layer " + std::to_string(layer) + "); rows = queries",
               maps, {.labels = labels});
  // Fig. 4(b)-like: value norms per token, triggers hatched, gate on the right axis.
  std::string gp;
  const auto n = labels.size();
  std::string tics = "(";
  for (std::size_t i = 0; i < n; ++i) tics += (i ? ", " : "") + ex::gp_quote(labels[i]) + " " + std::to_string(i);
  tics += ")";
  // One y-range for every panel (the largest norm of any variant), so panels compare by eye.
  gp += "set datafile separator ','\nnorm_max = 0\n";
  for (const auto& v : done)
    gp += "stats " + ex::gp_quote("runs/" + v + "/" + first + "/value_norms.csv") +
          " skip 1 using 3 nooutput\nnorm_max = STATS_max > norm_max ? STATS_max : norm_max\n";
  gp += "set terminal " + fig.terminal() + " size 1400," + std::to_string(250 * done.size() + 60) +
        "\nset output 'value_norms.png'\nset multiplot layout " + std::to_string(done.size()) + ",1 title " +
        ex::gp_quote("||v_j|| per token of eval sequence 0 (" + first + ", layer " + std::to_string(layer) +
                     "); one y-axis for all; hatched = trigger, dots = gate (right axis)") +
        "\nset grid ytics\nset key top right opaque box\nset xrange [-0.7:" + std::to_string(n) +
        "]\nset yrange [0:1.05 * norm_max]\nset xtics " + tics +
        " font ',9'\nset ytics nomirror\nset boxwidth 0.8\nset y2range [0:1.05]\nset y2tics 0, 0.25, 1\n"
        "set y2label 'gate'\nset ylabel '||v_j||'\n";
  for (std::size_t i = 0; i < done.size(); ++i) {
    const std::string f = ex::gp_quote("runs/" + done[i] + "/" + first + "/value_norms.csv");
    const std::string colour = ex::palette(i);
    gp += "set title " + ex::gp_quote(done[i]) + "\nset style fill solid 0.8 border -1\nplot " + f +
          " skip 1 using 1:($2 == 0 ? $3 : 1/0) with boxes lc rgb '" + colour + "' title '||v_j||', " + f +
          " skip 1 using 1:($2 != 0 ? $3 : 1/0) with boxes fs pattern 4 lc rgb '" + colour + "' notitle";
    if (done[i].find("ga") != std::string::npos)
      gp += ", " + f + " skip 1 using 1:5 axes x1y2 with linespoints pt 7 ps 0.6 lc rgb 'black' title 'gate'";
    gp += "\n";
  }
  gp += "unset multiplot\nunset y2tics\nunset y2label\nset xtics autofreq\n";
  fig.script(gp, "value_norms.png");
  fig.render();
}

// ---------------------------------------------------------------------------------------------
// Text source

// Used only with --smoke (tests, CI without network): a short text written for this purpose.
const char* kSmokeText =
    "the quick brown fox jumps over the lazy dog while seven tired owls watch from an old oak tree.\n"
    "a small boat drifts along the quiet river; the ferryman hums, counts his coins and waits.\n"
    "every morning the baker opens her shop at six, and the smell of fresh bread fills the street.\n";

std::string load_text(const Settings& s) {
  if (!s.text_file.empty()) {
    std::printf("text: %s\n", s.text_file.c_str());
    return io::read_file_text(s.text_file);
  }
  if (s.smoke) {
    std::printf("text: the built-in smoke-test paragraph (--smoke; NOT the Brown corpus, results are meaningless)\n");
    return kSmokeText;
  }
  std::optional<fs::path> dir;
  if (!s.brown_dir.empty()) dir = fs::path(s.brown_dir);
  std::vector<fs::path> files;
  try {
    files = data::find_brown_files(dir);
  } catch (const Error& e) {
    std::fprintf(stderr,
                 "vga_bigram_backcopy: the Brown corpus is missing.\n  %s\n"
                 "  Fetch it with `scripts/fetch-data.sh brown` (`make demo` does this), point --brown-dir at it,\n"
                 "  or train on any plain text with --text FILE.\n",
                 e.what());
    std::exit(2);
  }
  std::string text = data::load_brown_text(dir);
  std::printf("text: Brown corpus, %zu files from %s (%.1f MB of untagged sentences)\n", files.size(),
              files.front().parent_path().string().c_str(), double(text.size()) / 1e6);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"sinklab: attention sinks and value-state drains on Bigram-Backcopy (VGA paper §4.1): vanilla, IGA, "
               "VGA, learnable sink and register token, paired over seeds",
               "vga_bigram_backcopy"};
  ex::add_common_flags(app, s.flags);
  app.add_option("--batch", s.batch, "sequences per training batch")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--seq-len", s.seq_len, "tokens per sequence (T)")->check(CLI::Range(8, 4096))->capture_default_str();
  app.add_option("--layers", s.layers, "transformer layers")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--d-model", s.d_model, "model width (one head of this size)")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  app.add_option("--variants", s.variants, "comma-separated subset of " + ex::Json(variant_names()).dump())
      ->delimiter(',')
      ->check(CLI::IsMember(variant_names()))
      ->capture_default_str();
  app.add_option("--init", s.init,
                 "initialisation: pytorch (the reference code's module defaults) or normal (N(0, 0.02), LayerNorm "
                 "shifts frozen)")
      ->check(CLI::IsMember({"pytorch", "normal"}))
      ->capture_default_str();
  examples::add_optimiser_flags(app, s);  // a constant rate
  app.add_option("--log-every", s.log_every, "evaluate and log every N steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--eval-batch", s.eval_batch, "sequences in the fixed eval batch")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--eval-seed", s.eval_seed, "seed of the fixed eval batch (shared by all runs)")->capture_default_str();
  app.add_option("--probe-layer", s.probe_layer,
                 "layer whose attention is measured; -1: 0 with one layer, else 1 (the copy layer of the paper's "
                 "3-layer model; each run prints every layer's copy score to check)")
      ->capture_default_str();
  app.add_option("--text", s.text_file, "train on this plain-text file instead of the Brown corpus");
  app.add_option("--brown-dir", s.brown_dir, "folder of the Brown corpus (default: $SINKLAB_DATA/brown)");
  app.add_flag("--smoke", s.smoke, "use a tiny built-in text when no --text is given (tests; results meaningless)");
  app.add_flag("!--no-plots", s.plots, "skip the gnuplot figures");
  if (const int rc = ex::parse(app, argc, argv); rc >= 0) return rc;
  if (s.flags.quick) {  // a few minutes: the calibrated model, fewer steps, vanilla vs the gates
    ex::preset(app, "--steps", s.flags.steps, 600);
    ex::preset(app, "--variants", s.variants, std::vector<std::string>{"vanilla", "iga", "vga_values"});
  }

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also through a pipe
  try {
    const int layer = s.probe_layer >= 0 ? s.probe_layer : (s.layers > 1 ? 1 : 0);
    SINKLAB_CHECK(layer < s.layers, "--probe-layer ", layer, " but the model has ", s.layers,
                  " layers");
    std::vector<std::string> order;
    for (const auto& v : variant_names())
      if (has(s.variants, v)) order.push_back(v);
    const std::string text = load_text(s);  // before the output directory: a missing corpus leaves nothing behind
    ex::Matrix matrix("vga_bigram_backcopy", s.flags, order, s.json(), argc, argv);
    const data::BigramBackcopy task(text, {.seq_len = s.seq_len});
    std::string trig;
    for (int32_t t : task.triggers()) trig += (trig.empty() ? "" : " ") + token_label(task, t);
    std::printf("task: Bigram-Backcopy, %d characters + <s> + unused = %d tokens, triggers {%s}, T = %lld\n",
                task.num_chars(), task.vocab_size(), trig.c_str(), static_cast<long long>(s.seq_len));

    EvalSet ev;
    {
      Rng er(s.eval_seed);
      auto b = task.sample(er, s.eval_batch);
      ev.x = b.x;
      ev.y = b.y;
      ev.non_trigger = task.bigram_mask(ev.x);
      ev.trigger = task.trigger_mask(ev.x);
    }
    Context ctx{s, task, ev, {}, layer};
    ctx.cfg.vocab = task.vocab_size();
    ctx.cfg.d_model = s.d_model;
    ctx.cfg.layers = s.layers;
    ctx.cfg.heads = 1;
    ctx.cfg.ffn_hidden = 4 * s.d_model;
    ctx.cfg.max_len = s.seq_len;
    ctx.cfg.init = s.init == "pytorch" ? nn::Init::pytorch() : nn::Init::normal(0.02);
    ctx.cfg.tokens = {.count = 1, .placement = tokens::Placement::Prepend, .init = ctx.cfg.init};
    std::printf(
        "model: %lld layer(s), d = %lld, 1 head, ReLU FFN %lld->%lld->%lld, pre-LN, learned positions, "
        "%lld parameters (vanilla), init %s; AdamW lr %g wd %g betas (0.9, 0.99), batch %lld, %lld steps; "
        "%d thread(s)\n",
        static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.d_model),
        static_cast<long long>(4 * s.d_model), static_cast<long long>(s.d_model),
        static_cast<long long>(vanilla_parameters(ctx)), s.init.c_str(), s.lr, s.weight_decay,
        static_cast<long long>(s.batch), static_cast<long long>(s.flags.steps), num_threads());
    std::printf("probe: layer %d; Attn_<s> and Delta logit over the eval batch's non-trigger queries (t >= 1)\n",
                layer);
    for (const auto& v : order)
      for (const auto& x : kVariants)
        if (v == x.name) std::printf("  %-10s %s\n", x.name, x.description);

    std::vector<std::string> labels;
    for (int64_t j = 0; j < std::min<int64_t>(s.seq_len, 32); ++j) labels.push_back(token_label(task, ev.x(0, j)));
    std::printf("eval sequence 0: %s\n",
                task.decode(std::vector<int32_t>(ev.x.data(), ev.x.data() + labels.size())).c_str());
    std::printf("output: %s\n", matrix.out().string().c_str());

    std::optional<ex::TensorBank> reference;  // the seed's vanilla init: every variant starts from it
    uint64_t reference_seed = 0;
    matrix.run([&](ex::Run& r) {
      if (!reference || reference_seed != r.seed()) {
        reference = vanilla_init(ctx, r.seed());
        reference_seed = r.seed();
      }
      vga_bigram_backcopy::run(r, ctx, *reference);
    });
    write_outputs(matrix, s, order, labels, layer);
    std::printf("outputs in %s\n", matrix.out().string().c_str());
    if (matrix.interrupted()) return 130;
  } catch (const std::exception& e) {
    examples::print_error("vga_bigram_backcopy", e);
    return 1;
  }
  return 0;
}
