// examples/sink_atlas: what its translation units share. The variants are built in arch_*.cpp by
// family (a few model types each, so they compile in parallel and an edit recompiles one); fit.hpp
// trains and measures one run; main.cpp holds the variant table, the command line, the atlas
// table, the findings and the figures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "../common/probe_keys.hpp"
#include "sinklab/experiment/experiment.hpp"

namespace sink_atlas {

constexpr int32_t kBos = 0;  // every window starts with it; words start at 1

struct Settings {
  // The setting in which the vanilla decoder formed an attention sink in every seed
  // (docs/results/sink-emergence.md, --preset sink of the other LM studies): a Llama-like decoder
  // (pre-norm RMSNorm, RoPE, SwiGLU), d 128, 4 layers, 4 heads, context 256 with a fixed BOS,
  // AdamW 3e-3 held constant after a 5% warm-up, weight decay 0.5 on every parameter (as in the
  // runs that formed the sink), Gu et al.'s N(0, √(2/5d)) init, Brown + sotu + Moby-Dick.
  int64_t d_model = 128, layers = 4, heads = 4, seq_len = 256, batch = 16, vocab = 4096;
  double lr = 3e-3, weight_decay = 0.5, beta2 = 0.95, warmup = 0.05, clip = 1.0, min_lr_ratio = 1.0;
  double dyt_lr = 1.5e-3;   // DyT's peak rate: its best in outlier_rescaling's sweep (3e-3 trains worse)
  int64_t registers = 4;    // register tokens of the 'registers' variant (prepended: a causal model sees them)
  // finetune and retrofit_vga continue the baseline's final weights for this fraction of --steps
  // (the VGA paper's App. C fine-tunes GPT-2 for 1% of its pretraining; 10% here, since 1% of a
  // 5000-step run is 50 steps).
  double retrofit_fraction = 0.1;
  double diverge_margin = 2.0;  // a loss above ln(vocab) + this ends a run as diverged
  int64_t eval_every = 250, eval_batch = 16, val_batches = 8, calib_batches = 4;
  int64_t timing_passes = 3;    // forward + backward passes timed at the end (ms per step)
  uint64_t eval_seed = 20251125;
  std::string init = "gu";
  std::vector<std::string> corpus = {"brown", "sotu", "moby-dick"};
  std::string preset;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
  // What counts as a sink and a massive activation (docs/results/sink-emergence.md).
  double alpha_sink = 0.5;     // a head whose α₀ (first 64 queries) reaches this is a sink head
  double massive_ratio = 100;  // top-1 |x| / median |x| of a layer output: a massive activation
};

using EvalData = examples::LmEvalData;
// The study's run context, with the matrix: the fine-tuning variants read the baseline's run.
struct Context : examples::LmContext<Settings> {
  const sinklab::experiment::Matrix* matrix = nullptr;
};

// The variants that start from the baseline run of their seed (its final weights) instead of its
// initialisation, and train retrofit_steps() more: the VGA paper's App. C.
inline bool continues_baseline(const std::string& v) { return v == "finetune" || v == "retrofit_vga"; }
inline int64_t retrofit_steps(const Settings& s, int64_t steps) {
  return std::max<int64_t>(2, std::llround(double(steps) * s.retrofit_fraction));  // a warm-up step and one more
}

// Trains one run of the matrix (any variant) and records every diagnostic of the atlas.
void run(sinklab::experiment::Run& run, const Context& c);

namespace detail {
// Per family: true when the variant is one of theirs (and the run was done).
bool run_sinks(sinklab::experiment::Run& r, const Context& c);   // baseline, sink_logit, registers, sink_token, vscale, finetune
bool run_gates(sinklab::experiment::Run& r, const Context& c);   // g1, g1_head, iga, vga, vga_out, retrofit_vga
bool run_norms(sinklab::experiment::Run& r, const Context& c);   // preaffine_g1, gatednorm_g1, dyt
bool run_mixing(sinklab::experiment::Run& r, const Context& c);  // resformer, nuresformer, exoformer(_dyn)
bool run_scores(sinklab::experiment::Run& r, const Context& c);  // sigmoid, relu, clipped
}  // namespace detail

}  // namespace sink_atlas
