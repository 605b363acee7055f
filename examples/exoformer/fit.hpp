// examples/exoformer: one run of one architecture — the paired start, Muon + AdamW training,
// the per-evaluation measurements, and at the end the learned mixing coefficients. Included by
// the arch_*.cpp files, which name the architectures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/nn/mix.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/representation.hpp"
#include "sinklab/quant/model.hpp"
#include "study.hpp"

namespace exoformer {

using namespace sinklab;

// Every variant of a seed starts from the base model's initial tensors (copied by name; a
// variant's own tensors — gate, anchor projection, norms of the anchors, λ — keep their own).
using Base = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
// The paper's gate (Qiu et al.'s G1): σ(X·W_G) per channel of the SDPA output, before W_O.
using Gated = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;
template <class Attn, class Mix = mix::None>
using Decoder = nn::Transformer<nn::PreNorm<norm::RMS>, Attn, ffn::SwiGLU, pos::RoPE, tokens::None, Mix>;

// Muon takes the 2-D weight matrices (projections, the anchor projection, the dynamic-mixing
// MLP); AdamW the rest: norms' gains, the λ (element-wise λ are [heads, channels] matrices but
// are coefficients, not maps), embeddings and the head.
inline bool muon_route(const autodiff::Parameter<float>& p) {
  const auto dot = p.name.rfind('.');
  const std::string last = dot == std::string::npos ? p.name : p.name.substr(dot + 1);
  return last.rfind("lambda", 0) != 0 && optim::default_muon_route(p);
}

// What one evaluation reads off the probe batch, per layer ("L<i>_..."), and averaged over layers:
//   sink       mean attention of queries 1..T−1 to key 0, over heads (the paper's "attention sink")
//   token_sim  mean cosine between the token representations of a sequence (layer output)
//   emb_cos    mean cosine between a token's layer output and its input embedding
//   pca        PCA core features: components explaining pca_threshold of the layer output's variance
inline void representation_metrics(const nn::ModelProbe<float>& pr, double pca_threshold, io::LogRow& row) {
  const auto L = static_cast<int64_t>(pr.layers.size());
  double sink = 0, sim = 0, emb = 0, pca = 0;
  for (int64_t i = 0; i < L; ++i) {
    const auto& rec = pr.layers[static_cast<std::size_t>(i)];
    const double s = probe::first_key_attention(rec.attn.weights).mean();
    const double ts = probe::mean_pairwise_cosine(rec.output);
    const double ec = probe::cosine_to_embedding(rec.output, pr.embeddings);
    const auto pc = static_cast<double>(probe::pca_core_features(rec.output, pca_threshold).components);
    const std::string p = "L" + std::to_string(i) + "_";
    row.emplace_back(p + "sink", s);
    row.emplace_back(p + "token_sim", ts);
    row.emplace_back(p + "emb_cos", ec);
    row.emplace_back(p + "pca", pc);
    sink += s, sim += ts, emb += ec, pca += pc;
  }
  const double n = static_cast<double>(std::max<int64_t>(L, 1));
  row.emplace_back("sink", sink / n);
  row.emplace_back("token_sim", sim / n);
  row.emplace_back("emb_cos", emb / n);
  row.emplace_back("pca", pca / n);
}

inline double mean_of(const Tensor<float>& t) {
  double s = 0;
  const Tensor<float> c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) s += c.data()[i];
  return c.numel() ? s / double(c.numel()) : NAN;
}

// The learned mixing coefficients of the final model, per layer n ("L<n>_<s>_..." for s in q, k,
// v, g): lambda1 (anchor) and lambda2 (current layer), their means over the coefficient's
// entries; with dynamic mixing also the mean and spread over the probe batch's tokens of the
// modulation γ of each term (the effective coefficient is λ·γ).
template <class Model>
experiment::Json mixing_coefficients(typename Model::template Module<float>& model, const nn::ModelProbe<float>& pr) {
  experiment::Json j;
  auto& mx = model.mixer;
  if constexpr (requires { mx.coeffs; mx.first_layer; }) {
    static constexpr const char* comp[4] = {"q", "k", "v", "g"};
    for (int64_t n = mx.first_layer; n < mx.dims.layers; ++n) {
      auto& lc = mx.coeffs[static_cast<std::size_t>(n - mx.first_layer)];
      const std::string p = "L" + std::to_string(n) + "_";
      Tensor<float> gamma;  // [B·T, 8 or 6]
      if (lc.dynamic) {
        autodiff::no_grad ng;
        autodiff::Tape<float> t;
        auto x = t.constant(pr.layers[static_cast<std::size_t>(n)].attn_in);
        const Tensor<float> g = autodiff::sigmoid(lc.fc2(t, autodiff::gelu(lc.fc1(t, x)))).value().contiguous();
        gamma = g.view({g.numel() / g.size(-1), g.size(-1)});
      }
      for (int c = 0; c < 4; ++c) {
        if (!mx.on[c]) continue;
        for (int i = 0; i < 2; ++i) {
          const std::string k = p + comp[c] + "_lambda" + std::to_string(i + 1);
          j[k] = mean_of(lc.lambda[c][i].value);
          if (!gamma.defined()) continue;
          const int64_t col = 2 * c + i, rows = gamma.size(0);
          double s = 0, s2 = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const double v = gamma.data()[r * gamma.size(1) + col];
            s += v, s2 += v * v;
          }
          const double m = s / double(rows);
          j[p + comp[c] + "_gamma" + std::to_string(i + 1) + "_mean"] = m;
          j[p + comp[c] + "_gamma" + std::to_string(i + 1) + "_sd"] = std::sqrt(std::max(0.0, s2 / double(rows) - m * m));
        }
      }
    }
  } else if constexpr (requires { mx.lambda; mx.opts.learnable; }) {
    for (std::size_t n = 0; n < mx.lambda.size(); ++n) {
      const std::string p = "L" + std::to_string(n + 1) + "_v_";
      j[p + "lambda1"] = mean_of(mx.lambda[n][0].value);
      j[p + "lambda2"] = mean_of(mx.lambda[n][1].value);
    }
  }
  return j;
}

// Trains Model (its mixing policy built with mix_opts) for one run of the matrix, at the variant's
// depth and schedule length. A shallower variant starts from the first layers of the base init
// of full depth, so it shares every tensor it has with the base of its seed.
template <class Model, class MixOptions = mix::None::Options>
void fit(experiment::Run& run, const Context& c, const Variant& v, const MixOptions& mix_opts = {}) {
  const Settings& s = *c.s;
  nn::ModelConfig cfg = c.cfg;
  if (v.layers > 0) cfg.layers = v.layers;
  Rng rng(run.seed());
  typename Model::template Module<float> model("", cfg, rng, {}, mix_opts);
  examples::paired_start(run, model, "exoformer", "the base init of this seed",
                         [&](Rng& r) { return Base::Module<float>("", c.cfg, r); });
  model.lm_head.weight.value.fill(0.0f);  // zero-initialised classifier (the paper, after Yang et al.)

  auto params = nn::parameter_list<float>(model);
  optim::MuonAdamW<float> opt(params, {.lr = s.muon_lr, .momentum = 0.95, .nesterov = true, .weight_decay = s.muon_wd},
                              {.lr = s.adamw_lr, .beta1 = 0.9, .beta2 = s.beta2, .weight_decay = 0}, muon_route);
  const int64_t total = v.steps > 0 ? v.steps : c.steps;
  const optim::Schedule sched({.decay = optim::Decay::WSD,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(total) * s.warmup)),
                               .total_steps = total,
                               .min_lr_ratio = s.min_lr_ratio,
                               .decay_fraction = s.decay});
  autodiff::Tape<float> tape;

  auto probe_forward = [&] {
    nn::ModelProbe<float> pr;
    autodiff::no_grad ng;
    autodiff::Tape<float> t;
    model.loss(t, c.ev->probe.x, c.ev->probe.y, &pr);
    return pr;
  };
  auto evaluate = [&](int64_t) {
    io::LogRow row;
    const double val = quant::mean_token_loss(model, c.ev->validation).first;
    row.emplace_back("val_loss", val);
    row.emplace_back("val_ppl", std::exp(val));
    representation_metrics(probe_forward(), s.pca_threshold, row);
    return row;
  };
  auto at_end = [&] {
    experiment::Json j = mixing_coefficients<Model>(model, probe_forward());
    j["parameters"] = nn::parameter_count<float>(model);
    return j;
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[160];
    std::snprintf(buf, sizeof buf, "val %.4f (ppl %.1f) | sink %.3f | token sim %.3f | PCA core %.1f", get("val_loss"),
                  get("val_ppl"), get("sink"), get("token_sim"), get("pca"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt,
      {.steps = total, .eval_every = s.eval_every, .report = report,
       .diverge_above = std::log(double(c.cfg.vocab)) + s.diverge_margin, .at_end = at_end},
      examples::lm_step(run, c, tape, model, opt, sched, params, kBos),
      evaluate);
}

}  // namespace exoformer
