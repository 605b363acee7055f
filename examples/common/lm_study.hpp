// What the language-model studies (exoformer, gradient_sinks, outlier_rescaling) share around
// one run: the evaluation data, the context a run is trained in, and the training step on a fresh
// batch of windows of the training text (every variant of a seed draws the same windows).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/data/token_batch.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace examples {

struct LmEvalData {
  std::vector<sinklab::data::TokenBatch> validation;
  std::vector<sinklab::data::TokenBatch> calibration;  // post-training quantization (empty when a study has none)
  sinklab::data::TokenBatch probe;  // the first validation batch: the probes read it
};

template <class Settings>
struct LmContext {
  const Settings* s = nullptr;
  const std::vector<int32_t>* train = nullptr;
  const LmEvalData* ev = nullptr;
  sinklab::nn::ModelConfig cfg;
  int64_t steps = 0;
};

// The initialisation --init names (lm_flags.hpp): N(0, 0.02), Gu et al.'s N(0, √(2/(5d))), or
// PyTorch's module defaults.
inline sinklab::nn::Init model_init(const std::string& name, int64_t d_model) {
  if (name == "gu") return sinklab::nn::Init::normal(std::sqrt(2.0 / (5.0 * double(d_model))));
  if (name == "pytorch") return sinklab::nn::Init::pytorch();
  return sinklab::nn::Init::normal(0.02);
}

// A study's run context (an LmContext, or a study's own with the same fields): its settings, the
// training text, the evaluation data, the steps per run, and the decoder's shape from the settings
// (d_model, layers, heads, max_len = seq_len, the --init where Settings has one) and the corpus'
// vocabulary. A study adjusts cfg after (QK-norm, z-loss, RoPE base, …).
template <class Context, class Settings>
Context lm_context(const Settings& s, const std::vector<int32_t>& train, const LmEvalData& ev, int64_t vocab,
                   int64_t steps) {
  Context c;
  c.s = &s;
  c.train = &train;
  c.ev = &ev;
  c.steps = steps;
  c.cfg.vocab = vocab;
  c.cfg.d_model = s.d_model;
  c.cfg.layers = s.layers;
  c.cfg.heads = s.heads;
  c.cfg.max_len = s.seq_len;
  if constexpr (requires { s.init; }) c.cfg.init = model_init(s.init, s.d_model);
  return c;
}

// The step function experiment::train calls (c: an LmContext or a study's own context with the
// same s and train): windows of s.seq_len tokens (BOS first), s.batch of
// them, hashed into the run's data check, then one optimisation step clipped at s.clip.
template <class Context, class Model, class Opt>
auto lm_step(sinklab::experiment::Run& run, const Context& c, sinklab::autodiff::Tape<float>& tape,
             Model& model, Opt& opt, const sinklab::optim::Schedule& sched,
             const std::vector<sinklab::autodiff::Parameter<float>*>& params, int32_t bos) {
  return [&run, &c, &tape, &model, &opt, &sched, &params, bos](sinklab::Rng& data) {
    const auto& s = *c.s;
    const sinklab::data::TokenBatch b = sinklab::data::sample_lm_windows(*c.train, data, s.batch, s.seq_len, bos);
    run.see_batch(b.x);
    return sinklab::experiment::optimisation_step(tape, model, opt, b, sched, params, s.clip);
  };
}

}  // namespace examples
