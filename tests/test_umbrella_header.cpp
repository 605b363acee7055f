// The umbrella header compiles on its own and brings every layer: a model trains a step, a
// probe reads it, PTQ quantises it and the harness's helpers are there.
#include <doctest/doctest.h>

#include "sinklab/sinklab.hpp"

using namespace sinklab;

TEST_CASE("sinklab/sinklab.hpp: one include is enough to build, train, probe and quantise a model") {
  using Model = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
  nn::ModelConfig cfg;
  cfg.vocab = 11;
  cfg.d_model = 16;
  cfg.layers = 1;
  cfg.heads = 2;
  Rng rng(1);
  Model::Module<float> model("", cfg, rng);
  optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = 1e-2});
  autodiff::Tape<float> tape;
  const Tensor<int32_t> x = Tensor<int32_t>::from({1, 4}, {1, 2, 3, 4}), y = Tensor<int32_t>::from({1, 4}, {2, 3, 4, 5});
  auto loss = model.loss(tape, x, y);
  const float before = loss.value().item();
  tape.backward(loss);
  opt.step();
  CHECK(std::isfinite(before));
  nn::ModelProbe<float> probe;
  tape.clear();
  model.loss(tape, x, y, &probe);
  CHECK(probe::model_report(model, probe).layers.size() == 1);
  CHECK(experiment::summarize({1.0, 3.0}).mean == doctest::Approx(2.0));
}
