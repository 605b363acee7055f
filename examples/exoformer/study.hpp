// examples/exoformer: what its translation units share. The architectures and the training of
// one run are in arch_*.cpp (a few model types each, so they compile in parallel and an
// architecture edit recompiles one of them); main.cpp holds the command line, the matrix, the
// tables, the claims and the figures.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace exoformer {

constexpr int32_t kBos = 0;  // every sequence starts with it; words start at 1

struct Settings {
  int64_t d_model = 128, layers = 6, heads = 4, seq_len = 128, batch = 8, vocab = 4096;
  // The paper's recipe (its Table 4): Muon 0.01 for matrices, AdamW 3e-3 (β 0.9/0.95, no decay)
  // for the rest, Muon weight decay 0.1, linear warmup, constant, then a linear decay to 10% over
  // the last 20% of the steps; gradient clipping 1.0, z-loss 1e-5, RoPE θ 500000.
  double muon_lr = 0.01, adamw_lr = 3e-3, muon_wd = 0.1, beta2 = 0.95, warmup = 0.05, decay = 0.2,
         min_lr_ratio = 0.1, clip = 1.0, z_loss = 1e-5, rope_theta = 500000;
  double diverge_margin = 2.0;  // a loss above ln(vocab) + this ends a run as diverged
  double pca_threshold = 0.99;  // PCA core features: components explaining this fraction of the variance
  int64_t eval_every = 100, eval_batch = 16, val_batches = 8;
  uint64_t eval_seed = 20251125;
  std::string init = "normal";  // --init (examples/common/lm_flags.hpp)
  std::vector<std::string> corpus = {"brown"};
  std::string preset;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
};

// A variant: base, gated, resformer, resformer_learn, resformer_gated, or
// <nuresformer|exoformer>[_s|_h|_e][_dyn][_only_<streams>] — granularity scalar / per head /
// per element (default e), dynamic mixing, and which of q, k, v, g are mixed (default all) —
// followed by any of [_raw][_l<N>][_steps<N>]: anchors mixed without their RMSNorm (the paper's
// un-normalised NuResFormer row), a decoder of N layers (the paper drops layers from the gated
// models to match the base model's parameters), a schedule of N steps with its own warm-up and
// decay (tokens to a loss, measured without a decay phase capping it).
struct Variant {
  std::string name, core, family;  // core: the name without the modifiers; family: base, gated, resformer, nuresformer, exoformer
  char granularity = 'e';
  bool dynamic = false, learnable = false, gate = false, raw_anchors = false;
  std::array<bool, 4> streams{true, true, true, true};  // q, k, v, g
  int64_t layers = 0, steps = 0;  // 0: --layers, --steps
};
Variant parse_variant(const std::string& name);  // throws on a name it cannot read

using EvalData = examples::LmEvalData;
using Context = examples::LmContext<Settings>;

// Trains one run of the matrix (any variant) and records everything the study reports.
void run(sinklab::experiment::Run& run, const Context& c);

namespace detail {
// Per architecture family: true when the variant is one of theirs (and the run was done).
bool run_plain(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_nures(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_exo(sinklab::experiment::Run& r, const Context& c, const Variant& v);
}  // namespace detail

}  // namespace exoformer
