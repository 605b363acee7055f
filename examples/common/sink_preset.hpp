// --preset sink: the setting in which the vanilla decoder of examples/sink_emergence formed an
// attention sink in every seed run (docs/results/sink-emergence.md, cell wd0.5+init-gu): d 128, 4
// layers, 4 heads, context 256 with BOS at position 0, batch 16, AdamW 3e-3 (β₂ 0.95) held
// constant after a 5% warm-up, weight decay 0.5, Gu et al.'s N(0, √(2/(5d))) init, Brown + the
// State of the Union addresses + Moby-Dick, 5000 steps (20.5 M tokens; the sink formed after
// 11–14 M). Each field is set only where the study's Settings has it and the command line did not
// give its flag; --quick and --smoke, applied after, still shrink the run. A study with another
// optimiser keeps it (exoformer's Muon gets the weight decay and the constant rate).
#pragma once
#include <CLI/CLI.hpp>

#include <cstdio>

#include "sentences.hpp"
#include "sinklab/experiment/cli.hpp"

namespace examples {

template <class Settings>
void sink_preset(const CLI::App& app, sinklab::experiment::CommonFlags& flags, Settings& s) {
  using sinklab::experiment::preset;
  if (s.preset != "sink") return;
  preset(app, "--steps", flags.steps, 5000);
  preset(app, "--d-model", s.d_model, 128);
  preset(app, "--layers", s.layers, 4);
  preset(app, "--heads", s.heads, 4);
  preset(app, "--seq-len", s.seq_len, 256);
  preset(app, "--batch", s.batch, 16);
  preset(app, "--vocab", s.vocab, 4096);
  preset(app, "--eval-every", s.eval_every, 250);
  if constexpr (requires { s.lr; }) preset(app, "--lr", s.lr, 3e-3);
  if constexpr (requires { s.adamw_lr; }) preset(app, "--adamw-lr", s.adamw_lr, 3e-3);
  if constexpr (requires { s.weight_decay; }) preset(app, "--weight-decay", s.weight_decay, 0.5);
  if constexpr (requires { s.muon_wd; }) preset(app, "--muon-wd", s.muon_wd, 0.5);
  if constexpr (requires { s.beta2; }) preset(app, "--beta2", s.beta2, 0.95);
  if constexpr (requires { s.warmup; }) preset(app, "--warmup", s.warmup, 0.05);
  if constexpr (requires { s.min_lr_ratio; }) preset(app, "--min-lr-ratio", s.min_lr_ratio, 1.0);
  if constexpr (requires { s.clip; }) preset(app, "--clip", s.clip, 1.0);
  if constexpr (requires { s.init; }) preset(app, "--init", s.init, "gu");
  if constexpr (requires { s.corpus; }) preset(app, "--corpus", s.corpus, kCorpusTexts);  // every text
  std::printf("preset sink: the sink-forming setting of docs/results/sink-emergence.md (flags given on the command "
              "line kept)\n");
}

}  // namespace examples
