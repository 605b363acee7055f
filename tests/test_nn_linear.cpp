#include <doctest/doctest.h>

#include "sinklab/nn/linear.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

TEST_CASE("nn::Linear and nn::Embedding: shapes, parameters, gradcheck") {
  Rng rng(1);
  nn::Linear<double> lin("proj", 4, 3, rng, nn::Init::normal(0.5), true);
  CHECK(lin.weight.name == "proj.weight");
  CHECK(nn::parameter_count<double>(lin) == 4 * 3 + 3);
  lin.bias.value = Rng(2).normal<double>({3});
  auto x = make_inputs({Rng(3).normal<double>({2, 5, 4})});
  auto ps = nn::parameter_list<double>(lin);
  ps.push_back(&x[0]);
  auto r = gradcheck([&](Tape<double>& t) { return lin(t, t.param(x[0])); }, ps);
  INFO(r);
  CHECK(r.ok);

  nn::Embedding<double> emb("tok", 7, 3, rng);
  auto ids = Tensor<int32_t>::from({2, 2}, {6, 0, 6, 3});
  Tape<double> t;
  auto e = emb(t, ids);
  CHECK(e.shape() == Shape{2, 2, 3});
  CHECK(e.value()(1, 1, 2) == emb.weight.value(3, 2));
}

TEST_CASE("nn::Linear: wrong input width names the layer and the shape") {
  Rng rng(1);
  nn::Linear<float> lin("blocks.0.ffn.up", 8, 4, rng);
  Tape<float> t;
  auto x = t.leaf(Tensor<float>::zeros({2, 7}));
  CHECK_THROWS_WITH_AS(lin(t, x), doctest::Contains("Linear 'blocks.0.ffn.up': input of shape [2, 7]"), Error);
}
