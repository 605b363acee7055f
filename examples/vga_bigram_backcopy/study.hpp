// examples/vga_bigram_backcopy: what its translation units share. fit.hpp trains and measures one
// run; the model types are built in arch_plain.cpp (vanilla, the learnable sink logit, the
// register token) and arch_gated.cpp (IGA and the two VGA gates), so the two compile in parallel
// and an architecture edit recompiles one of them; main.cpp holds the command line, the variant
// list, the tables, the claims and the figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/data/bigram_backcopy.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace vga_bigram_backcopy {

struct Settings {
  sinklab::experiment::CommonFlags flags{.out = "out/vga", .steps = 2000};
  // The calibrated setting (docs/results/vga-bigram-backcopy.md): 1 layer, d = 128, 1 head, T = 64,
  // batch 64, 2000 steps.
  int64_t batch = 64, seq_len = 64, d_model = 128, layers = 1, eval_batch = 64;
  std::vector<std::string> variants = {"vanilla", "iga", "vga_values", "vga_output", "sink", "register"};
  std::string init = "pytorch";
  double lr = 3e-4, weight_decay = 1e-4;
  int64_t log_every = 50;
  int probe_layer = -1;  // -1: 0 with one layer, else 1 (the copy layer)
  uint64_t eval_seed = 20240917;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;

  sinklab::experiment::Json json() const {
    return {{"batch", batch}, {"seq_len", seq_len},   {"d_model", d_model}, {"layers", layers},
            {"eval_batch", eval_batch}, {"init", init}, {"lr", lr},          {"weight_decay", weight_decay},
            {"log_every", log_every},   {"probe_layer", probe_layer}, {"eval_seed", eval_seed},
            {"text", text_file.empty() ? (smoke ? "smoke" : "brown") : text_file}};
  }
};

// The fixed eval batch every run is measured on.
struct EvalSet {
  sinklab::Tensor<int32_t> x, y;
  sinklab::Tensor<float> non_trigger;  // [B, T] queries Attn_<s> and Δlogit average over
  sinklab::Tensor<float> trigger;      // [B, T]
};

struct Context {
  const Settings& s;
  const sinklab::data::BigramBackcopy& task;
  const EvalSet& ev;
  sinklab::nn::ModelConfig cfg;
  int layer;  // the probed layer
};

// A token as a short label: <s>, characters as themselves, space and newline spelled out.
inline std::string token_label(const sinklab::data::BigramBackcopy& task, int32_t t) {
  if (t == task.bos()) return "<s>";
  if (t == task.unused()) return "<unused>";
  const char c = task.to_char(t);
  if (c == ' ') return "\u2423";   // ␣
  if (c == '\n') return "\u21b5";  // ↵
  if (c == '\t') return "\u21e5";  // ⇥
  return std::string(1, c);
}

// The vanilla model of a seed: its initial tensors, which every variant of that seed starts
// from, and its parameter count (for the log).
sinklab::experiment::TensorBank vanilla_init(const Context& c, uint64_t seed);
int64_t vanilla_parameters(const Context& c);

// Trains one run of the matrix (any variant) from `reference` and records what the study reports.
void run(sinklab::experiment::Run& run, const Context& c, const sinklab::experiment::TensorBank& reference);

namespace detail {
// Per architecture family: true when the run's variant is one of theirs (and the run was done).
bool run_plain(sinklab::experiment::Run& r, const Context& c, const sinklab::experiment::TensorBank& reference);
bool run_gated(sinklab::experiment::Run& r, const Context& c, const sinklab::experiment::TensorBank& reference);
}  // namespace detail

}  // namespace vga_bigram_backcopy
