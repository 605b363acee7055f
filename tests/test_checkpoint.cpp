// io/checkpoint.hpp: parameters and AdamW state round-trip through safetensors files; strict,
// all-or-nothing loading with messages that name the file and the parameter.
#include <doctest/doctest.h>

#include "temp_dir.hpp"
#include <unistd.h>

#include <filesystem>
#include <map>

#include "sinklab/io/checkpoint.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/nn/vit.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/sgd.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
namespace fs = std::filesystem;

namespace {

using sinklab_test::TempDir;

using GA = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;
using Exo = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::Sink,
                            mix::ExoFormer<mix::per_element, mix::Dynamic>>;

nn::ModelConfig small() {
  nn::ModelConfig c;
  c.vocab = 11;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 2;
  c.qk_norm = true;
  return c;
}

template <class M>
std::map<std::string, std::vector<float>> snapshot(M& m) {
  std::map<std::string, std::vector<float>> s;
  m.parameters([&](Parameter<float>& p) { s[p.name] = p.value.to_vector(); });
  return s;
}

// Perturbs every parameter so a round trip cannot pass by luck (fc2 and W_O start at zero).
template <class M>
void perturb(M& m, uint64_t seed) {
  Rng rng(seed);
  m.parameters([&](Parameter<float>& p) {
    Tensor<float> r = rng.normal<float>(p.shape(), 0.0f, 0.1f);
    for (int64_t i = 0; i < r.numel(); ++i) p.value.data()[i] += r.data()[i];
  });
}

}  // namespace

TEST_CASE("save → load into a fresh model with another seed gives identical logits") {
  TempDir dir;
  auto ids = Tensor<int32_t>::from({2, 5}, {1, 4, 9, 2, 0, 3, 3, 10, 7, 5});
  SUBCASE("dynamic ExoFormer decoder with a sink token") {
    Rng r1(1), r2(2);
    Exo::Module<float> a("", small(), r1), b("", small(), r2);
    perturb(a, 3);
    Tape<float> ta, tb;
    const auto want = a.logits(ta, ids).value().to_vector();
    CHECK(b.logits(tb, ids).value().to_vector() != want);
    io::save_parameters(a, dir / "exo.safetensors", {{"arch", "exoformer"}, {"step", "12"}});
    const io::Metadata meta = io::load_parameters(b, dir / "exo.safetensors");
    CHECK(meta.at("arch") == "exoformer");
    CHECK(meta.at("step") == "12");
    tb.clear();
    CHECK(b.logits(tb, ids).value().to_vector() == want);
    CHECK(snapshot(b) == snapshot(a));
  }
  SUBCASE("ViT with registers, saved in float and loaded into a double model") {
    using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;
    using V = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP, tokens::Registers>;
    nn::VitConfig c;
    c.image_h = c.image_w = 4;
    c.patch = 2;
    c.classes = 3;
    c.d_model = 8;
    c.layers = 1;
    c.heads = 2;
    c.tokens.count = 2;
    Rng r1(1), r2(2), r3(3);
    V::Module<float> a("vit", c, r1), b("vit", c, r2);
    V::Module<double> d("vit", c, r3);
    auto images = Rng(9).normal<float>({2, 4, 4});
    Tape<float> ta, tb;
    const auto want = a.logits(ta, images).value().to_vector();
    io::save_parameters(a, dir / "vit.safetensors");
    io::load_parameters(b, dir / "vit.safetensors");
    CHECK(b.logits(tb, images).value().to_vector() == want);
    io::load_parameters(d, dir / "vit.safetensors");
    Tape<double> td;
    const auto got = d.logits(td, images.to<double>()).value().to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("load_parameters refuses a wrong shape, a missing or an unexpected tensor, and changes nothing") {
  TempDir dir;
  Rng r1(1), r2(2);
  Exo::Module<float> a("", small(), r1);
  io::save_parameters(a, dir / "a.safetensors");
  const std::string file = (dir / "a.safetensors").string();

  SUBCASE("wrong shape: names the parameter, both shapes and the file") {
    auto c = small();
    c.ffn_hidden = 24;
    Exo::Module<float> b("", c, r2);
    const auto before = snapshot(b);
    CHECK_THROWS_WITH_AS(
        io::load_parameters(b, dir / "a.safetensors"),
        doctest::Contains(("tensor 'layers.0.ffn.down.weight' has shape [" +
                           std::to_string(a.layers[0].ffn.down.weight.shape()[0]) + ", 16], expected [24, 16]")
                              .c_str()),
        Error);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"), doctest::Contains(file.c_str()), Error);
    CHECK(snapshot(b) == before);
  }
  SUBCASE("missing tensor") {
    using WithRegs = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::Registers,
                                     mix::ExoFormer<mix::per_element, mix::Dynamic>>;
    WithRegs::Module<float> b("", small(), r2);
    const auto before = snapshot(b);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"),
                         doctest::Contains("no tensor 'tokens.registers' (expected shape [4, 16])"), Error);
    CHECK(snapshot(b) == before);
  }
  SUBCASE("unexpected tensor, unless allowed") {
    using NoMix = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::Sink>;
    NoMix::Module<float> b("", small(), r2);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"),
                         doctest::Contains("unexpected tensor 'mix.anchor_proj.weight'"), Error);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors", {.allow_extra = true}),
                         doctest::Contains("architecture mix: file 'ExoFormer', model 'None'"), Error);
    io::load_parameters(b, dir / "a.safetensors", {.allow_extra = true, .check_architecture = false});
    CHECK(b.embed.weight.value.to_vector() == a.embed.weight.value.to_vector());
  }
  SUBCASE("a file that is not a checkpoint") {
    io::write_file_atomically(dir / "junk.safetensors", std::string_view("not a safetensors file"));
    Exo::Module<float> b("", small(), r2);
    CHECK_THROWS_AS(io::load_parameters(b, dir / "junk.safetensors"), Error);
  }
}

TEST_CASE("a checkpoint describes its model; a load into a different one names each key on both sides") {
  TempDir dir;
  Rng r1(1), r2(2);
  using Plain = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
  using Clipped = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<score::ClippedSoftmax>, ffn::SwiGLU>;
  using VGA = attn::Attention<score::SoftmaxSink, gate::FromValue<gate::per_head, gate::on_values>, value::VScale>;
  using Gated = nn::Transformer<nn::PreNorm<norm::GatedNorm<norm::RMS, 4>>, VGA, ffn::SwiGLU>;
  Plain::Module<float> a("", small(), r1);
  io::save_parameters(a, dir / "a.safetensors", {{"step", "3"}});
  const io::SafetensorsFile f = io::SafetensorsFile::read(dir / "a.safetensors");
  CHECK(f.metadata().at("sinklab.model.model") == "decoder");
  CHECK(f.metadata().at("sinklab.model.attn.score") == "softmax");
  CHECK(f.metadata().at("sinklab.model.attn.gate") == "none");
  CHECK(f.metadata().at("sinklab.model.norm") == "RMS");
  CHECK(f.metadata().at("sinklab.model.norm.eps") == "1e-06");
  CHECK(f.metadata().at("sinklab.model.attn.qk_norm") == "RMS");
  CHECK(f.metadata().at("sinklab.model.heads") == "2");
  CHECK(f.metadata().at("sinklab.model.ffn.hidden") == std::to_string(ffn::glu_hidden(16)));
  CHECK(f.metadata().at("step") == "3");
  CHECK(f.metadata().count("sinklab.model.block") == 0);  // pre-norm: the key older checkpoints lack

  using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;
  using V = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP, tokens::Registers>;
  V::Module<float> vit("", nn::VitConfig{.image_h = 8, .image_w = 8, .patch = 4, .d_model = 16, .layers = 1}, r1);
  CHECK(vit.architecture().at("model") == "vit");
  CHECK(vit.architecture().at("attn.mask") == "bidirectional");
  CHECK(vit.architecture().at("tokens.count") == "4");
  CHECK(vit.architecture().at("norm.eps") == "1e-05");

  Gated::Module<float> g("", small(), r1);
  const nn::Architecture ga = g.architecture();
  CHECK(ga.at("norm") == "GatedNorm");
  CHECK(ga.at("norm.base") == "RMS");
  CHECK(ga.at("norm.rank") == "4");
  CHECK(ga.at("attn.score") == "softmax_sink");
  CHECK(ga.at("attn.gate") == "from_value");
  CHECK(ga.at("attn.gate.placement") == "on_values");
  CHECK(ga.at("attn.gate.granularity") == "per_head");
  CHECK(ga.at("attn.value") == "vscale");
  CHECK(ga.at("attn.value.c_scale") == "0.02");

  SUBCASE("same tensors, another score: refused, naming the key, and nothing changes") {
    Clipped::Module<float> b("", small(), r2);
    const auto before = snapshot(b);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"),
                         doctest::Contains("architecture attn.score: file 'softmax', model 'clipped_softmax'"), Error);
    CHECK(snapshot(b) == before);
    io::load_parameters(b, dir / "a.safetensors", {.check_architecture = false});
    CHECK(snapshot(b) == snapshot(a));
  }
  SUBCASE("same tensors, the post-norm layout: refused") {
    using PostPlain = nn::Transformer<nn::PostNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
    PostPlain::Module<float> b("", small(), r2);
    CHECK(b.architecture().at("block") == "post_norm");
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"),
                         doctest::Contains("architecture block: file <absent>, model 'post_norm'"), Error);
  }
  SUBCASE("same tensors, another setting") {
    auto c = small();
    c.rope_theta = 500000;
    Plain::Module<float> b("", c, r2);
    CHECK_THROWS_WITH_AS(io::load_parameters(b, dir / "a.safetensors"),
                         doctest::Contains("architecture rope_theta: file '10000', model '500000'"), Error);
  }
  SUBCASE("a file without a description loads on its shapes") {
    std::vector<std::pair<std::string, Tensor<float>>> tensors;
    a.parameters([&](Parameter<float>& p) { tensors.emplace_back(p.name, p.value); });
    io::save_safetensors<float>(dir / "plain.safetensors", tensors);
    Plain::Module<float> b("", small(), r2);
    io::load_parameters(b, dir / "plain.safetensors");
    CHECK(snapshot(b) == snapshot(a));
  }
}

TEST_CASE("AdamW state round-trips: resumed training matches uninterrupted training exactly") {
  TempDir dir;
  auto ids = Tensor<int32_t>::from({2, 5}, {1, 4, 9, 2, 0, 3, 3, 10, 7, 5});
  auto tg = Tensor<int32_t>::from({2, 5}, {4, 9, 2, 0, 6, 3, 10, 7, 5, 1});
  auto train = [&](auto& model, optim::AdamW<float>& opt, int steps) {
    Tape<float> t;
    for (int s = 0; s < steps; ++s) {
      t.clear();
      opt.zero_grad();
      auto loss = model.loss(t, ids, tg);
      t.backward(loss);
      opt.step();
    }
  };
  Rng r1(1), r2(2);
  Exo::Module<float> a("", small(), r1), b("", small(), r2);
  optim::AdamW<float> oa(nn::parameter_list<float>(a), {.lr = 1e-2});
  optim::AdamW<float> ob(nn::parameter_list<float>(b), {.lr = 1e-2});
  train(a, oa, 3);
  io::save_parameters(a, dir / "model.safetensors");
  io::save_optimizer_state(oa, dir / "opt.safetensors", {{"note", "three steps"}});
  train(a, oa, 2);

  io::load_parameters(b, dir / "model.safetensors");
  const io::Metadata meta = io::load_optimizer_state(ob, dir / "opt.safetensors");
  CHECK(meta.at("note") == "three steps");
  CHECK(meta.count("sinklab.step_count") == 0);
  CHECK(ob.step_count() == 3);
  CHECK(ob.state("embed.weight").step == 3);
  train(b, ob, 2);
  CHECK(snapshot(b) == snapshot(a));

  SUBCASE("refusals") {
    CHECK_THROWS_WITH_AS(io::load_optimizer_state(ob, dir / "model.safetensors"),
                         doctest::Contains("is not an AdamW state file"), Error);
    using NoMix = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE, tokens::Sink>;
    Rng r3(3);
    NoMix::Module<float> c("", small(), r3);
    auto params = nn::parameter_list<float>(c);
    optim::AdamW<float> oc(params);
    CHECK_THROWS_WITH_AS(io::load_optimizer_state(oc, dir / "opt.safetensors"),
                         doctest::Contains("unexpected tensor 'mix.anchor_proj.weight."), Error);
    CHECK(oc.step_count() == 0);
  }
}

TEST_CASE("every optimiser's state round-trips through the same checkpoint code (SGD, Muon, MuonAdamW)") {
  TempDir dir;
  auto ids = Tensor<int32_t>::from({2, 5}, {1, 4, 9, 2, 0, 3, 3, 10, 7, 5});
  auto tg = Tensor<int32_t>::from({2, 5}, {4, 9, 2, 0, 6, 3, 10, 7, 5, 1});
  auto train = [&](auto& model, auto& opt, int steps) {
    Tape<float> t;
    for (int s = 0; s < steps; ++s) {
      t.clear();
      opt.zero_grad();
      auto loss = model.loss(t, ids, tg);
      t.backward(loss);
      opt.step();
    }
  };
  // Trains a for 3 steps, saves, trains 2 more; b loads the save and trains 2: equal models.
  auto check = [&](auto make_opt, const char* kind) {
    CAPTURE(kind);
    Rng r1(1), r2(2);
    Exo::Module<float> a("", small(), r1), b("", small(), r2);
    auto oa = make_opt(a);
    auto ob = make_opt(b);
    train(a, oa, 3);
    io::save_parameters(a, dir / "m.safetensors");
    io::save_optimizer_state(oa, dir / "o.safetensors");
    train(a, oa, 2);
    io::load_parameters(b, dir / "m.safetensors");
    io::load_optimizer_state(ob, dir / "o.safetensors");
    CHECK(ob.step_count() == 3);
    train(b, ob, 2);
    CHECK(snapshot(b) == snapshot(a));
  };
  check([](auto& m) { return optim::SGD<float>(nn::parameter_list<float>(m), {.lr = 1e-2, .momentum = 0.9}); }, "SGD");
  check([](auto& m) { return optim::MuonAdamW<float>(nn::parameter_list<float>(m), {.lr = 1e-2}, {.lr = 1e-2}); },
        "MuonAdamW");
  // A state file names its optimiser; another optimiser refuses it.
  Rng r3(3);
  Exo::Module<float> c("", small(), r3);
  optim::AdamW<float> oc(nn::parameter_list<float>(c));
  CHECK_THROWS_WITH_AS(io::load_optimizer_state(oc, dir / "o.safetensors"),
                       doctest::Contains("is not an AdamW state file (metadata sinklab.optimizer = 'MuonAdamW')"), Error);
}
