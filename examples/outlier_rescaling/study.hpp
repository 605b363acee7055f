// examples/outlier_rescaling: what its translation units share. The architectures and the
// training of one run are in arch_*.cpp (each instantiates a few models, so they compile in
// parallel and an architecture edit recompiles one of them); main.cpp holds the command line,
// the matrix, the tables, the claims and the figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace outlier_rescaling {

constexpr int32_t kBos = 0;  // every sequence starts with it; words start at 1

struct Settings {
  // Defaults: ~17 steps/s on 2 cores, 1–2 min per run with its evaluations and PTQ (the study: ~1 h).
  int64_t d_model = 128, layers = 4, heads = 4, seq_len = 64, batch = 16, vocab = 4096;
  double lr = 3e-3, weight_decay = 0.1, beta2 = 0.95, warmup = 0.05, clip = 1.0, min_lr_ratio = 0.1;
  double dyt_lr = 1.5e-3, gated_dyt_lr = 1.5e-3;  // the "best LR" variants (from the sweep in the docs)
  double diverge_margin = 2.0;  // a loss above ln(vocab) + this ends a run as diverged
  int64_t eval_every = 100, eval_batch = 16, val_batches = 8, calib_batches = 4;
  double sink_dim_ratio = 5.0;  // a residual-sink dimension: median |x| over tokens >= this × the median |x|
  uint64_t eval_seed = 20251125;
  std::string init = "normal";  // --init (examples/common/lm_flags.hpp)
  std::vector<std::string> corpus = {"brown"};
  std::string preset;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
};

// A variant's name is <architecture>[_clip<C>][@<lr>]: "g1_gatednorm", "clip100", "dyt@5e-4".
struct Variant {
  std::string name, arch;
  double clip = 0;  // residual clipping threshold (0: none)
  double lr = 0;    // peak learning rate (0: --lr)
};
Variant parse_variant(const std::string& name);  // throws on an unknown architecture
const std::vector<std::string>& architectures();

using EvalData = examples::LmEvalData;

struct Context : examples::LmContext<Settings> {
  sinklab::experiment::fs::path heatmap_dir;  // where final |activation| maps go (empty: none)
};

// Trains one run of the matrix (any variant) and records everything the study reports.
void run(sinklab::experiment::Run& run, const Context& c);

namespace detail {
// Per architecture family: true when `arch` is one of theirs (and the run was done).
bool run_rms(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_alt(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_rows(sinklab::experiment::Run& r, const Context& c, const Variant& v);
}  // namespace detail

}  // namespace outlier_rescaling
