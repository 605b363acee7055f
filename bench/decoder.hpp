// The decoder the training benchmarks time (bench/train_step, bench/data_parallel), the model of
// bench/train_step_torch.py: pre-norm, RMSNorm, softmax attention, SwiGLU, untied head, byte
// vocabulary; AdamW (lr 1e-3, weight decay 0.01) and one batch of random bytes, all drawn from
// Rng(1234) in that order, so every benchmark (and every rank) starts from the same numbers, on
// whichever device Dev holds the model (the batch is drawn on the host and copied there).
//
//   small  d 128, 4 heads, 4 layers, SwiGLU hidden 344, T 128, batch 16
//   large  d 256, 8 heads, 6 layers, SwiGLU hidden ffn::glu_hidden(256) = 688, T 256, batch 8
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"

namespace sinklab::bench {

struct ModelSize {
  std::string name;
  int64_t d, heads, layers, T, batch;
};
inline const ModelSize kSmall{"small", 128, 4, 4, 128, 16};
inline const ModelSize kLarge{"large", 256, 8, 6, 256, 8};

using Decoder = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;

// The model, its optimiser, its batch (x: bytes, y: targets) and a tape.
template <class Dev = cpu>
struct DecoderSetup {
  explicit DecoderSetup(const ModelSize& s) : size(s), rng(1234) {
    nn::ModelConfig cfg;
    cfg.vocab = 256;
    cfg.d_model = s.d;
    cfg.heads = s.heads;
    cfg.layers = s.layers;
    cfg.ffn_hidden = ffn::glu_hidden(s.d);
    model = std::make_unique<Decoder::Module<float, Dev>>("", cfg, rng);
    params = nn::parameter_list<float, Dev>(*model);
    opt = std::make_unique<optim::AdamW<float, Dev>>(params, optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.01});
    std::vector<int32_t> x(static_cast<std::size_t>(s.batch * s.T)), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int32_t>(rng.randint(0, 256));
      y[i] = static_cast<int32_t>(rng.randint(0, 256));
    }
    batch = {Tensor<int32_t, Dev>::from({s.batch, s.T}, x), Tensor<int32_t, Dev>::from({s.batch, s.T}, y)};
  }
  int64_t elements() const {
    int64_t n = 0;
    for (const auto* p : params) n += p->numel();
    return n;
  }

  ModelSize size;
  Rng rng;
  std::unique_ptr<Decoder::Module<float, Dev>> model;
  std::vector<autodiff::Parameter<float, Dev>*> params;
  std::unique_ptr<optim::AdamW<float, Dev>> opt;
  struct Batch {
    Tensor<int32_t, Dev> x, y;
  } batch;
  autodiff::Tape<float, Dev> tape;
};

}  // namespace sinklab::bench
