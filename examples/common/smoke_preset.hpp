// The --smoke preset of the language-model examples: a tiny decoder for a few steps, so CTest
// exercises the whole program (training, evaluation, quantization, tables, figures) in seconds.
// Settings is any struct with the examples' shared model and evaluation fields; flags given on
// the command line still win.
#pragma once
#include <CLI/CLI.hpp>

#include "sinklab/experiment/cli.hpp"

namespace examples {

template <class Settings>
void smoke_preset(const CLI::App& app, sinklab::experiment::CommonFlags& flags, Settings& s) {
  using sinklab::experiment::preset;
  preset(app, "--steps", flags.steps, 6);
  preset(app, "--d-model", s.d_model, 16);
  preset(app, "--layers", s.layers, 2);
  preset(app, "--heads", s.heads, 2);
  preset(app, "--seq-len", s.seq_len, 12);
  preset(app, "--batch", s.batch, 4);
  preset(app, "--vocab", s.vocab, 64);
  preset(app, "--eval-every", s.eval_every, 3);
  preset(app, "--eval-batch", s.eval_batch, 4);
  preset(app, "--val-batches", s.val_batches, 2);
  if constexpr (requires { s.calib_batches; }) preset(app, "--calib-batches", s.calib_batches, 1);
  if (app.count("--seeds") == 0) flags.seeds = {0};
}

}  // namespace examples
