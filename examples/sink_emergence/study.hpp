// examples/sink_emergence: what its translation units share. A cell of the grid is a variant of
// the run matrix named by the factors it changes from the base setting ("base", "T512",
// "wd0.5+init-gu", …; fit.cpp reads the names and trains and measures one run); main.cpp
// holds the command line, the grid, the tables, the verdicts and the figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "sinklab/experiment/experiment.hpp"

namespace sink_emergence {

constexpr int32_t kBos = 0;  // the fixed first token; words start at 1

struct Settings {
  // The base cell: the Llama-like decoder of the other LM studies (pre-norm RMSNorm, RoPE,
  // SwiGLU, d 128, 4 layers, 4 heads) at a longer context and with the learning rate held
  // constant after warm-up, the two settings Gu et al. find sinks need.
  int64_t d_model = 128, layers = 4, heads = 4, seq_len = 256, batch = 16, vocab = 4096;
  double lr = 3e-3, weight_decay = 0.1, beta2 = 0.95, warmup = 0.05, clip = 1.0;
  double min_lr_ratio = 1.0;  // 1: constant after warm-up; the "cosine" factor decays to 0.1
  std::string init = "normal";  // normal: N(0, 0.02); gu: N(0, √(2/(5d))) (Gu et al.); pytorch: PyTorch's defaults
  bool bos = true;              // a fixed BOS at position 0 of every window
  int64_t unique_tokens = 0;    // > 0: train on the first N tokens of the training text only (repeated data)
  int64_t eval_every = 250, eval_batch = 16, val_batches = 8;
  std::vector<std::string> corpus = {"brown", "sotu", "moby-dick"};
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
  // Thresholds of the outcome (docs/results/sink-emergence.md).
  double alpha_sink = 0.5;     // a head whose α₀ (first 64 queries) reaches this is a sink head
  double rate_sink = 0.1;      // … or a model whose Sink^0.3 (fraction of heads) reaches this
  double massive_ratio = 100;  // top-1 |x| / median |x| of a layer output: a massive activation
};

// The factors of one cell applied to the base settings; `name` is the cell's variant name.
struct Cell {
  std::string name;
  Settings s;
  std::vector<std::string> factors;  // as named, "base" alone for the base cell
};
Cell parse_cell(const std::string& name, const Settings& base);  // throws, naming what it cannot read
const std::vector<std::string>& default_cells();
std::string factor_help();

struct EvalData {
  std::vector<sinklab::data::TokenBatch> validation;
  sinklab::data::TokenBatch probe;
};

// One corpus, windows cut per cell (its T and BOS differ).
struct Context {
  const Settings* base = nullptr;
  const std::vector<int32_t>* train = nullptr;
  const std::vector<int32_t>* validation = nullptr;
  int64_t vocab = 0;
  int64_t steps = 0;       // at the base context
  int64_t base_tokens = 0; // per step at the base context (batch · T)
};

// Steps a cell trains for: the base context's token budget over the cell's tokens per step (two at least).
int64_t cell_steps(const Context& c, const Settings& s);

void run(sinklab::experiment::Run& run, const Context& c);

}  // namespace sink_emergence
