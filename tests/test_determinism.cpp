// Training gives the same bits on any number of threads: every reduction splits its work into
// blocks fixed by the shapes (never by the thread count) and adds the blocks in a fixed order,
// so 1, 2 and 3 threads produce identical parameters.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/sgd.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

struct ThreadCount {
  int before = num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(before); }
};

std::vector<float> product(int threads, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta) {
  ThreadCount tc(threads);
  Rng rng(static_cast<uint64_t>(M * 131 + N * 7 + K));
  const Tensor<float> a = rng.normal<float>({M * K}), b = rng.normal<float>({K * N});
  std::vector<float> c = rng.normal<float>({M * N}).to_vector();
  kernels::cpu::gemm<float>(ta ? kernels::Trans::T : kernels::Trans::N, tb ? kernels::Trans::T : kernels::Trans::N, M,
                            N, K, 0.5f, a.data(), ta ? M : K, b.data(), tb ? K : N, beta, c.data(), N);
  return c;
}

using GA = attn::Attention<score::Softmax, gate::FromInput<gate::per_head, gate::on_output>>;
using Plain = nn::Transformer<nn::PreNorm<norm::RMS>, GA, ffn::SwiGLU, pos::RoPE>;
// Grouped keys, a value gate, a gated norm, a sink token and ExoFormer's dynamic mixing.
using VGA = attn::Attention<score::Softmax, gate::FromValue<gate::per_channel, gate::on_values>>;
using Exo = nn::Transformer<nn::PreNorm<norm::GatedNorm<norm::RMS>>, VGA, ffn::SwiGLU, pos::RoPE, tokens::Sink,
                            mix::ExoFormer<mix::per_element, mix::Dynamic>>;

// A few steps of training from the same seed; the parameters afterwards.
template <class Model, class MakeOpt>
std::vector<std::vector<float>> train(int threads, MakeOpt make_opt) {
  ThreadCount tc(threads);
  nn::ModelConfig cfg;
  cfg.vocab = 61;
  cfg.d_model = 64;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.kv_heads = std::is_same_v<Model, Exo> ? 2 : 4;
  Rng rng(11);
  typename Model::template Module<float> model("", cfg, rng);
  auto opt = make_opt(model);
  const int64_t B = 8, T = 128;  // 1024 tokens: weight gradients are long-K products
  Rng data(5);
  Tape<float> tape;
  for (int step = 0; step < 3; ++step) {
    auto ids = Tensor<int32_t>::empty({B, T});
    auto tg = Tensor<int32_t>::empty({B, T});
    for (int64_t i = 0; i < B * T; ++i) {
      ids.data()[i] = static_cast<int32_t>(data.randint(0, cfg.vocab));
      tg.data()[i] = static_cast<int32_t>(data.randint(0, cfg.vocab));
    }
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, ids, tg);
    tape.backward(loss);
    opt.step();
  }
  std::vector<std::vector<float>> params;
  model.parameters([&](Parameter<float>& p) { params.push_back(p.value.to_vector()); });
  return params;
}

}  // namespace

TEST_CASE("gemm: the same bits on 1, 2 and 3 threads, on every path (tiles, shared packing, split K)") {
  const int64_t sizes[][3] = {{37, 200, 300}, {300, 33, 17},  {128, 688, 260}, {40, 70, 1100},
                              {64, 64, 1024}, {250, 600, 520}, {256, 192, 64},  {64, 176, 4096}};
  for (const auto& s : sizes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          CAPTURE(s[0]);
          CAPTURE(s[1]);
          CAPTURE(s[2]);
          CAPTURE(ta);
          CAPTURE(tb);
          const auto one = product(1, s[0], s[1], s[2], ta, tb, beta);
          CHECK(product(2, s[0], s[1], s[2], ta, tb, beta) == one);
          CHECK(product(3, s[0], s[1], s[2], ta, tb, beta) == one);
        }
}

TEST_CASE_TEMPLATE("training: the same parameters, bit for bit, on 1, 2 and 3 threads (AdamW and Muon)", Model, Plain,
                   Exo) {
  auto adamw = [](auto& m) { return optim::AdamW<float>(nn::parameter_list<float>(m), {.lr = 3e-3}); };
  auto muon = [](auto& m) { return optim::MuonAdamW<float>(nn::parameter_list<float>(m), {.lr = 2e-2}, {.lr = 3e-3}); };
  const auto a1 = train<Model>(1, adamw);
  CHECK(train<Model>(2, adamw) == a1);
  CHECK(train<Model>(3, adamw) == a1);
  const auto m1 = train<Model>(1, muon);
  CHECK(train<Model>(2, muon) == m1);
  CHECK(train<Model>(3, muon) == m1);
}

// The optimisers' in-place update (kernels::cpu::apply_update) on a parameter large enough to be
// split over the threads, at a length that leaves a scalar tail: the same bits on 1, 2 and 3
// threads. (The scalar path may fuse multiply-adds the SIMD path does not; a tail at the end of
// every thread's chunk made SGD and AdamW depend on the thread count.)
TEST_CASE("optimiser steps on a long parameter: the same bits on 1, 2 and 3 threads (SGD, AdamW, Muon)") {
  const int64_t rows = 263, cols = 1001;  // 263,263 elements: several chunks, a tail of 7 or 15
  auto run = [&](int threads, const std::string& kind) {
    ThreadCount tc(threads);
    Rng rng(4);
    Parameter<float> p("w", rng.normal<float>({rows, cols}, 0.f, 1.f));
    std::vector<Parameter<float>*> ps{&p};
    optim::SGD<float> sgd(ps, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    optim::AdamW<float> adamw(ps, {.lr = 1e-2});
    optim::Muon<float> muon(ps, {.lr = 0.02, .weight_decay = 0.01});
    for (int step = 0; step < 3; ++step) {
      p.grad.copy_from(rng.normal<float>({rows, cols}, 0.f, 1.f));
      if (kind == "sgd") sgd.step();
      else if (kind == "adamw") adamw.step();
      else muon.step();
    }
    return p.value.to_vector();
  };
  for (const char* kind : {"sgd", "adamw", "muon"}) {
    INFO(kind);
    const std::vector<float> one = run(1, kind);
    CHECK(run(2, kind) == one);
    CHECK(run(3, kind) == one);
  }
}
