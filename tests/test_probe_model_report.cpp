// probe::model_report: every metric on a hand-built probe with known answers, every field filled
// and finite on a briefly trained model (GQA, gradients probed), and the JSONL / CSV rows.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sinklab/probe/report_log.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/probe/model_report.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using doctest::Approx;

namespace {

constexpr int64_t B = 2, H = 2, Tn = 6, D = 4, dh = 2;

Tensor<double> filled(const Shape& s, double v) { return Tensor<double>::full(s, v); }

// One layer whose every recorded tensor is chosen so each metric has a closed-form value.
nn::ModelProbe<double> hand_built_probe() {
  nn::ModelProbe<double> pr;
  pr.layers.resize(1);
  auto& L = pr.layers[0];
  auto& a = L.attn;
  a.weights = Tensor<double>::zeros({B, H, Tn, Tn});
  a.logits = filled({B, H, Tn, Tn}, -INFINITY);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tn; ++i) {
      a.weights(b, 0, i, 0) = 1.0;  // head 0: every query on key 0
      a.weights(b, 1, i, i) = 1.0;  // head 1: every query on itself
      for (int64_t j = 0; j <= i; ++j) {
        a.logits(b, 0, i, j) = j == 0 ? 5.0 : 0.0;
        a.logits(b, 1, i, j) = j == i ? 2.0 : 0.0;
      }
    }
  a.values = Tensor<double>::zeros({B, H, Tn, dh});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Tn; ++t) a.values(b, h, t, 0) = t == 0 ? 0.1 : 1.0;
  a.keys = a.values.clone();
  for (int64_t k = 0; k < a.keys.numel(); ++k) a.keys.data()[k] *= 3.0;  // ‖k_0‖ / ‖k_j‖ = 0.1 as for v
  a.grad_q = Tensor<double>::zeros({B, H, Tn, dh});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Tn; ++t) {
        a.grad_q(b, h, t, 0) = t == 0 ? 3.0 : 0.0;
        a.grad_q(b, h, t, 1) = t == 0 ? 4.0 : 1.0;
      }
  a.grad_k = a.grad_q;
  a.grad_v = a.grad_q;

  // Residual stream: token 0 is a massive activation in dimension 2, the others (1, 1, 1, 1).
  Tensor<double> res = filled({B, Tn, D}, 1.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d) res(b, 0, d) = 0.0;
    res(b, 0, 2) = 100.0;
  }
  L.input = res;
  L.mid = res;
  L.output = res;
  Tensor<double> emb = res.clone();
  for (int64_t k = 0; k < emb.numel(); ++k) emb.data()[k] *= 2.0;
  pr.embeddings = emb;
  // Rank-one attention update: row t = (t + 1)·(1, 2, 0, 0).
  L.attn_out = Tensor<double>::zeros({B, Tn, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      L.attn_out(b, t, 0) = double(t + 1);
      L.attn_out(b, t, 1) = 2.0 * double(t + 1);
    }
  Rng rng(4);
  L.attn_in = rng.normal<double>({B, Tn, D}, 0.0, 1.0);
  L.ffn_in = rng.normal<double>({B, Tn, D}, 0.0, 1.0);
  L.ffn_out = rng.normal<double>({B, Tn, D}, 0.0, 1.0);
  pr.final_hidden = rng.normal<double>({B, Tn, D}, 0.0, 1.0);
  // Gradients: constant per branch, so the ratios are ratios of the constants.
  L.grad_input = filled({B, Tn, D}, 3.0);
  L.grad_attn_in = filled({B, Tn, D}, 2.0);
  L.grad_attn_out = filled({B, Tn, D}, 1.0);
  L.grad_mid = filled({B, Tn, D}, 1.0);
  L.grad_ffn_in = filled({B, Tn, D}, 4.0);
  L.grad_ffn_out = filled({B, Tn, D}, 0.5);
  L.grad_output = filled({B, Tn, D}, 0.5);
  return pr;
}

void check_finite(double v, const std::string& what) {
  INFO(what);
  CHECK(std::isfinite(v));
}
void check_heads(const probe::PerHead& p, int64_t heads, const std::string& what) {
  INFO(what);
  REQUIRE(p.heads() == heads);
  for (double v : p.values) check_finite(v, what);
}
void check_tokens(const probe::TokenSummary& s, int64_t n, const std::string& what) {
  INFO(what);
  REQUIRE(static_cast<int64_t>(s.per_token.size()) == n);
  for (double v : s.per_token) check_finite(v, what);
}

}  // namespace

TEST_CASE("model report on a hand-built probe gives the known answers") {
  const auto pr = hand_built_probe();
  probe::LayerWeights<double> w;
  w.heads = w.kv_heads = H;
  w.w_o = Tensor<double>::zeros({H * dh, D});
  w.w_q = Tensor<double>::zeros({D, H * dh});
  w.w_k = Tensor<double>::zeros({D, H * dh});
  for (int64_t k = 0; k < D; ++k) {
    w.w_o(k, k) = 1.0;
    w.w_q(k, k) = 1.0;
    w.w_k(k, k) = 2.0;
  }
  const probe::ModelReport r = probe::model_report(pr, {w});
  REQUIRE(r.layers.size() == 1);
  CHECK(r.attention);
  CHECK(r.gradients);
  const auto& L = r.layers[0];

  CHECK(L.sink_score[0] == Approx(1.0));
  CHECK(L.sink_score[1] == Approx(1.0 / 6));
  CHECK(L.sink_key == std::vector<int64_t>{0, 0});
  CHECK(L.attn_to_sink[0] == Approx(1.0));
  CHECK(L.attn_to_sink[1] == Approx(1.0 / 6));
  CHECK(L.sink_rate.rate == Approx(0.5));
  CHECK(L.sink_rate.alpha[1] == Approx(1.0 / 6));
  CHECK(L.sink_rate_high.rate == Approx(0.5));  // head 0's α = 1 > 0.8
  CHECK(L.sink_rate_high.epsilon == 0.8);
  CHECK(L.column_mass.mass[0] == Approx(1.0));
  CHECK(L.column_mass.second_moment[1] == Approx(1.0 / 6));
  CHECK(L.delta_logit[0] == Approx(5.0));
  CHECK(L.delta_logit[1] == Approx(0.0));
  CHECK(L.value_norm[0] == Approx(0.1));
  CHECK(L.value_norm_ratio[1] == Approx(0.1));
  CHECK(L.key_norm_ratio[0] == Approx(0.1));
  CHECK(L.output_value_norm[1] == Approx(0.1));
  CHECK(L.output_value_norm_ratio[0] == Approx(0.1));
  CHECK(L.qk_top_singular[0] == Approx(2.0));
  CHECK(L.qk_top_singular[1] == Approx(2.0));

  CHECK(L.residual_max_abs == std::vector<double>{1.0, 1.0, 100.0, 1.0});
  CHECK(L.residual_top[0].dim == 2);
  // 48 entries: 6 zeros, 40 ones, two 100s at token 0, channel 2 → median 1, ratio 100.
  CHECK(L.massive.ratio == Approx(100.0));
  CHECK(L.massive.token == 0);
  CHECK(L.massive.channel == 2);
  CHECK(L.massive.token_share == Approx(1.0));
  CHECK(r.massive_layer == 0);
  CHECK(r.massive.ratio == Approx(100.0));
  CHECK(r.seq_len == Tn);
  CHECK(L.residual_norms.token0 == Approx(100.0));
  CHECK(L.residual_norms.rest_mean == Approx(2.0));
  CHECK(L.residual_norms.last == Tn - 1);
  CHECK(L.attn_norms.token0 == Approx(std::sqrt(5.0)));
  CHECK(L.attn_norms.rest_mean == Approx(4.0 * std::sqrt(5.0)));
  CHECK(L.attn_stable_rank == Approx(1.0));
  // cos(e₂, (1,1,1,1)/2) = 1/2 on the 10 ordered pairs with token 0, 1 on the other 20.
  CHECK(L.token_cosine == Approx(25.0 / 30.0));
  CHECK(L.cosine_to_embedding == Approx(1.0));
  CHECK(L.pca.components == 1);

  CHECK(L.grad_q.token0() == Approx(5.0));
  CHECK(L.grad_v.rest() == Approx(1.0));
  CHECK(L.attn_branch.bloat.token0() == Approx(2.0));
  CHECK(L.attn_branch.compress.rest() == Approx(1.0));
  CHECK(L.attn_branch.change.token0() == Approx(3.0));
  CHECK(L.ffn_branch.bloat.rest() == Approx(8.0));
  CHECK(L.ffn_branch.compress.token0() == Approx(0.125));
  CHECK(L.ffn_branch.change.rest() == Approx(2.0));

  REQUIRE(r.modules.size() == 8);  // embeddings, 6 per layer, final norm
  CHECK(r.modules.front().name == "embeddings");
  CHECK(r.modules[6].name == "layers.0.output");
  CHECK(r.modules[6].max_inf_norm == Approx(100.0));
  CHECK(r.max_inf_norm == Approx(200.0));  // the embeddings, 2 × the residual stream
  CHECK(r.residual_top[0].value == Approx(100.0));

  SUBCASE("without weights or gradients those fields stay empty, the rest is unchanged") {
    auto bare = pr;
    for (auto& l : bare.layers) {
      l.grad_input = {};
      l.attn.grad_q = {};
    }
    const auto r2 = probe::model_report(bare);
    CHECK_FALSE(r2.gradients);
    CHECK(r2.layers[0].output_value_norm.values.empty());
    CHECK(r2.layers[0].qk_top_singular.values.empty());
    CHECK(r2.layers[0].grad_q.per_token.empty());
    CHECK(r2.layers[0].attn_branch.bloat.per_token.empty());
    CHECK(r2.layers[0].sink_score[0] == Approx(1.0));
  }
  SUBCASE("errors") {
    CHECK_THROWS_WITH_AS(probe::model_report(nn::ModelProbe<double>{}), doctest::Contains("no layer"), Error);
    CHECK_THROWS_WITH_AS(probe::model_report(pr, {w, w}), doctest::Contains("2 layer weights for 1"), Error);
  }
}

TEST_CASE("model report of a briefly trained GQA model: every field filled and finite, logged as JSONL and CSV") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
  nn::ModelConfig cfg;
  cfg.vocab = 12;
  cfg.d_model = 16;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  cfg.ffn_hidden = 32;
  Rng rng(9);
  M::Module<float> model("", cfg, rng);
  optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = 1e-2, .weight_decay = 0.0});
  const int64_t Bt = 4, T = 10;
  auto make = [&](Rng& r) {
    Tensor<int32_t> x = Tensor<int32_t>::empty({Bt, T}), y = Tensor<int32_t>::empty({Bt, T});
    for (int64_t b = 0; b < Bt; ++b) {
      const int32_t start = static_cast<int32_t>(r.randint(0, cfg.vocab));
      for (int64_t t = 0; t < T; ++t) {
        x(b, t) = static_cast<int32_t>((start + 3 * t) % cfg.vocab);
        y(b, t) = static_cast<int32_t>((start + 3 * t + 3) % cfg.vocab);
      }
    }
    return std::pair{x, y};
  };
  Tape<float> tape;
  Rng drng(10);
  for (int step = 0; step < 20; ++step) {
    auto [x, y] = make(drng);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, x, y);
    tape.backward(loss);
    opt.step();
  }
  auto [x, y] = make(drng);
  nn::ModelProbe<float> pr;
  pr.gradients = true;
  tape.clear();
  auto loss = model.loss(tape, x, y, &pr);
  tape.backward(loss);

  const probe::ModelReport r = probe::model_report(model, pr);
  CHECK(r.attention);
  CHECK(r.gradients);
  REQUIRE(r.layers.size() == 2);
  for (const auto& L : r.layers) {
    const std::string l = "layer " + std::to_string(L.layer) + " ";
    check_heads(L.sink_score, 4, l + "sink score");
    check_heads(L.attn_to_sink, 4, l + "Attn_<s>");
    check_heads(L.sink_rate.alpha, 4, l + "sink alpha");
    check_finite(L.sink_rate.rate, l + "sink rate");
    CHECK(L.sink_rate.window == T);
    check_heads(L.column_mass.mass, 4, l + "column mass");
    check_heads(L.column_mass.second_moment, 4, l + "column second moment");
    check_heads(L.delta_logit, 4, l + "delta logit");
    check_heads(L.value_norm, 2, l + "value norm (kv heads)");
    check_heads(L.value_norm_ratio, 2, l + "value norm ratio");
    check_heads(L.key_norm_ratio, 2, l + "key norm ratio");
    check_finite(L.sink_rate_high.rate, l + "sink rate at 0.8");
    check_finite(L.massive.ratio, l + "massive activation");
    CHECK(L.massive.token >= 0);
    CHECK(L.massive.token < T);
    check_heads(L.output_value_norm, 4, l + "W_O value norm");
    check_heads(L.output_value_norm_ratio, 4, l + "W_O value norm ratio");
    check_heads(L.qk_top_singular, 4, l + "qk sigma1");
    REQUIRE(L.residual_max_abs.size() == 16u);
    for (double v : L.residual_max_abs) check_finite(v, l + "residual max");
    CHECK(L.residual_top.size() == 4u);
    for (const auto* e : {&L.residual_norms, &L.attn_norms, &L.ffn_norms}) {
      check_finite(e->token0, l + "early norms");
      check_finite(e->rest_mean, l + "early norms");
      CHECK(e->last == 9);
    }
    check_finite(L.attn_stable_rank, l + "stable rank");
    CHECK(L.attn_stable_rank >= 1.0);
    check_finite(L.token_cosine, l + "token cosine");
    check_finite(L.cosine_to_embedding, l + "cosine to embedding");
    CHECK(L.pca.components >= 1);
    CHECK(L.pca.components <= 16);
    for (const auto* g : {&L.grad_q, &L.grad_k, &L.grad_v}) check_tokens(*g, T, l + "token grad norms");
    for (const auto* b : {&L.attn_branch, &L.ffn_branch}) {
      check_tokens(b->bloat, T, l + "bloat");
      check_tokens(b->compress, T, l + "compress");
      check_tokens(b->change, T, l + "change");
    }
  }
  CHECK(r.modules.size() == 2 + 6 * 2);
  for (const auto& m : r.modules) {
    check_finite(m.mean_kurtosis, m.name);
    CHECK(m.samples == Bt);
  }
  check_finite(r.max_inf_norm, "max inf norm");
  check_finite(r.avg_kurtosis, "avg kurtosis");

  const auto dir = std::filesystem::temp_directory_path() / ("sinklab_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    io::JsonlLog jl(dir / "report.jsonl");
    probe::write_report(jl, r, {{"step", 20}, {"variant", "vanilla"}});
    io::CsvLog csv(dir / "report.csv");
    probe::write_report(csv, r, {{"step", 20}});
    probe::write_report(csv, r, {{"step", 21}});  // a second report fits the same columns
  }
  std::ifstream jin(dir / "report.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(jin, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["row"] == "model");
  CHECK(lines[0]["max_inf_norm"].is_number());
  CHECK(lines[1]["layer"] == 0);
  CHECK(lines[2]["sink_score.h3"].is_number());
  CHECK(lines[2]["ffn.change.tok0"].is_number());
  for (const auto& j : lines)
    for (const auto& [k, v] : j.items()) {
      INFO(k);
      CHECK(!v.is_null());  // null would mean a NaN or infinity was logged
    }
  std::ifstream cin(dir / "report.csv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(cin, line);) rows.push_back(line);
  REQUIRE(rows.size() == 1 + 4);
  CHECK(rows[0].rfind("step,layer,sink_score.h0", 0) == 0);
  std::filesystem::remove_all(dir);
}
