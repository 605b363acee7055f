// The command-line flags the language-model studies share: the model's shape, the batch, the
// vocabulary, the evaluation cadence, the text source, --smoke and --no-plots; and, where the
// study's Settings has the field, --corpus, --init and --preset (sink_preset.hpp). Settings is
// any struct with those fields; each example adds its optimiser and variant flags beside these.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>

#include "sentences.hpp"

namespace examples {

template <class Settings>
void add_lm_flags(CLI::App& app, Settings& s) {
  using I = int64_t;
  app.add_option("--d-model", s.d_model, "model width")->check(CLI::Range(I{4}, I{8192}))->capture_default_str();
  app.add_option("--layers", s.layers, "decoder layers")->check(CLI::Range(I{1}, I{256}))->capture_default_str();
  app.add_option("--heads", s.heads, "attention heads (must divide --d-model)")->check(CLI::Range(I{1}, I{1024}))
      ->capture_default_str();
  app.add_option("--seq-len", s.seq_len, "tokens per sequence, BOS included")->check(CLI::Range(I{2}, I{1} << 16))
      ->capture_default_str();
  app.add_option("--batch", s.batch, "sequences per step")->check(CLI::Range(I{1}, I{1} << 20))->capture_default_str();
  app.add_option("--vocab", s.vocab, "vocabulary size (BOS, <unk> and the most frequent words)")
      ->check(CLI::Range(I{3}, I{1} << 22))->capture_default_str();
  app.add_option("--eval-every", s.eval_every, "steps between evaluations")->check(CLI::Range(I{1}, I{1} << 40))
      ->capture_default_str();
  app.add_option("--eval-batch", s.eval_batch, "sequences per evaluation batch")->check(CLI::Range(I{1}, I{4096}))
      ->capture_default_str();
  app.add_option("--val-batches", s.val_batches, "validation batches (consecutive windows of the held-out text)")
      ->check(CLI::Range(I{1}, I{1} << 20))->capture_default_str();
  app.add_option("--text", s.text_file, "train on this text instead of Brown (one sentence per line)");
  app.add_option("--brown-dir", s.brown_dir, "the Brown corpus folder (default: the data cache)");
  if constexpr (requires { s.corpus; })
    app.add_option("--corpus", s.corpus,
                   "comma-separated texts: " + corpus_texts_listed() + " (scripts/fetch-data.sh fetches them; --text wins)")
        ->delimiter(',')
        ->check(CLI::IsMember(kCorpusTexts))
        ->capture_default_str();
  if constexpr (requires { s.init; })
    app.add_option("--init", s.init,
                   "initialisation of every matrix and table: normal (N(0, 0.02); BERT, OPT), gu (N(0, sqrt(2/5d)); "
                   "Gu et al.), pytorch (PyTorch's module defaults: embeddings N(0, 1), Linear U(±1/√fan_in))")
        ->check(CLI::IsMember({"normal", "gu", "pytorch"}))
        ->capture_default_str();
  if constexpr (requires { s.preset; })
    app.add_option("--preset", s.preset,
                   "sink: the setting in which the vanilla decoder formed an attention sink (context 256, AdamW 3e-3 "
                   "constant after warm-up, weight decay 0.5, init gu, Brown + sotu + moby-dick, 5000 steps; "
                   "docs/results/sink-emergence.md); flags given on the command line, --quick and --smoke still win")
        ->check(CLI::IsMember({"sink"}));
  app.add_flag("--smoke", s.smoke, "seconds, on built-in sentences (the CTest smoke test; results are meaningless)");
  app.add_flag("!--no-plots", s.plots, "write the data but do not run gnuplot");
}

}  // namespace examples
