// autodiff::profile: op names from backward closures, sections from labels, and that a tape
// reports nothing without an active profiler.
#include <doctest/doctest.h>

#include <algorithm>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/profile.hpp"
#include "sinklab/nn/transformer.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {
const profile::Profiler::Entry* find(const profile::Profiler& p, const std::string& section, const std::string& op) {
  for (const auto& e : p.entries())
    if (e.section == section && e.op == op) return &e;
  return nullptr;
}
}  // namespace

TEST_CASE("profile: ops are named after the function that records them, sections after labels") {
  Tape<float> t;
  profile::Profiler prof;
  {
    profile::Session on(prof);
    auto a = t.leaf(Tensor<float>::full({4, 3}, 1.f));
    auto b = t.leaf(Tensor<float>::full({3, 2}, 2.f));
    Var<float> y;
    {
      profile::Label l("block", 2);
      profile::Label inner("proj");
      y = matmul(a, b);
    }
    t.backward(sum(y));
  }
  const auto* mm = find(prof, "block.2/proj", "matmul");
  REQUIRE(mm != nullptr);
  CHECK(mm->forward_calls == 1);
  CHECK(mm->backward_calls == 1);
  const auto* s = find(prof, "", "sum");
  REQUIRE(s != nullptr);
  CHECK(s->backward_calls == 1);
  const auto* leaf = find(prof, "", "leaf");
  REQUIRE(leaf != nullptr);
  CHECK(leaf->forward_calls == 2);
  CHECK(leaf->backward_calls == 0);
}

TEST_CASE("profile: nothing is recorded without a session, and a session ends with its scope") {
  Tape<float> t;
  profile::Profiler prof;
  { profile::Session on(prof); }
  CHECK(profile::active() == nullptr);
  profile::Label ignored("unused");
  auto a = t.leaf(Tensor<float>::full({2}, 1.f));
  t.backward(sum(a * a));
  CHECK(prof.entries().empty());
}

TEST_CASE("profile: a transformer's nodes fall into per-layer sections") {
  nn::ModelConfig cfg;
  cfg.vocab = 16;
  cfg.d_model = 8;
  cfg.heads = 2;
  cfg.layers = 2;
  Rng rng(3);
  nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>::Module<float> model("", cfg, rng);
  Tensor<int32_t> ids = Tensor<int32_t>::zeros({1, 4});
  Tape<float> t;
  profile::Profiler prof;
  {
    profile::Session on(prof);
    t.backward(model.loss(t, ids, ids));
  }
  for (const char* section : {"layers.0/attn", "layers.1/attn"}) {
    const auto* e = find(prof, section, "matmul");
    REQUIRE_MESSAGE(e != nullptr, section);
    CHECK(e->backward_calls >= 2);
  }
  const auto* ffn = find(prof, "layers.1/ffn", "glu_mlp");  // the whole SwiGLU block: one node
  REQUIRE(ffn != nullptr);
  CHECK(ffn->backward_calls == 1);
  CHECK(find(prof, "loss", "cross_entropy") != nullptr);
  CHECK(find(prof, "embed", "embedding") != nullptr);
}
