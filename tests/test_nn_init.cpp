// nn::Init::pytorch(): a Transformer built with PyTorch's module defaults starts as plain
// PyTorch modules would (Embedding N(0, 1), Linear U(±1/√fan_in) with fan_in = in, LayerNorm
// γ = 1, β = 0); the default N(0, 0.02) is unchanged; tensors with no fan-in fail loudly.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

#include "sinklab/nn/transformer.hpp"

using namespace sinklab;

namespace {

using VgaVanilla = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<>, ffn::ReluMLP, pos::Learned>;

struct Stats {
  double mean = 0, var = 0, max_abs = 0;  // var about 0 (the schemes are all zero-mean)
};

template <class T>
Stats stats(const Tensor<T>& t) {
  Stats s;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(t.data()[i]);
    s.mean += x;
    s.var += x * x;
    s.max_abs = std::max(s.max_abs, std::abs(x));
  }
  s.mean /= static_cast<double>(n);
  s.var /= static_cast<double>(n);
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

nn::ModelConfig vga_cfg(nn::Init init) {
  nn::ModelConfig c;
  c.vocab = 50;
  c.d_model = 64;
  c.layers = 1;
  c.heads = 4;
  c.max_len = 256;
  c.init = init;
  return c;
}

// U(−b, b): every |w| ≤ b, the largest close to b, and E[w²] = b²/3. The relative sampling error
// of E[w²] over n draws is √(0.8/n) (≤ 1.4% for n ≥ 4096); 8% is > 5σ and still catches a
// fan-in off by the 64 vs 50 of lm_head (a 28% change in variance).
void check_uniform(const std::string& name, const Stats& s, double bound) {
  INFO(name << ": bound " << bound << ", max |w| " << s.max_abs << ", E[w²] " << s.var << ", expected "
            << bound * bound / 3);
  CHECK(s.max_abs <= bound);
  CHECK(s.max_abs >= 0.98 * bound);
  CHECK(s.var == doctest::Approx(bound * bound / 3).epsilon(0.08));
  CHECK(std::abs(s.mean) < 0.05 * bound);
}

}  // namespace

TEST_CASE("Init::pytorch(): a VGA-paper Transformer starts with PyTorch's module defaults") {
  Rng rng(7);
  VgaVanilla::Module<float> model("", vga_cfg(nn::Init::pytorch()), rng);

  std::map<std::string, int64_t> fan_in_seen;  // linear weights checked, by name
  int norms = 0;
  for (auto* p : nn::parameter_list<float>(model)) {
    const Tensor<float>& w = p->value;
    const Stats s = stats(w);
    if (p->name == "embed.weight" || p->name == "pos.weight") {
      // nn.Embedding: N(0, 1). Sampling error of the std over n ≥ 3200 draws: ≤ 1/√(2n) ≈ 0.0125.
      INFO(p->name << ": std " << std::sqrt(s.var));
      CHECK(std::sqrt(s.var) == doctest::Approx(1.0).epsilon(0.06));
      CHECK(std::abs(s.mean) < 0.08);
      CHECK(s.max_abs > 2.5);  // a normal, not a uniform of half-width √3
    } else if (ends_with(p->name, "norm.weight")) {
      CHECK(w.shape().rank() == 1);
      CHECK(s.mean == 1.0);
      CHECK(s.var == 1.0);
      ++norms;
    } else if (ends_with(p->name, "norm.bias")) {
      CHECK(s.max_abs == 0.0);
      ++norms;
    } else {
      // Every other parameter of this model is a linear weight stored [in, out]: fan_in = in.
      INFO(p->name << " has shape " << w.shape());
      REQUIRE(w.shape().rank() == 2);
      check_uniform(p->name, s, 1.0 / std::sqrt(static_cast<double>(w.shape()[0])));
      fan_in_seen[p->name] = w.shape()[0];
    }
  }
  CHECK(norms == 6);  // attn_norm, ffn_norm, final_norm: γ and β each
  // The fused QKV [D, 3D] has fan_in D, as PyTorch's separate q/k/v Linear(D, D).
  CHECK(fan_in_seen == std::map<std::string, int64_t>{{"layers.0.attn.qkv.weight", 64},
                                                      {"layers.0.attn.o.weight", 64},
                                                      {"layers.0.ffn.fc1.weight", 64},
                                                      {"layers.0.ffn.fc2.weight", 256},
                                                      {"lm_head.weight", 64}});
}

TEST_CASE("Init::pytorch(): Linear biases, learnable tokens, and the embedding/bias helpers") {
  SUBCASE("a Linear's bias is U(±1/√in) under pytorch(), 0 under every other scheme") {
    Rng rng(3);
    nn::Linear<double> lin("proj", 16, 4096, rng, nn::Init::pytorch(), true);
    check_uniform("proj.weight", stats(lin.weight.value), 0.25);
    check_uniform("proj.bias", stats(lin.bias.value), 0.25);
    nn::Linear<double> plain("plain", 16, 64, rng, nn::Init::normal(0.5), true);
    CHECK(stats(plain.bias.value).max_abs == 0.0);
  }
  SUBCASE("learnable tokens are a table: N(0, 1) under pytorch()") {
    Rng rng(4);
    tokens::Registers::Module<float> reg("reg", 64, rng, tokens::Options{.count = 64, .init = nn::Init::pytorch()});
    CHECK(std::sqrt(stats(reg.weight.value).var) == doctest::Approx(1.0).epsilon(0.06));
  }
  SUBCASE("for_embedding() and for_bias() leave the other schemes alone") {
    for (nn::Init i : {nn::Init::normal(0.3), nn::Init::truncated_normal(0.1), nn::Init::uniform(0.2),
                       nn::Init::constant(1.5)}) {
      CHECK(i.for_embedding().kind == i.kind);
      CHECK(i.for_embedding().a == i.a);
      CHECK(i.for_bias(9).kind == nn::Init::Kind::Constant);
      CHECK(i.for_bias(9).a == 0.0);
    }
    CHECK(nn::Init::pytorch().for_embedding().kind == nn::Init::Kind::Normal);
    CHECK(nn::Init::pytorch().for_embedding().a == 1.0);
    CHECK(nn::Init::pytorch().for_bias(9).kind == nn::Init::Kind::Uniform);
    CHECK(nn::Init::pytorch().for_bias(9).a == doctest::Approx(1.0 / 3));
  }
  SUBCASE("a tensor with no known fan-in throws, naming its shape") {
    Rng rng(5);
    CHECK_THROWS_WITH_AS(nn::make_tensor<float>({7}, nn::Init::pytorch(), rng),
                         doctest::Contains("Init::pytorch() treats a tensor as a Linear weight [in, out] (fan_in = "
                                           "shape[0]), but got shape [7]"),
                         Error);
    CHECK_THROWS_WITH_AS(nn::make_tensor<float>({2, 3, 4}, nn::Init::pytorch(), rng),
                         doctest::Contains("got shape [2, 3, 4]"), Error);
  }
}

TEST_CASE("the default init is unchanged: N(0, 0.02) everywhere, biases 0, norms 1 / 0") {
  const nn::ModelConfig cfg = vga_cfg(nn::ModelConfig{}.init);
  CHECK(cfg.init.kind == nn::Init::Kind::Normal);
  CHECK(cfg.init.a == 0.02);
  Rng rng(7);
  VgaVanilla::Module<float> model("", cfg, rng);
  // The embedding is the first draw: bit-identical to a plain N(0, 0.02) tensor from the same seed.
  Rng ref(7);
  const Tensor<float> expect = nn::make_tensor<float>({50, 64}, nn::Init::normal(0.02), ref);
  bool same = true;
  for (int64_t i = 0; i < expect.numel(); ++i) same = same && expect.data()[i] == model.embed.weight.value.data()[i];
  CHECK(same);
  for (auto* p : nn::parameter_list<float>(model)) {
    const Stats s = stats(p->value);
    INFO(p->name << ": std " << std::sqrt(s.var));
    if (ends_with(p->name, "norm.weight"))
      CHECK(s.var == 1.0);
    else if (ends_with(p->name, "norm.bias"))
      CHECK(s.max_abs == 0.0);
    else
      CHECK(std::sqrt(s.var) == doctest::Approx(0.02).epsilon(0.06));
  }
}
