// examples/compose, the architectures: four models from policies, each a few `using` lines, and
// the loop that trains them all the same way on any device. This is the file to edit: add a
// variant with a `using` line and a line in train_selected. Two small translation units build it,
// models.cpp for the cpu (data-parallel under mpirun) and models_cuda.cu for a GPU; an
// architecture edit recompiles those two and nothing else.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "compose.hpp"
#include "sinklab/data/split.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"

namespace compose {

using namespace sinklab;

// ---- the architectures -------------------------------------------------------------------
using Block = nn::PreNorm<norm::RMS>;
using GatedBlock = nn::PreNorm<norm::GatedNorm<norm::RMS>>;

using Softmax = attn::Attention<>;
using G1 = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;
using VGA = attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>, value::VScale>;
using ExoMix = mix::ExoFormer<mix::per_element, mix::Dynamic>;

using Vanilla = nn::Transformer<Block, Softmax, ffn::SwiGLU>;
using GatedAttention = nn::Transformer<GatedBlock, G1, ffn::SwiGLU>;
using VgaVScale = nn::Transformer<Block, VGA, ffn::SwiGLU>;
using ExoFormer = nn::Transformer<Block, G1, ffn::SwiGLU, pos::RoPE, tokens::None, ExoMix>;
// --------------------------------------------------------------------------------------------

// Mean loss over (up to 8) consecutive held-out windows, without building a backward graph.
template <class Dev, class M>
double evaluate(M& model, const Setup& s) {
  data::TokenStreamBatcher val(s.val, s.seq_len, s.seed);
  autodiff::no_grad ng;
  autodiff::Tape<float, Dev> tape;
  double total = 0;
  int n = 0;
  for (const auto& b : val.sequential(s.batch, 8)) {
    tape.clear();
    total += model.loss(tape, b.x.template to_device<Dev>(), b.y.template to_device<Dev>()).item();
    ++n;
  }
  return total / std::max(n, 1);
}

// One variant on device Dev. Batches are drawn on the host and copied over; Distribute shards
// each batch and runs the backward pass (on the cpu: over the ranks, gradients averaged).
template <class Dev, class Distribute, class Model>
Result train(const std::string& name, const nn::ModelConfig& cfg, const Setup& s) {
  Rng rng(s.seed);
  typename Model::template Module<float, Dev> model("", cfg, rng);
  const auto params = nn::parameter_list<float, Dev>(model);
  optim::AdamW<float, Dev> opt(params, {.lr = s.lr, .beta2 = 0.95, .weight_decay = 0.0});
  Distribute distribute(params);
  optim::Schedule sched({.decay = optim::Decay::Cosine,
                         .warmup_steps = std::max(1, s.steps / 20),
                         .total_steps = s.steps,
                         .min_lr_ratio = 0.1});
  data::TokenStreamBatcher batches(s.train, s.seq_len, s.seed + 1);  // same batches for every variant
  autodiff::Tape<float, Dev> tape;

  Result r{name, nn::parameter_count<float, Dev>(model)};
  std::printf("\n== %s: %lld parameters\n", name.c_str(), static_cast<long long>(r.params));
  double smooth = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step <= s.steps; ++step) {
    const data::TokenBatch b = distribute.shard(batches.sample(s.batch));
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, b.x.template to_device<Dev>(), b.y.template to_device<Dev>());
    const double l = distribute.backward(tape, loss);  // the mean over ranks
    opt.set_lr_scale(sched.lr_scale(step - 1));
    opt.step();
    smooth = step == 1 ? l : 0.9 * smooth + 0.1 * l;
    if (step == 1) r.first = l;
    if (step == 1 || step % s.log_every == 0 || step == s.steps)
      std::printf("  step %5d  loss %.4f  (smoothed %.4f)\n", step, l, smooth);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.last = smooth;
  r.ms_per_step = 1e3 * secs / s.steps;
  r.val = evaluate<Dev>(model, s);
  std::printf("  validation loss %.4f  (%.1f ms/step)\n", r.val, r.ms_per_step);
  return r;
}

// Every variant whose key is in `only` (all when empty), on the same batches.
template <class Dev, class Distribute>
std::vector<Result> train_selected(const Setup& s, const std::vector<std::string>& only) {
  nn::ModelConfig cfg;
  cfg.d_model = s.d_model;
  cfg.layers = s.layers;
  cfg.heads = s.heads;
  cfg.qk_norm = true;
  auto wanted = [&](const char* key) { return only.empty() || std::find(only.begin(), only.end(), key) != only.end(); };
  std::vector<Result> results;
  if (wanted("vanilla")) results.push_back(train<Dev, Distribute, Vanilla>("vanilla (softmax, RMSNorm, SwiGLU)", cfg, s));
  if (wanted("gated")) results.push_back(train<Dev, Distribute, GatedAttention>("gated attention G1 + GatedNorm", cfg, s));
  if (wanted("vga")) results.push_back(train<Dev, Distribute, VgaVScale>("VGA + V-scale", cfg, s));
  if (wanted("exo")) results.push_back(train<Dev, Distribute, ExoFormer>("ExoFormer, dynamic element mixing", cfg, s));
  return results;
}

}  // namespace compose
