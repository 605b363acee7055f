// Value-State Gated Attention on Bigram-Backcopy (VGA paper §4.1, Figs. 4–6, App. D; PAPERS.md §1):
// trains a vanilla transformer, IGA and VGA (gate on each key's value, and on the head output)
// from the same initial weights on the same data stream, and tracks the attention sink on <s>
// and the value-state drain that goes with it.
//
//   vga_bigram_backcopy [--steps N] [--seeds 0,1,2] [--variants vanilla,iga,vga_values,vga_output]
//                       [--layers L] [--d-model D] [--batch B] [--seq-len T] [--out DIR] ...
//
// Model: pre-LN (LayerNorm, biases frozen at 0), 1 head, causal, ReLU FFN d→4d→d, learned
// absolute positions, untied LM head, N(0, 0.02) init. Gates g = σ(S·W_g) with one gate per head
// and token, S = the layer input X (IGA) or the values V (VGA), W_g zero-initialised and no bias,
// so every gate starts at 0.5. IGA gates each key's value before aggregation, as in the paper's
// eq. (4): z_i = Σ_j g_j α_ij V_j. AdamW (lr 3e-4, wd 1e-4, betas 0.9/0.99), constant lr.
//
// Writes into --out: metrics_<variant>_seed<s>.csv (every --log-every steps), dynamics_<variant>.csv
// (mean, min and max over seeds), attn_<variant>.dat and value_norms_<variant>.csv (one eval
// sequence, first seed), summary.csv / summary.md, and with gnuplot plots.gp and three PNGs.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/data/bigram_backcopy.hpp"
#include "sinklab/data/brown.hpp"
#include "sinklab/io/files.hpp"
#include "sinklab/io/metrics_log.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/delta_logit.hpp"
#include "sinklab/probe/value_norms.hpp"

using namespace sinklab;
using autodiff::Parameter;
using autodiff::Tape;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Models

template <class Gate>
using Model = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<score::Softmax, Gate>, ffn::ReluMLP,
                              pos::Learned>;
using Vanilla = Model<gate::None>;
using IGA = Model<gate::FromInput<gate::per_head, gate::on_values>>;
using VGAValues = Model<gate::FromValue<gate::per_head, gate::on_values>>;
using VGAOutput = Model<gate::FromValue<gate::per_head, gate::on_output>>;

// W_g = 0 and no bias: σ(0) = 0.5 everywhere at init, for IGA and VGA alike, so the gated models
// start as the vanilla one with halved attention output and differ from each other only in the
// gate's source (the paper publishes no init; this is the neutral choice).
constexpr gate::Init kGateInit{gate::WeightInit::Zero, 0.02, gate::BiasInit::None};

const std::vector<std::string> kAllVariants = {"vanilla", "iga", "vga_values", "vga_output"};

std::string describe_variant(const std::string& v) {
  if (v == "vanilla") return "vanilla softmax attention";
  if (v == "iga") return "IGA: g_j = sigmoid(X_j W_g) on each key's value";
  if (v == "vga_values") return "VGA: g_j = sigmoid(V_j W_g) on each key's value (eq. 4/6)";
  return "VGA: g_i = sigmoid(V_i W_g) on each query's head output (App. B)";
}

// ---------------------------------------------------------------------------------------------
// Settings, metrics and results

struct Settings {
  // Defaults: the calibrated setting (PAPERS.md §1: 1 layer, d = 128, 1 head, T = 64) at batch 32
  // instead of 64 so that 4 variants × 3 seeds fit `make demo`'s 10 minutes on 2 cores
  // (docs/results/vga-bigram-backcopy.md has the timings); --batch 64 --steps 2000 is the
  // calibration run itself.
  int steps = 1000;
  int64_t batch = 32, seq_len = 64, d_model = 128, layers = 1, eval_batch = 64;
  std::vector<uint64_t> seeds{0, 1, 2};
  std::vector<std::string> variants = kAllVariants;
  double lr = 3e-4, weight_decay = 1e-4;
  int log_every = 50;
  int probe_layer = -1;  // -1: 0 with one layer, else 1 (the copy layer, see --probe-layer)
  int threads = 0;
  uint64_t eval_seed = 20240917;
  std::string out = "out/vga";
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
};

// One evaluation on the fixed eval batch.
struct Metrics {
  double loss = 0;
  double bigram = 0, backcopy = 0;  // risks (nats)
  double attn_sink = 0;             // Attn_<s>: mean attention to key 0 over non-trigger queries
  double attn_triggers = 0;         // mean total attention of the same queries to trigger keys
  double val_sink = 0;              // ‖v_<s>‖
  double val_ratio = 0;             // ‖v_<s>‖ / mean_{j≠0} ‖v_j‖
  double wo_val_sink = 0;           // ‖W_O v_<s>‖
  double wo_val_ratio = 0;          // ‖W_O v_<s>‖ / mean_{j≠0} ‖W_O v_j‖
  double delta_logit = 0;           // Δlogit_<s> over non-trigger queries
  double gate_sink = 1, gate_rest = 1;  // mean gate at token 0 / at the other tokens (1: no gate)
};

struct MetricColumn {
  const char* name;   // CSV column
  const char* title;  // plot / table title
  double Metrics::*field;
};
const std::vector<MetricColumn> kColumns = {
    {"loss", "eval loss", &Metrics::loss},
    {"bigram_risk", "bigram risk", &Metrics::bigram},
    {"backcopy_risk", "backcopy risk", &Metrics::backcopy},
    {"attn_sink", "Attn_<s>", &Metrics::attn_sink},
    {"attn_triggers", "Attn to triggers", &Metrics::attn_triggers},
    {"val_sink", "||v_<s>||", &Metrics::val_sink},
    {"val_sink_ratio", "||v_<s>|| / others", &Metrics::val_ratio},
    {"wo_val_sink", "||W_O v_<s>||", &Metrics::wo_val_sink},
    {"wo_val_sink_ratio", "||W_O v_<s>|| / others", &Metrics::wo_val_ratio},
    {"delta_logit", "Delta logit_<s>", &Metrics::delta_logit},
    {"gate_sink", "gate at <s>", &Metrics::gate_sink},
    {"gate_rest", "gate at other tokens", &Metrics::gate_rest},
};

bool all_finite(const Metrics& m) {
  for (const auto& c : kColumns)
    if (!std::isfinite(m.*c.field)) return false;
  return true;
}

// What the end of a run shows about one eval sequence.
struct Snapshot {
  int64_t n = 0;                          // tokens shown
  std::vector<double> attention;          // n×n, row = query
  std::vector<double> value_norm, wo_value_norm, gate;  // per token
  std::vector<double> copy_score;         // per layer: attention of trigger queries to the token to copy
};

struct RunResult {
  std::vector<std::pair<int, Metrics>> history;
  Snapshot snapshot;
  double seconds = 0;
  int64_t shared_identical = 0, shared_total = 0;
};

struct EvalSet {
  Tensor<int32_t> x, y;
  Tensor<float> non_trigger;  // [B, T] queries Attn_<s> and Δlogit average over
  Tensor<float> trigger;      // [B, T]
};

// ---------------------------------------------------------------------------------------------
// Progress

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int total = static_cast<int>(s + 0.5);
  char buf[32];
  if (total >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", total / 60, total % 60);
  else std::snprintf(buf, sizeof buf, "%ds", total);
  return buf;
}

class Progress {
 public:
  explicit Progress(int64_t total_steps) : total_(total_steps), tty_(isatty(fileno(stdout)) != 0) {}

  void start_run() { run_start_ = Clock::now(); }
  // Called after each step; redraws the line on a terminal at most every 0.25 s.
  void step(const std::string& tag, int step, int steps, double loss) {
    ++done_;
    train_seconds_ += since(last_);
    last_ = Clock::now();
    if (!tty_) return;
    if (since(last_draw_) < 0.25 && step != steps) return;
    last_draw_ = Clock::now();
    std::printf("\r%s", line(tag, step, steps, loss).c_str());
    std::fflush(stdout);
  }
  void mark() { last_ = Clock::now(); }  // excludes evaluation time from the rate
  // A full line (after an evaluation).
  void report(const std::string& tag, int step, int steps, double loss, const Metrics& m) {
    std::printf("%s%s | bigram %.3f backcopy %.3f Attn<s> %.3f |v<s>| %.3f (%.2fx) dlogit %+.2f\n", tty_ ? "\r" : "",
                line(tag, step, steps, loss).c_str(), m.bigram, m.backcopy, m.attn_sink, m.val_sink, m.val_ratio,
                m.delta_logit);
    std::fflush(stdout);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  std::string line(const std::string& tag, int step, int steps, double loss) const {
    const double rate = train_seconds_ > 0 ? double(done_) / train_seconds_ : 0;
    const double eta = rate > 0 ? double(total_ - done_) / rate : NAN;
    char buf[160];
    std::snprintf(buf, sizeof buf, "[%s] step %5d/%d loss %.4f  %5.1f steps/s  ETA %s", tag.c_str(), step, steps, loss,
                  rate, format_duration(eta).c_str());
    return buf;
  }
  int64_t total_ = 0, done_ = 0;
  bool tty_ = false;
  double train_seconds_ = 0;
  Clock::time_point last_ = Clock::now(), last_draw_{}, run_start_{};
};

// ---------------------------------------------------------------------------------------------
// Evaluation

template <class M>
Metrics evaluate(M& model, const data::BigramBackcopy& task, const EvalSet& ev, int layer, Snapshot* snap) {
  autodiff::no_grad off;
  Tape<float> tape;
  nn::ModelProbe<float> probe;
  probe.attention = true;
  auto logits = model.logits(tape, ev.x, &probe);
  Metrics m;
  m.loss = autodiff::cross_entropy(logits, ev.y).item();
  const auto risk = task.risk(ev.x, ev.y, logits.value());
  m.bigram = risk.bigram;
  m.backcopy = risk.backcopy;

  const auto& rec = probe.layers[static_cast<std::size_t>(layer)].attn;
  const Tensor<float>& w_o = model.layers[static_cast<std::size_t>(layer)].attn.w_o.value;
  m.attn_sink = probe::attn_to_key(rec.weights, 0, ev.non_trigger).mean();
  m.delta_logit = probe::delta_logit(rec.logits, 0, ev.non_trigger).mean();
  {
    // Trigger tokens are never copied (the copy target is the token before a trigger), so they
    // are the other keys a head can park attention on; this says how much it does.
    const Tensor<float>& A = rec.weights;
    const int64_t B = A.size(0), H = A.size(1), T = A.size(2);
    double sum = 0;
    int64_t count = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 1; i < T; ++i) {
        if (ev.non_trigger(b, i) == 0.f) continue;
        ++count;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 1; j <= i; ++j)
            if (ev.trigger(b, j) != 0.f) sum += A(b, h, i, j) / double(H);
      }
    m.attn_triggers = count ? sum / double(count) : 0.0;
  }
  const Tensor<double> vn = probe::value_norms(rec.values);  // [H, T], batch means
  const Tensor<double> on = probe::output_value_norms(rec.values, w_o);
  double vs = 0, os = 0;
  for (int64_t h = 0; h < vn.size(0); ++h) {
    vs += vn(h, 0);
    os += on(h, 0);
  }
  m.val_sink = vs / double(vn.size(0));
  m.wo_val_sink = os / double(on.size(0));
  m.val_ratio = probe::norm_ratio_to_others(vn, 0).mean();
  m.wo_val_ratio = probe::norm_ratio_to_others(on, 0).mean();
  if (rec.gate_values.defined()) {  // [B, heads, T, 1]
    const Tensor<float>& g = rec.gate_values;
    const int64_t B = g.size(0), H = g.size(1), T = g.size(2);
    double s0 = 0, rest = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) (t == 0 ? s0 : rest) += g(b, h, t, 0);
    m.gate_sink = s0 / double(B * H);
    m.gate_rest = rest / double(B * H * (T - 1));
  }

  if (snap) {
    const int64_t T = ev.x.size(1);
    const int64_t n = std::min<int64_t>(T, 32);
    snap->n = n;
    snap->attention.assign(static_cast<std::size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) snap->attention[i * n + j] = rec.weights(0, 0, i, j);
    const Tensor<double> one = probe::output_value_norms(rec.values.slice(0, 0, 1), w_o);
    snap->value_norm.clear();
    snap->wo_value_norm.clear();
    snap->gate.clear();
    for (int64_t j = 0; j < n; ++j) {
      snap->value_norm.push_back(rec.value_norms(0, 0, j));
      snap->wo_value_norm.push_back(one(0, j));
      snap->gate.push_back(rec.gate_values.defined() ? double(rec.gate_values(0, 0, j, 0)) : 1.0);
    }
    // Which layer copies: mean attention from trigger queries i to key i − 1 (the token to copy).
    snap->copy_score.clear();
    for (const auto& l : probe.layers) {
      const Tensor<float>& A = l.attn.weights;
      double s = 0;
      int64_t c = 0;
      for (int64_t b = 0; b < A.size(0); ++b)
        for (int64_t i = 1; i < T; ++i)
          if (ev.trigger(b, i) != 0.f) {
            for (int64_t h = 0; h < A.size(1); ++h) s += A(b, h, i, i - 1) / double(A.size(1));
            ++c;
          }
      snap->copy_score.push_back(c ? s / double(c) : NAN);
    }
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Training

nn::ModelConfig model_config(const Settings& s, const data::BigramBackcopy& task) {
  nn::ModelConfig cfg;
  cfg.vocab = task.vocab_size();
  cfg.d_model = s.d_model;
  cfg.layers = s.layers;
  cfg.heads = 1;
  cfg.ffn_hidden = 4 * s.d_model;
  cfg.max_len = s.seq_len;
  cfg.init = nn::Init::normal(0.02);
  return cfg;
}

using InitWeights = std::map<std::string, Tensor<float>>;

// The vanilla model's initial weights for a seed: every variant starts from them.
InitWeights reference_init(const nn::ModelConfig& cfg, uint64_t seed) {
  Rng rng(seed);
  Vanilla::Module<float> model("", cfg, rng);
  InitWeights w;
  model.parameters([&](Parameter<float>& p) { w.emplace(p.name, p.value.clone()); });
  return w;
}


bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool same_values(const Tensor<float>& a, const Tensor<float>& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor<float> ac = a.contiguous(), bc = b.contiguous();
  return std::equal(ac.data(), ac.data() + ac.numel(), bc.data());
}

template <class Gate>
RunResult train(const std::string& variant, const Settings& s, const data::BigramBackcopy& task, const EvalSet& ev,
                const nn::ModelConfig& cfg, uint64_t seed, const InitWeights& init, int layer, Progress& progress,
                const fs::path& out) {
  using Attn = attn::Attention<score::Softmax, Gate>;
  typename Attn::Policies pol;
  if constexpr (Gate::enabled) pol.gate.init = kGateInit;
  Rng rng(seed);
  typename Model<Gate>::template Module<float> model("", cfg, rng, pol);

  // Pair the variants: start from the vanilla weights wherever a parameter exists in both
  // (everything but W_g). Count how many already coincide by construction, as a check.
  RunResult res;
  std::vector<Parameter<float>*> params;
  model.parameters([&](Parameter<float>& p) {
    if (auto it = init.find(p.name); it != init.end()) {
      SINKLAB_CHECK(it->second.shape() == p.shape(), "vga_bigram_backcopy: parameter '", p.name, "' of ", variant,
                    " has shape ", p.shape(), " but the vanilla one has ", it->second.shape());
      ++res.shared_total;
      if (same_values(it->second, p.value)) ++res.shared_identical;
      std::copy(it->second.data(), it->second.data() + it->second.numel(), p.value.data());
    }
    if (ends_with(p.name, "norm.bias")) p.requires_grad = false;  // "no biases": LayerNorm shift stays 0
    params.push_back(&p);
  });
  optim::AdamW<float> opt(params, {.lr = s.lr, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
                                   .weight_decay = s.weight_decay});

  io::CsvLog csv(out / ("metrics_" + variant + "_seed" + std::to_string(seed) + ".csv"));
  auto log = [&](int step, double train_loss, const Metrics& m) {
    io::LogRow row{{"step", step}, {"train_loss", train_loss}};
    for (const auto& c : kColumns) row.emplace_back(c.name, m.*c.field);
    csv.log(row);
    res.history.emplace_back(step, m);
  };

  const std::string tag = variant + " s" + std::to_string(seed);
  const auto t0 = std::chrono::steady_clock::now();
  progress.start_run();
  {
    const Metrics m0 = evaluate(model, task, ev, layer, nullptr);
    log(0, m0.loss, m0);
  }
  Rng data = Rng(seed).fork(1);  // the same batches for every variant of a seed
  Tape<float> tape;
  double smoothed = NAN;
  progress.mark();
  for (int step = 1; step <= s.steps; ++step) {
    const data::TokenBatch batch = task.sample(data, s.batch);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, batch.x, batch.y);
    tape.backward(loss);
    opt.step();
    const double l = loss.item();
    SINKLAB_CHECK(std::isfinite(l), "vga_bigram_backcopy: ", variant, " seed ", seed, ": loss is ", l, " at step ",
                  step);
    smoothed = std::isnan(smoothed) ? l : 0.95 * smoothed + 0.05 * l;
    progress.step(tag, step, s.steps, smoothed);
    if (step % s.log_every == 0 || step == s.steps) {
      const bool last = step == s.steps;
      const Metrics m = evaluate(model, task, ev, layer, last ? &res.snapshot : nullptr);
      log(step, smoothed, m);
      progress.report(tag, step, s.steps, smoothed, m);
      progress.mark();
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

RunResult train_variant(const std::string& variant, const Settings& s, const data::BigramBackcopy& task,
                        const EvalSet& ev, const nn::ModelConfig& cfg, uint64_t seed, const InitWeights& init,
                        int layer, Progress& progress, const fs::path& out) {
  using namespace gate;
  if (variant == "vanilla") return train<None>(variant, s, task, ev, cfg, seed, init, layer, progress, out);
  if (variant == "iga")
    return train<FromInput<per_head, on_values>>(variant, s, task, ev, cfg, seed, init, layer, progress, out);
  if (variant == "vga_values")
    return train<FromValue<per_head, on_values>>(variant, s, task, ev, cfg, seed, init, layer, progress, out);
  if (variant == "vga_output")
    return train<FromValue<per_head, on_output>>(variant, s, task, ev, cfg, seed, init, layer, progress, out);
  sinklab::detail::fail("vga_bigram_backcopy: unknown variant '", variant, "'");
}

// ---------------------------------------------------------------------------------------------
// Outputs

struct Spread {
  double mean = 0, sd = 0, lo = 0, hi = 0;
};
Spread spread(const std::vector<double>& xs) {
  Spread s;
  if (xs.empty()) return s;
  s.lo = *std::min_element(xs.begin(), xs.end());
  s.hi = *std::max_element(xs.begin(), xs.end());
  for (double x : xs) s.mean += x;
  s.mean /= double(xs.size());
  if (xs.size() > 1) {
    for (double x : xs) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / double(xs.size() - 1));
  }
  return s;
}

// Mean, min and max over seeds at every logged step.
void write_dynamics(const fs::path& file, const std::vector<RunResult>& runs) {
  io::CsvLog csv(file);
  const std::size_t rows = runs.front().history.size();
  for (std::size_t r = 0; r < rows; ++r) {
    io::LogRow row{{"step", runs.front().history[r].first}};
    for (const auto& c : kColumns) {
      std::vector<double> xs;
      for (const auto& run : runs) xs.push_back(run.history[r].second.*c.field);
      const Spread sp = spread(xs);
      row.emplace_back(std::string(c.name) + "_mean", sp.mean);
      row.emplace_back(std::string(c.name) + "_min", sp.lo);
      row.emplace_back(std::string(c.name) + "_max", sp.hi);
    }
    csv.log(row);
  }
}

// A token as a short label: <s>, characters as themselves, space and newline spelled out.
std::string token_label(const data::BigramBackcopy& task, int32_t t) {
  if (t == task.bos()) return "<s>";
  if (t == task.unused()) return "<unused>";
  const char c = task.to_char(t);
  if (c == ' ') return "\u2423";   // ␣
  if (c == '\n') return "\u21b5";  // ↵
  if (c == '\t') return "\u21e5";  // ⇥
  return std::string(1, c);
}

void write_snapshot(const fs::path& out, const std::string& variant, const Snapshot& snap,
                    const std::vector<std::string>& labels, const std::vector<bool>& is_trigger) {
  {
    std::ofstream f(out / ("attn_" + variant + ".dat"));
    for (int64_t i = 0; i < snap.n; ++i) {
      for (int64_t j = 0; j < snap.n; ++j) f << (j ? " " : "") << snap.attention[i * snap.n + j];
      f << '\n';
    }
    SINKLAB_CHECK(f.good(), "vga_bigram_backcopy: cannot write the attention map into ", out.string());
  }
  io::CsvLog csv(out / ("value_norms_" + variant + ".csv"));
  for (int64_t j = 0; j < snap.n; ++j)
    // The token goes last: CsvLog quotes a ',' label, which then cannot shift gnuplot's columns.
    csv.log({{"pos", j},
             {"trigger", is_trigger[static_cast<std::size_t>(j)]},
             {"value_norm", snap.value_norm[static_cast<std::size_t>(j)]},
             {"wo_value_norm", snap.wo_value_norm[static_cast<std::size_t>(j)]},
             {"gate", snap.gate[static_cast<std::size_t>(j)]},
             {"token", labels[static_cast<std::size_t>(j)]}});
}

// The columns of the summary table (final evaluation), in order.
const std::vector<std::string> kSummaryColumns = {"bigram_risk",    "backcopy_risk",     "attn_sink",
                                                  "attn_triggers",  "val_sink",          "val_sink_ratio",
                                                  "wo_val_sink_ratio", "delta_logit",    "gate_sink"};
const MetricColumn& column(const std::string& name) {
  for (const auto& c : kColumns)
    if (name == c.name) return c;
  sinklab::detail::fail("vga_bigram_backcopy: no metric column '", name, "'");
}

// A title for a markdown table: no pipes, no raw angle brackets.
std::string md_title(const std::string& t) {
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 2, "||") == 0) {
      out += "\u2016";  // ‖
      ++i;
    } else if (t.compare(i, 5, "Delta") == 0) {
      out += "\u0394";  // Δ
      i += 4;
    } else if (t[i] == '<') {
      out += "&lt;";
    } else if (t[i] == '>') {
      out += "&gt;";
    } else {
      out += t[i];
    }
  }
  return out;
}

std::string fmt(double v, int prec = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

void write_summary(const fs::path& out, const Settings& s, const std::map<std::string, std::vector<RunResult>>& runs,
                   const std::vector<std::string>& order) {
  io::CsvLog csv(out / "summary.csv");
  std::ostringstream md, tty;
  const bool several = s.seeds.size() > 1;
  md << "| variant |";
  for (const auto& n : kSummaryColumns) md << ' ' << md_title(column(n).title) << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < kSummaryColumns.size(); ++i) md << "---|";
  md << '\n';
  char head[256];
  std::snprintf(head, sizeof head, "%-11s", "variant");
  tty << head;
  for (const auto& n : kSummaryColumns) {
    std::snprintf(head, sizeof head, " %17s", column(n).title);
    tty << head;
  }
  tty << '\n';
  for (const auto& v : order) {
    const auto& rs = runs.at(v);
    io::LogRow row{{"variant", v}, {"seeds", static_cast<int64_t>(rs.size())}};
    md << "| " << v << " |";
    std::snprintf(head, sizeof head, "%-11s", v.c_str());
    tty << head;
    for (const auto& n : kSummaryColumns) {
      std::vector<double> xs;
      for (const auto& r : rs) xs.push_back(r.history.back().second.*column(n).field);
      const Spread sp = spread(xs);
      row.emplace_back(n + "_mean", sp.mean);
      row.emplace_back(n + "_sd", sp.sd);
      const std::string cell = several ? fmt(sp.mean) + " ± " + fmt(sp.sd) : fmt(sp.mean);
      md << ' ' << cell << " |";
      std::snprintf(head, sizeof head, " %17s", (several ? fmt(sp.mean) + " +- " + fmt(sp.sd) : fmt(sp.mean)).c_str());
      tty << head;
    }
    md << '\n';
    tty << '\n';
    csv.log(row);
  }
  io::write_file_atomically(out / "summary.md", md.str());
  std::printf("\nFinal metrics on the eval batch (layer probed: see above; %s):\n%s",
              several ? ("mean +- sd over " + std::to_string(s.seeds.size()) + " seeds").c_str() : "one seed",
              tty.str().c_str());
}

// ---------------------------------------------------------------------------------------------
// Plots (gnuplot)

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }
bool have_pngcairo() { return std::system("gnuplot -e 'set terminal pngcairo' > /dev/null 2>&1") == 0; }

const char* variant_colour(const std::string& v) {
  if (v == "vanilla") return "#d62728";
  if (v == "iga") return "#ff7f0e";
  if (v == "vga_values") return "#1f77b4";
  return "#2ca02c";
}

// Single-quoted gnuplot string: only the quote itself needs escaping (doubled).
std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string xtics(const std::vector<std::string>& labels) {
  std::string t = "(";
  for (std::size_t i = 0; i < labels.size(); ++i) t += (i ? ", " : "") + gp_quote(labels[i]) + " " + std::to_string(i);
  return t + ")";
}

void write_plots(const fs::path& out, const Settings& s, const std::vector<std::string>& order,
                 const std::vector<std::string>& labels, int layer) {
  if (!have_gnuplot()) {
    std::printf("plots: skipped (gnuplot not found; install it, e.g. apt-get install gnuplot, and re-run)\n");
    return;
  }
  const bool cairo = have_pngcairo();
  const std::string term = cairo ? "pngcairo noenhanced font 'DejaVu Sans,10'" : "png noenhanced";
  std::ostringstream gp;
  gp << "# Generated by vga_bigram_backcopy; run from this folder: gnuplot plots.gp\n";
  gp << "set datafile separator ','\n";
  const std::string setting = std::to_string(s.layers) + " layer" + (s.layers > 1 ? "s" : "") + ", d=" +
                              std::to_string(s.d_model) + ", T=" + std::to_string(s.seq_len) + ", batch " +
                              std::to_string(s.batch) + ", " + std::to_string(s.seeds.size()) + " seed" +
                              (s.seeds.size() > 1 ? "s (mean; band = min..max)" : "") + ", probed layer " +
                              std::to_string(layer);

  // Figure 5-like: training dynamics, variants overlaid.
  const std::vector<std::pair<std::string, std::string>> panels = {
      {"backcopy_risk", "backcopy risk"}, {"bigram_risk", "bigram risk"},
      {"attn_sink", "Attn_<s> (non-trigger queries)"},
      {"attn_triggers", "attention of non-trigger queries to trigger keys"},
      {"delta_logit", "Delta logit_<s>"},
      {"val_sink", "||Val_<s>||"}, {"val_sink_ratio", "||Val_<s>|| / mean of other tokens"},
      {"wo_val_sink_ratio", "||W_O Val_<s>|| / mean of other tokens"}, {"gate_sink", "gate at <s> (1 = no gate)"}};
  auto index_of = [&](const std::string& metric, const char* stat) {
    int k = 2;  // column 1 is the step
    for (const auto& c : kColumns) {
      if (metric == c.name) return k + (std::string(stat) == "mean" ? 0 : std::string(stat) == "min" ? 1 : 2);
      k += 3;
    }
    sinklab::detail::fail("write_plots: no metric ", metric);
  };
  gp << "set terminal " << term << " size 1500,1150\nset output 'dynamics.png'\n";
  gp << "set multiplot layout 3,3 title " << gp_quote("Bigram-Backcopy training dynamics (" + setting + ")") << "\n";
  gp << "set key top right font ',9'\nset grid\nset xlabel 'step'\n";
  if (cairo) gp << "set style fill transparent solid 0.18 noborder\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const auto& [metric, title] = panels[p];
    gp << "set title " << gp_quote(title) << "\n";
    const bool risk = metric.find("risk") != std::string::npos;
    gp << (risk ? "set logscale y\n" : "unset logscale y\n");
    if (metric.find("ratio") != std::string::npos || metric == "gate_sink" || metric == "attn_sink")
      gp << "set yrange [0:*]\n";
    else
      gp << "set yrange [*:*]\n";
    gp << "plot ";
    bool first = true;
    for (const auto& v : order) {
      const std::string f = gp_quote("dynamics_" + v + ".csv");
      const std::string lc = std::string("lc rgb '") + variant_colour(v) + "'";
      if (cairo && s.seeds.size() > 1) {
        gp << (first ? "" : ", ") << f << " skip 1 using 1:" << index_of(metric, "min") << ":"
           << index_of(metric, "max") << " with filledcurves " << lc << " notitle";
        first = false;
      }
      gp << (first ? "" : ", ") << f << " skip 1 using 1:" << index_of(metric, "mean") << " with lines lw 2 " << lc
         << " title " << (p == 0 ? gp_quote(v) : "''");
      first = false;
    }
    gp << "\n";
  }
  gp << "unset multiplot\nunset logscale y\nset yrange [*:*]\nunset xlabel\n";

  // Figure 4(a)-like: attention maps of one eval sequence.
  const int64_t n = static_cast<int64_t>(labels.size());
  const std::size_t nv = order.size();
  gp << "set terminal " << term << " size " << 520 * nv << ",560\nset output 'attention.png'\n";
  gp << "set multiplot layout 1," << nv << " title "
     << gp_quote("Attention of eval sequence 0, first " + std::to_string(n) + " tokens (seed " +
                 std::to_string(s.seeds.front()) + ", layer " + std::to_string(layer) + "); rows = queries")
     << "\n";
  gp << "set style fill solid 1 noborder\nunset grid\nunset key\nset size ratio -1\nset palette defined (0 'white', 0.5 '#6baed6', 1 '#08306b')\n";
  gp << "set cbrange [0:1]\nset xrange [-0.5:" << n - 0.5 << "]\nset yrange [" << n - 0.5 << ":-0.5]\n";
  gp << "set datafile separator whitespace\n";
  gp << "set xtics " << xtics(labels) << " font ',8'\nset ytics " << xtics(labels) << " font ',8'\n";
  gp << "set xlabel 'key'\nset ylabel 'query'\n";
  for (const auto& v : order) {
    gp << "set title " << gp_quote(v) << "\n";
    gp << "plot " << gp_quote("attn_" + v + ".dat") << " matrix with image\n";
  }
  gp << "unset multiplot\nset size noratio\nunset xlabel\nunset ylabel\nset datafile separator ','\n";

  // Figure 4(b)-like: value norms per token of the same sequence.
  gp << "set terminal " << term << " size 1400," << 250 * nv + 60 << "\nset output 'value_norms.png'\n";
  gp << "set multiplot layout " << nv << ",1 title "
     << gp_quote("||v_j|| per token of eval sequence 0 (seed " + std::to_string(s.seeds.front()) + ", layer " +
                 std::to_string(layer) + "); hatched = trigger, dots = gate (right axis)")
     << "\n";
  gp << "set grid ytics\nset key top right opaque box\nset xrange [-0.7:" << n - 0.3 << "]\nset yrange [0:*]\n";
  gp << "set xtics " << xtics(labels) << " font ',9'\nunset ytics\nset ytics nomirror\nset boxwidth 0.8\n";
  gp << "set y2range [0:1.05]\nset y2tics 0, 0.25, 1\nset y2label 'gate'\nset ylabel '||v_j||'\n";
  for (const auto& v : order) {
    const std::string f = gp_quote("value_norms_" + v + ".csv");
    gp << "set title " << gp_quote(v) << "\nset style fill solid 0.8 border -1\n";
    gp << "plot " << f << " skip 1 using 1:($2 == 0 ? $3 : 1/0) with boxes lc rgb '" << variant_colour(v)
       << "' title '||v_j||', " << f << " skip 1 using 1:($2 != 0 ? $3 : 1/0) with boxes fs pattern 4 lc rgb '"
       << variant_colour(v) << "' notitle";
    if (v != "vanilla") gp << ", " << f << " skip 1 using 1:5 axes x1y2 with linespoints pt 7 ps 0.6 lc rgb 'black' title 'gate'";
    gp << "\n";
  }
  gp << "unset multiplot\n";

  io::write_file_atomically(out / "plots.gp", gp.str());
  const std::string cmd = "cd " + gp_quote(out.string()) + " && gnuplot plots.gp";
  // gp_quote's quoting is also valid for the shell ('' ends and restarts a quoted string).
  if (std::system(cmd.c_str()) != 0) {
    std::printf("plots: gnuplot failed on %s (the CSV files are complete)\n", (out / "plots.gp").string().c_str());
    return;
  }
  std::printf("plots: %s, %s, %s (%s)\n", (out / "dynamics.png").string().c_str(),
              (out / "attention.png").string().c_str(), (out / "value_norms.png").string().c_str(),
              cairo ? "pngcairo" : "png terminal; pngcairo unavailable");
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
  CLI::App app{
      "sinklab: vanilla vs IGA vs VGA on Bigram-Backcopy (VGA paper §4.1): attention sinks and value-state drains"};
  app.add_option("--steps", s.steps, "training steps per run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", s.batch, "sequences per training batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq-len", s.seq_len, "tokens per sequence (T)")->check(CLI::Range(8, 4096))->capture_default_str();
  app.add_option("--layers", s.layers, "transformer layers")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--d-model", s.d_model, "model width (one head of this size)")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  app.add_option("--seed,--seeds", s.seeds, "seeds (comma-separated); each seed is one paired run of every variant")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--variants", s.variants, "comma-separated subset of vanilla,iga,vga_values,vga_output")
      ->delimiter(',')
      ->check(CLI::IsMember(kAllVariants))
      ->capture_default_str();
  app.add_option("--lr", s.lr, "AdamW learning rate (constant)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--weight-decay", s.weight_decay, "AdamW decoupled weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-every", s.log_every, "evaluate and log every N steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--eval-batch", s.eval_batch, "sequences in the fixed eval batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--eval-seed", s.eval_seed, "seed of the fixed eval batch (shared by all runs)")->capture_default_str();
  app.add_option("--probe-layer", s.probe_layer,
                 "layer whose attention is measured; default: 0 with one layer, else 1 (the copy layer in the "
                 "paper's 3-layer model; the run prints each layer's copy score to check)")
      ->capture_default_str();
  app.add_option("--threads", s.threads, "CPU threads (0: OpenMP's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--out", s.out, "output folder")->capture_default_str();
  app.add_option("--text", s.text_file, "train on this plain-text file instead of the Brown corpus");
  app.add_option("--brown-dir", s.brown_dir, "folder of the Brown corpus (default: $SINKLAB_DATA/brown)");
  app.add_flag("--smoke", s.smoke, "use a tiny built-in text when no --text is given (tests; results meaningless)");
  app.add_flag("!--no-plots", s.plots, "skip the gnuplot figures");
  CLI11_PARSE(app, argc, argv);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also through a pipe
  try {
    if (s.threads > 0) set_num_threads(s.threads);
    const int layer = s.probe_layer >= 0 ? s.probe_layer : (s.layers > 1 ? 1 : 0);
    SINKLAB_CHECK(layer < s.layers, "vga_bigram_backcopy: --probe-layer ", layer, " but the model has ", s.layers,
                  " layers");
    std::vector<std::string> order;
    for (const auto& v : kAllVariants)
      if (std::find(s.variants.begin(), s.variants.end(), v) != s.variants.end()) order.push_back(v);
    SINKLAB_CHECK(!order.empty() && !s.seeds.empty(), "vga_bigram_backcopy: nothing to run");
    fs::create_directories(s.out);
    const fs::path out = s.out;

    const std::string text = load_text(s);
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
    const nn::ModelConfig cfg = model_config(s, task);
    {
      Rng r(0);
      Vanilla::Module<float> probe_model("", cfg, r);
      std::printf(
          "model: %lld layer(s), d = %lld, 1 head, ReLU FFN %lld->%lld->%lld, pre-LN, learned positions, "
          "%lld parameters (vanilla); AdamW lr %g wd %g betas (0.9, 0.99), batch %lld, %d steps; %d thread(s)\n",
          static_cast<long long>(s.layers), static_cast<long long>(s.d_model), static_cast<long long>(s.d_model),
          static_cast<long long>(4 * s.d_model), static_cast<long long>(s.d_model),
          static_cast<long long>(nn::parameter_count<float>(probe_model)), s.lr, s.weight_decay,
          static_cast<long long>(s.batch), s.steps, num_threads());
    }
    std::printf("probe: layer %d; Attn_<s> and Delta logit over the eval batch's non-trigger queries (t >= 1)\n",
                layer);
    for (const auto& v : order) std::printf("  %-10s %s\n", v.c_str(), describe_variant(v).c_str());

    std::vector<std::string> labels;
    std::vector<bool> is_trig;
    for (int64_t j = 0; j < std::min<int64_t>(s.seq_len, 32); ++j) {
      labels.push_back(token_label(task, ev.x(0, j)));
      is_trig.push_back(task.is_trigger(ev.x(0, j)));
    }
    std::printf("eval sequence 0: %s\n", task.decode(std::vector<int32_t>(ev.x.data(), ev.x.data() + labels.size()))
                                              .c_str());

    Progress progress(static_cast<int64_t>(s.steps) * static_cast<int64_t>(order.size() * s.seeds.size()));
    std::map<std::string, std::vector<RunResult>> runs;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t seed : s.seeds) {
      const InitWeights init = reference_init(cfg, seed);
      for (const auto& v : order) {
        RunResult r = train_variant(v, s, task, ev, cfg, seed, init, layer, progress, out);
        std::printf("[%s s%llu] done in %.1f s; init shared with vanilla: %lld/%lld tensors (%lld identical by "
                    "construction); copy score per layer (trigger -> previous token):",
                    v.c_str(), static_cast<unsigned long long>(seed), r.seconds,
                    static_cast<long long>(r.shared_total), static_cast<long long>(init.size()),
                    static_cast<long long>(r.shared_identical));
        for (double c : r.snapshot.copy_score) std::printf(" %.3f", c);
        std::printf("\n");
        if (!all_finite(r.history.back().second))
          std::printf("[%s s%llu] WARNING: some final metrics are not finite\n", v.c_str(),
                      static_cast<unsigned long long>(seed));
        runs[v].push_back(std::move(r));
      }
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    for (const auto& v : order) {
      write_dynamics(out / ("dynamics_" + v + ".csv"), runs[v]);
      write_snapshot(out, v, runs[v].front().snapshot, labels, is_trig);
    }
    write_summary(out, s, runs, order);
    std::printf("training and evaluation: %s for %zu runs\n", format_duration(total).c_str(),
                order.size() * s.seeds.size());
    if (s.plots) write_plots(out, s, order, labels, layer);
    std::printf("outputs in %s\n", out.string().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vga_bigram_backcopy: %s\n", e.what());
    return 1;
  }
  return 0;
}
