// examples/compose, the architectures: four models from policies, each a few `using` lines, and
// the loop that trains them all the same way. This is the file to edit (and the only one that
// recompiles): add a variant with a `using` line and a line in train_variants.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "compose.hpp"
#include "sinklab/data/split.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/dist/world.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"

using namespace sinklab;
using compose::Result;
using compose::Setup;

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

namespace {

// Mean loss over (up to 8) consecutive held-out windows, without building a backward graph.
template <class M>
double evaluate(M& model, const Setup& s) {
  data::TokenStreamBatcher val(s.val, s.seq_len, s.seed);
  autodiff::no_grad ng;
  autodiff::Tape<float> tape;
  double total = 0;
  int n = 0;
  for (const auto& b : val.sequential(s.batch, 8)) {
    tape.clear();
    total += model.loss(tape, b.x, b.y).item();
    ++n;
  }
  return total / std::max(n, 1);
}

template <class Model>
Result train(const std::string& name, const nn::ModelConfig& cfg, const Setup& s) {
  Rng rng(s.seed);
  typename Model::template Module<float> model("", cfg, rng);
  const auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = s.lr, .beta2 = 0.95, .weight_decay = 0.0});
  // Under mpirun each rank trains on its rows of every batch, with gradients averaged.
  dist::DataParallel<float> dp(dist::world(), params);
  optim::Schedule sched({.decay = optim::Decay::Cosine,
                         .warmup_steps = std::max(1, s.steps / 20),
                         .total_steps = s.steps,
                         .min_lr_ratio = 0.1});
  data::TokenStreamBatcher batches(s.train, s.seq_len, s.seed + 1);  // same batches for every variant
  autodiff::Tape<float> tape;

  Result r{name, nn::parameter_count<float>(model)};
  std::printf("\n== %s: %lld parameters\n", name.c_str(), static_cast<long long>(r.params));
  double smooth = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step <= s.steps; ++step) {
    const data::TokenBatch b = dist::shard(batches.sample(s.batch), dist::world());
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, b.x, b.y);
    const double l = dp.backward(tape, loss).loss;  // the mean over ranks
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
  r.val = evaluate(model, s);
  std::printf("  validation loss %.4f  (%.1f ms/step)\n", r.val, r.ms_per_step);
  return r;
}

}  // namespace

std::vector<Result> compose::train_variants(const Setup& s, const std::vector<std::string>& only) {
  nn::ModelConfig cfg;
  cfg.d_model = s.d_model;
  cfg.layers = s.layers;
  cfg.heads = s.heads;
  cfg.qk_norm = true;
  auto wanted = [&](const char* key) { return only.empty() || std::find(only.begin(), only.end(), key) != only.end(); };
  std::vector<Result> results;
  if (wanted("vanilla")) results.push_back(train<Vanilla>("vanilla (softmax, RMSNorm, SwiGLU)", cfg, s));
  if (wanted("gated")) results.push_back(train<GatedAttention>("gated attention G1 + GatedNorm", cfg, s));
  if (wanted("vga")) results.push_back(train<VgaVScale>("VGA + V-scale", cfg, s));
  if (wanted("exo")) results.push_back(train<ExoFormer>("ExoFormer, dynamic element mixing", cfg, s));
  return results;
}
