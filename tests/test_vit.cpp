// nn::ViT: patchify layout, gradcheck of the whole model (registers, channels, mixing),
// the probe, shape errors, and learning a trivially separable toy.
#include <doctest/doctest.h>

#include "model_testing.hpp"
#include "sinklab/nn/vit.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;

nn::VitConfig tiny(int64_t channels = 1) {
  nn::VitConfig c;
  c.image_h = 4;
  c.image_w = 6;
  c.channels = channels;
  c.patch = 2;
  c.classes = 3;
  c.d_model = 8;
  c.layers = 2;
  c.heads = 2;
  c.ffn_hidden = 12;
  return c;
}

template <class Model>
void check_vit(const nn::VitConfig& cfg, const Tensor<double>& images, uint64_t seed) {
  Rng rng(seed);
  typename Model::template Module<double> vit("", cfg, rng);
  model_test::randomise(vit, seed + 1);
  auto labels = Tensor<int32_t>::empty({images.size(0)});
  for (int64_t b = 0; b < images.size(0); ++b) labels(b) = static_cast<int32_t>((b + 2) % cfg.classes);
  auto r = gradcheck([&](Tape<double>& t) { return vit.loss(t, images, labels); }, nn::parameter_list<double>(vit));
  INFO(r);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("patchify cuts raster-ordered P×P patches, features ordered (channel, row, column)") {
  // One 4×4 image with pixel value 10·row + column.
  Tensor<float> img = Tensor<float>::empty({1, 4, 4});
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) img(0, y, x) = static_cast<float>(10 * y + x);
  Tensor<float> p = nn::patchify(img, 2);
  REQUIRE(p.shape() == Shape{1, 4, 4});
  CHECK(p.select(0, 0).select(0, 0).to_vector() == std::vector<float>{0, 1, 10, 11});
  CHECK(p.select(0, 0).select(0, 1).to_vector() == std::vector<float>{2, 3, 12, 13});
  CHECK(p.select(0, 0).select(0, 2).to_vector() == std::vector<float>{20, 21, 30, 31});
  CHECK(p.select(0, 0).select(0, 3).to_vector() == std::vector<float>{22, 23, 32, 33});
  // Two channels: the second channel's pixels follow the first's within a patch.
  Tensor<float> two = Tensor<float>::empty({1, 2, 2, 2});
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x) two(0, c, y, x) = static_cast<float>(100 * c + 10 * y + x);
  CHECK(nn::patchify(two, 2).to_vector() == std::vector<float>{0, 1, 10, 11, 100, 101, 110, 111});
  CHECK_THROWS_WITH_AS(nn::patchify(img, 3), doctest::Contains("not a whole number of 3×3 patches"), Error);
}

TEST_CASE("ViT gradients check: plain, with registers, with channels, with ExoFormer mixing") {
  Rng rng(7);
  SUBCASE("LayerNorm + GELU MLP, one channel") {
    using M = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP>;
    check_vit<M>(tiny(), rng.normal<double>({2, 4, 6}), 1);
  }
  SUBCASE("registers (appended and prepended), RMSNorm + SwiGLU, three channels") {
    using M = nn::ViT<nn::PreNorm<norm::RMS>, Enc, ffn::SwiGLU, tokens::Registers>;
    auto c = tiny(3);
    c.tokens.count = 2;
    check_vit<M>(c, rng.normal<double>({3, 3, 4, 6}), 2);
    c.tokens.placement = tokens::Placement::Prepend;
    check_vit<M>(c, rng.normal<double>({2, 3, 4, 6}), 3);
  }
  SUBCASE("gated bidirectional attention with dynamic ExoFormer mixing") {
    using GA = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>, value::Identity,
                               mask::Bidirectional>;
    using M =
        nn::ViT<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, tokens::None, mix::ExoFormer<mix::per_head, mix::Dynamic>>;
    auto c = tiny();
    c.qk_norm = true;
    check_vit<M>(c, rng.normal<double>({2, 4, 6}), 4);
  }
}

TEST_CASE("a ViT probe sees every layer over CLS, patches and registers") {
  using M = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP, tokens::Registers>;
  auto c = tiny();
  c.tokens.count = 2;
  Rng rng(1);
  M::Module<float> vit("vit", c, rng);
  nn::ModelProbe<float> pr;
  pr.gradients = true;
  Tape<float> t;
  auto images = rng.normal<float>({2, 4, 6});
  auto loss = vit.loss(t, images, Tensor<int32_t>::from({2}, {0, 2}), &pr);
  t.backward(loss);
  REQUIRE(pr.layers.size() == 2);
  const int64_t S = 1 + 6 + 2;  // CLS, 2×3 patches, 2 registers
  CHECK(pr.embeddings.shape() == Shape{2, S, 8});
  CHECK(pr.layers[0].attn.weights.shape() == Shape{2, 2, S, S});
  CHECK(pr.layers[1].grad_input.shape() == Shape{2, S, 8});
  CHECK(pr.final_hidden.shape() == Shape{2, 7, 8});
  CHECK(vit.logits(t, images).shape() == Shape{2, 3});
}

TEST_CASE("ViT refuses images and labels of the wrong shape, naming what it expected") {
  using M = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP>;
  Rng rng(1);
  M::Module<float> vit("vit", tiny(), rng);
  Tape<float> t;
  CHECK_THROWS_WITH_AS(vit.logits(t, Tensor<float>::zeros({2, 6, 4})), doctest::Contains("expected [B, 4, 6]"), Error);
  CHECK_THROWS_WITH_AS(vit.logits(t, Tensor<float>::zeros({2, 3, 4, 6})), doctest::Contains("[B, 1, 4, 6]"), Error);
  CHECK_THROWS_WITH_AS(vit.loss(t, Tensor<float>::zeros({2, 4, 6}), Tensor<int32_t>::zeros({3})),
                       doctest::Contains("labels of shape [3], expected [2]"), Error);
  auto bad = tiny();
  bad.patch = 4;
  CHECK_THROWS_WITH_AS(M::Module<float>("vit", bad, rng), doctest::Contains("whole number of 4×4 patches"), Error);
}

TEST_CASE("a ViT learns bright-left vs bright-right images in a few hundred steps") {
  using M = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP, tokens::Registers>;
  nn::VitConfig c;
  c.image_h = c.image_w = 8;
  c.patch = 4;
  c.classes = 2;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.tokens.count = 1;
  Rng rng(11);
  M::Module<float> vit("vit", c, rng);
  optim::AdamW<float> opt(nn::parameter_list<float>(vit), {.lr = 2e-3, .weight_decay = 0.0});
  Rng data(12);
  // Noise in [0, 1) everywhere plus 0.5 on the bright half; label 0 = left half bright.
  auto batch = [&](int64_t B, Tensor<float>& x, Tensor<int32_t>& y) {
    x = data.uniform<float>({B, 8, 8}, 0.0f, 1.0f);
    y = Tensor<int32_t>::empty({B});
    for (int64_t b = 0; b < B; ++b) {
      y(b) = static_cast<int32_t>(data.randint(0, 2));
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t col = 0; col < 4; ++col) x(b, r, y(b) == 0 ? col : col + 4) += 0.5f;
    }
  };
  Tape<float> tape;
  Tensor<float> x;
  Tensor<int32_t> y;
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    batch(32, x, y);
    tape.clear();
    opt.zero_grad();
    auto loss = vit.loss(tape, x, y);
    tape.backward(loss);
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  batch(256, x, y);
  tape.clear();
  Tensor<float> lg;
  {
    no_grad ng;
    lg = vit.logits(tape, x).value();
  }
  int correct = 0;
  for (int64_t b = 0; b < 256; ++b) correct += ((lg(b, 1) > lg(b, 0)) ? 1 : 0) == y(b);
  const double acc = correct / 256.0;
  MESSAGE("bright-left/right: loss " << first << " -> " << last << ", held-out accuracy " << acc);
  CHECK(first > 0.5f);
  CHECK(acc > 0.97);
}
