// examples/gradient_sinks: what its translation units share. The four attention variants are
// built in arch_softmax.cpp (vanilla, V-scale) and arch_nosink.cpp (the G1 gate and the learnable
// sink logit, the two that remove the sink), so the two compile in parallel; fit.hpp trains and
// measures one run; main.cpp holds the command line, the matrix, the tables, the claims and the
// figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace gradient_sinks {

constexpr int32_t kBos = 0;  // every sequence starts with it; words start at 1

struct Settings {
  // A Llama-like decoder (pre-norm RMSNorm, RoPE, SwiGLU) small enough for two cores. In 3000
  // steps (3 M tokens) token 0's residual stream grows to a few times the other tokens', but no
  // attention sink forms at this size (docs/results/gradient-sinks.md).
  int64_t d_model = 128, layers = 4, heads = 4, seq_len = 64, batch = 16, vocab = 4096;
  double lr = 3e-3, weight_decay = 0.1, beta2 = 0.95, warmup = 0.05, clip = 1.0, min_lr_ratio = 0.1;
  double diverge_margin = 2.0;  // a loss above ln(vocab) + this ends a run as diverged
  double epsilon = 0.3;         // the ε of the sink rate (α_0 > ε over the first 64 queries)
  int64_t eval_every = 250, eval_batch = 16, val_batches = 8;
  uint64_t eval_seed = 20251125;
  std::string init = "normal";  // --init (examples/common/lm_flags.hpp)
  std::vector<std::string> corpus = {"brown"};
  std::string preset;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
};

// vanilla (softmax attention), vscale (V-scale: v̂ = φ(‖v‖²) v), gated (G1: σ(X·W_g) per channel
// of each head's output) and sink (a learnable sink logit per head).
struct Variant {
  std::string name;
};
Variant parse_variant(const std::string& name);  // throws on a name it cannot read
const std::vector<std::string>& variant_names();

using EvalData = examples::LmEvalData;
using Context = examples::LmContext<Settings>;

void run(sinklab::experiment::Run& run, const Context& c);

namespace detail {
bool run_softmax(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_nosink(sinklab::experiment::Run& r, const Context& c, const Variant& v);
}  // namespace detail

}  // namespace gradient_sinks
