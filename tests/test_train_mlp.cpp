// End to end: a 2-layer MLP trained with AdamW fits a fixed nonlinear regression.
#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

TEST_CASE("a 2-layer MLP trained with AdamW fits y = sin(3 x0) · x1 + 0.5 x2²") {
  Rng rng(11);
  const int64_t N = 256;
  auto x = rng.uniform<float>({N, 3}, -1.f, 1.f);
  auto y = Tensor<float>::empty({N, 1});
  for (int64_t i = 0; i < N; ++i) y(i, 0) = std::sin(3 * x(i, 0)) * x(i, 1) + 0.5f * x(i, 2) * x(i, 2);

  nn::Linear<float> l1("l1", 3, 64, rng, nn::Init::fan_in(3), true);
  nn::Linear<float> l2("l2", 64, 1, rng, nn::Init::fan_in(64), true);
  std::vector<Parameter<float>*> params;
  l1.parameters([&](Parameter<float>& p) { params.push_back(&p); });
  l2.parameters([&](Parameter<float>& p) { params.push_back(&p); });
  optim::AdamW<float> opt(params, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0});

  Tape<float> tape;
  float first = 0, last = 0;
  for (int step = 0; step < 1500; ++step) {
    tape.clear();
    opt.zero_grad();
    auto pred = l2(tape, tanh(l1(tape, tape.constant(x))));
    auto loss = mean(square(pred - tape.constant(y)));
    tape.backward(loss);
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  MESSAGE("MLP regression loss: " << first << " -> " << last);
  CHECK(first > 0.05f);
  CHECK(last < 2e-3f);
}
