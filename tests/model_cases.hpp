// Models trained a few steps on a device Dev, for the tests that compare devices
// (test_device_models: a counted host device; tests/cuda/test_cuda_models: the GPU): a decoder
// with a sink, a value gate, QK-norm, RoPE, GQA and a z-loss; one with learned positions, a sink
// token, DyT, a per-channel output gate and ExoFormer mixing; a ViT with registers. The language
// models clip the gradient norm at 0.5 every step and step AdamW, SGD (nesterov) or Muon + AdamW;
// the ViT steps AdamW.
#pragma once
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/nn/vit.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/sgd.hpp"

namespace model_cases {

using namespace sinklab;

inline constexpr int64_t kBatch = 2, kLen = 10, kVocab = 19;

using GatedSink = nn::Transformer<nn::PreNorm<norm::RMS>,
                                  attn::Attention<score::SoftmaxSink, gate::FromValue<gate::per_head, gate::on_values>>,
                                  ffn::SwiGLU>;
using Mixed = nn::Transformer<nn::PreNorm<norm::DyT>,
                              attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>,
                              ffn::GeluMLP, pos::Learned, tokens::Sink, mix::ExoFormer<mix::per_head, mix::Dynamic>>;
using Vision = nn::ViT<nn::PreNorm<norm::LayerNorm>,
                       attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>, ffn::ReluMLP,
                       tokens::Registers>;

inline nn::ModelConfig config() {
  return {.vocab = kVocab, .d_model = 16, .layers = 2, .heads = 2, .kv_heads = 1, .max_len = 32, .qk_norm = true,
          .z_loss = 1e-3};
}

inline std::vector<int32_t> token_ids(uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> v;
  for (int64_t i = 0; i < kBatch * kLen; ++i) v.push_back(static_cast<int32_t>(rng.randint(0, kVocab)));
  return v;
}

// The losses of `steps` optimiser steps on forward(tape)'s loss; after_backward runs between the
// backward pass and the step (the clipping).
template <class T, class Dev, class Opt, class Forward, class AfterBackward>
std::vector<T> run_steps(Opt& opt, int steps, Forward&& forward, AfterBackward&& after_backward) {
  std::vector<T> losses;
  for (int step = 0; step < steps; ++step) {
    autodiff::Tape<T, Dev> tape;
    autodiff::Var<T, Dev> loss = forward(tape);
    opt.zero_grad();
    tape.backward(loss);
    after_backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

template <class T, class Dev, class Model, class Opt>
std::vector<T> train(Model& model, Opt& opt, const std::vector<nn::Parameter<T, Dev>*>& params, int steps) {
  const auto ids = Tensor<int32_t, Dev>::from({kBatch, kLen}, token_ids(3));
  std::vector<int32_t> t = token_ids(4);
  t[5] = -100;  // ignored
  const auto targets = Tensor<int32_t, Dev>::from({kBatch, kLen}, t);
  return run_steps<T, Dev>(
      opt, steps, [&](autodiff::Tape<T, Dev>& tape) { return model.loss(tape, ids, targets); },
      [&] { optim::clip_grad_norm(params, 0.5); });
}

// The losses of `steps` steps of Arch (GatedSink or Mixed) with "adamw", "sgd" or "muon".
template <class Arch, class T, class Dev>
std::vector<T> train_lm(const std::string& optimizer, int steps) {
  Rng rng(11);
  typename Arch::template Module<T, Dev> model("", config(), rng);
  auto params = nn::parameter_list<T, Dev>(model);
  if (optimizer == "sgd") {
    optim::SGD<T, Dev> opt(params, {.lr = 0.05, .momentum = 0.9, .nesterov = true});
    return train<T, Dev>(model, opt, params, steps);
  }
  if (optimizer == "muon") {
    optim::MuonAdamW<T, Dev> opt(params, {.lr = 0.02}, {.lr = 1e-2});
    return train<T, Dev>(model, opt, params, steps);
  }
  optim::AdamW<T, Dev> opt(params, {.lr = 1e-2, .weight_decay = 0.1});
  return train<T, Dev>(model, opt, params, steps);
}

// The losses of `steps` AdamW steps of the ViT on fixed random images.
template <class T, class Dev>
std::vector<T> train_vit(int steps) {
  const nn::VitConfig cfg{.image_h = 8, .image_w = 8, .channels = 2, .patch = 4, .classes = 3, .d_model = 16,
                          .layers = 2, .heads = 2};
  Rng rng(5);
  typename Vision::template Module<T, Dev> vit("", cfg, rng);
  auto params = nn::parameter_list<T, Dev>(vit);
  optim::AdamW<T, Dev> opt(params, {.lr = 1e-2});
  Tensor<T> images = Tensor<T>::empty({kBatch, 2, 8, 8});
  rng.fill_normal(images, T(0), T(1));
  const auto x = images.template to_device<Dev>();
  const auto labels = Tensor<int32_t, Dev>::from({kBatch}, {2, 0});
  return run_steps<T, Dev>(
      opt, steps, [&](autodiff::Tape<T, Dev>& tape) { return vit.loss(tape, x, labels); }, [] {});
}

}  // namespace model_cases
