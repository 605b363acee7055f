// examples/vga_lm: the models and one run — paired start (or the vanilla run's final weights for
// the fine-tuning variants), training, the evaluations with W8A8 at the end. Included by
// arch_encoder.cpp, arch_encoder_post.cpp and arch_decoder.cpp, which instantiate it for their
// block layout and mask.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "../common/retrofit.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/model_report.hpp"
#include "sinklab/quant/model.hpp"
#include "study.hpp"

namespace vga_lm {

namespace fs = std::filesystem;

using PreLN = nn::PreNorm<norm::LayerNorm>;
using PostLN = nn::PostNorm<norm::LayerNorm>;  // --block post: BERT's layout
template <class Score, class Gate, class Mask>
using Attn = attn::Attention<Score, Gate, value::Identity, Mask>;
template <class Block, class A, class Tok = tokens::None>
using LM = nn::Transformer<Block, A, ffn::GeluMLP, pos::Learned, Tok>;
using IgaGate = gate::FromInput<gate::per_head, gate::on_values>;
using VgaGate = gate::FromValue<gate::per_head, gate::on_values>;
// The per-query placements: the head's output at each query gated (VGA's App. B; Bondarenko et
// al.'s gated attention is this form of IGA).
using IgaOutputGate = gate::FromInput<gate::per_head, gate::on_output>;
using VgaOutputGate = gate::FromValue<gate::per_head, gate::on_output>;

// W_g = 0, no bias: σ(0) = 0.5 at init for IGA and VGA alike.
constexpr gate::Init kGateInit{gate::WeightInit::Zero, 0.02, gate::BiasInit::None};

template <class Model>
io::LogRow evaluate(Model& model, const EvalData& ev, const Settings& s, bool sink_logit, bool final_eval) {
  io::LogRow row;
  const double loss = quant::mean_token_loss(model, ev.validation).first;
  row.emplace_back("val_loss", loss);
  row.emplace_back("val_ppl", std::exp(loss));

  probe::OutlierAccumulator acc;
  double first = 0, extra = 0, gate_first = 0, gate_rest = 0, sep = 0, sep_share = 0;
  int64_t n_att = 0, n_gate_first = 0, n_gate_rest = 0;
  // The largest |activation| of the probed module outputs by the token it sits on: [CLS]/BOS,
  // [SEP] (with --sep), the words (Bondarenko et al. find BERT's outliers on [SEP] and '.').
  double max_first = 0, max_sep = 0, max_word = 0;
  const int64_t offset = model.tokens.offset();
  const bool causal = model.architecture().at("model") == "decoder";
  {
    autodiff::no_grad off;
    autodiff::Tape<float> tape;
    const int64_t nb = std::min<int64_t>(s.probe_batches, static_cast<int64_t>(ev.validation.size()));
    for (int64_t k = 0; k < nb; ++k) {
      tape.clear();
      nn::ModelProbe<float> pr;
      pr.attention = true;
      model.logits(tape, ev.validation[static_cast<std::size_t>(k)].x, &pr);
      probe::add_module_outputs(acc, pr);
      const Tensor<int32_t>& ids = ev.validation[static_cast<std::size_t>(k)].x;  // [B, T]
      auto is_sep = [&](int64_t b, int64_t j) { return s.sep && j > offset && ids(b, j - offset) == kSep; };
      auto by_token = [&](const Tensor<float>& x) {  // [B, L, D]
        for (int64_t b = 0; b < x.size(0); ++b)
          for (int64_t j = offset; j < x.size(1); ++j) {
            double m = 0;
            for (int64_t d = 0; d < x.size(2); ++d) m = std::max(m, double(std::fabs(x(b, j, d))));
            double& slot = j == offset ? max_first : is_sep(b, j) ? max_sep : max_word;
            slot = std::max(slot, m);
          }
      };
      by_token(pr.embeddings);
      for (const auto& rec : pr.layers)
        for (const Tensor<float>* x : {&rec.attn_out, &rec.mid, &rec.ffn_out, &rec.output}) by_token(*x);
      for (std::size_t l = 0; l < pr.layers.size(); ++l) {
        const auto& rec = pr.layers[l];
        const Tensor<float>& A = rec.attn.weights;  // [B, H, L, L], L = offset + T
        const int64_t B = A.size(0), H = A.size(1), L = A.size(2);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = offset + 1; i < L; ++i) {  // text queries after the first token
              first += A(b, h, i, offset);
              if (s.sep) {  // attention on the [SEP] keys a query sees, and their share of those keys
                int64_t n_sep = 0;
                const int64_t end = causal ? i + 1 : L;
                for (int64_t j = offset + 1; j < end; ++j)
                  if (is_sep(b, j)) sep += A(b, h, i, j), ++n_sep;
                sep_share += double(n_sep) / double(end);
              }
              if (offset > 0) {
                double r = 0;
                for (int64_t j = 0; j < offset; ++j) r += A(b, h, i, j);
                extra += r;
              } else if (sink_logit) {
                double r = 0;
                for (int64_t j = 0; j < L; ++j) r += A(b, h, i, j);
                extra += 1.0 - r;
              }
              ++n_att;
            }
        if (rec.attn.gate_values.defined()) {  // [B, heads, L, 1]
          const Tensor<float>& g = rec.attn.gate_values;
          for (int64_t b = 0; b < g.size(0); ++b)
            for (int64_t h = 0; h < g.size(1); ++h)
              for (int64_t t = offset; t < g.size(2); ++t) {
                if (t == offset) gate_first += g(b, h, t, 0), ++n_gate_first;
                else gate_rest += g(b, h, t, 0), ++n_gate_rest;
              }
        }
      }
    }
  }
  row.emplace_back("max_inf_norm", acc.max_inf_norm());
  row.emplace_back("avg_kurtosis", acc.avg_kurtosis());
  row.emplace_back("attn_first", n_att ? first / double(n_att) : NAN);
  row.emplace_back("attn_extra", n_att ? extra / double(n_att) : NAN);
  row.emplace_back("attn_sep", s.sep && n_att ? sep / double(n_att) : NAN);
  row.emplace_back("sep_share", s.sep && n_att ? sep_share / double(n_att) : NAN);
  row.emplace_back("max_abs_first", max_first);
  row.emplace_back("max_abs_sep", s.sep ? max_sep : NAN);
  row.emplace_back("max_abs_word", max_word);
  row.emplace_back("gate_first", n_gate_first ? gate_first / double(n_gate_first) : 1.0);
  row.emplace_back("gate_rest", n_gate_rest ? gate_rest / double(n_gate_rest) : 1.0);
  // W8A8 at the final evaluation only (it is the slow part); NaN (null in metrics.jsonl) before,
  // since the logs' columns are fixed by their first row.
  // Two protocols: Bondarenko et al.'s (projection inputs and the residual stream: the sums
  // after each branch and the embeddings) and the projection inputs alone.
  double w8a8 = NAN, w8a8_delta = NAN, proj_delta = NAN;
  if (final_eval) {
    const quant::PtqResult q = quant::evaluate_ptq(model, ev.calibration, ev.validation,
                                                   {.scheme = quant::Scheme::w8a8, .residual_stream = true});
    w8a8 = q.quant_perplexity;
    w8a8_delta = q.delta_perplexity();
    proj_delta = quant::evaluate_ptq(model, ev.calibration, ev.validation, {.scheme = quant::Scheme::w8a8}).delta_perplexity();
  }
  row.emplace_back("w8a8_ppl", w8a8);
  row.emplace_back("w8a8_delta_ppl", w8a8_delta);
  row.emplace_back("w8a8_proj_delta_ppl", proj_delta);
  return row;
}

inline std::string report(const io::LogRow& row) {
  std::string s;
  for (const auto& [k, v] : row) {
    const char* label = k == "val_ppl"          ? "ppl"
                        : k == "max_inf_norm"   ? "max|x|"
                        : k == "avg_kurtosis"   ? "kurt"
                        : k == "attn_first"     ? "attn0"
                        : k == "attn_sep"       ? "attn[SEP]"
                        : k == "w8a8_delta_ppl" ? "W8A8 dppl"
                                                : nullptr;
    if (!label || (v.kind() == io::LogValue::Kind::Real && std::isnan(v.real()))) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.4g", s.empty() ? "" : " ", label, v.real());
    s += buf;
  }
  return s;
}

template <class Block, class Mask>
using VanillaOf = LM<Block, Attn<score::Softmax, gate::None, Mask>>;

template <class Block, class Mask, class A, class Tok = tokens::None>
void fit(experiment::Run& run, const FamilyCtx& c) {
  using Model = LM<Block, A, Tok>;
  const Settings& s = *c.s;
  const bool retro = is_retrofit(run.variant());
  typename A::Policies pol;
  if constexpr (A::gate_type::enabled) pol.gate.init = kGateInit;
  Rng rng(run.seed());
  typename Model::template Module<float> model("", c.cfg, rng, pol);

  experiment::Pairing pairing;
  if (!retro) {
    Rng ref_rng(run.seed());
    typename VanillaOf<Block, Mask>::template Module<float> ref("", c.cfg, ref_rng);
    pairing = experiment::TensorBank::of(ref).apply(model);
  } else {
    const fs::path from = c.matrix->run_dir("vanilla", run.seed()) / "final.safetensors";
    SINKLAB_CHECK(fs::exists(from), "vga_lm: ", run.variant(), " starts from the vanilla run of seed ", run.seed(),
                  ", but '", from.string(), "' does not exist; include vanilla in --variants (it runs first)");
    pairing = experiment::TensorBank::load(from).apply(model);
    if (A::gate_type::enabled && s.retrofit_init == "preserve") examples::double_attention_output(model);
  }
  run.progress().print("[" + run.tag() + "] " + pairing.line() +
                       (retro ? " (from the vanilla run's final weights)" : " (the vanilla init of this seed)"));
  SINKLAB_CHECK(pairing.ok() && pairing.unused.empty(), "vga_lm: ", run.tag(), ": the paired start failed: ",
                pairing.line());

  const int64_t steps = retro ? c.retrofit_steps : c.pretrain_steps;
  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = retro ? s.retrofit_lr : s.lr, .beta2 = s.beta2,
                                   .weight_decay = s.weight_decay});
  const optim::Schedule sched({.decay = optim::Decay::Cosine,
                               .warmup_steps = std::max<int64_t>(1, std::llround(double(steps) * s.warmup)),
                               .total_steps = steps,
                               .min_lr_ratio = s.min_lr_ratio});
  autodiff::Tape<float> tape;
  const int64_t eval_every = retro ? std::max<int64_t>(1, std::min(s.eval_every, steps / 5)) : s.eval_every;
  experiment::train(
      run, model, opt, {.steps = steps, .eval_every = eval_every, .report = report},
      [&](Rng& data) {
        const data::TokenBatch b = c.task.sample(data, s.batch);
        run.see_batch(b.x);
        return experiment::optimisation_step(tape, model, opt, b, sched, params, s.clip);
      },
      [&](int64_t step) { return evaluate(model, c.ev, s, A::score_type::has_sink, step == steps); });
}

template <class Block, class Mask>
void run_variant(experiment::Run& run, const FamilyCtx& c) {
  const std::string& v = run.variant();
  using Sm = score::Softmax;
  if (v == "vanilla" || v == "finetune") fit<Block, Mask, Attn<Sm, gate::None, Mask>>(run, c);
  else if (v == "register") fit<Block, Mask, Attn<Sm, gate::None, Mask>, tokens::Registers>(run, c);
  else if (v == "sink") fit<Block, Mask, Attn<score::SoftmaxSink, gate::None, Mask>>(run, c);
  else if (v == "iga") fit<Block, Mask, Attn<Sm, IgaGate, Mask>>(run, c);
  else if (v == "vga" || v == "retrofit_vga") fit<Block, Mask, Attn<Sm, VgaGate, Mask>>(run, c);
  else if (v == "iga_output") fit<Block, Mask, Attn<Sm, IgaOutputGate, Mask>>(run, c);
  else if (v == "vga_output") fit<Block, Mask, Attn<Sm, VgaOutputGate, Mask>>(run, c);
  else sinklab::detail::fail("vga_lm: unknown variant '", v, "'");
}

template <class Block, class Mask>
Timing time_run(const FamilyCtx& c) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  Rng rng(0), data(1);
  typename VanillaOf<Block, Mask>::template Module<float> model("", c.cfg, rng);
  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = c.s->lr});
  autodiff::Tape<float> tape;
  auto step = [&] {
    const data::TokenBatch b = c.task.sample(data, c.s->batch);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, b.x, b.y);
    tape.backward(loss);
    optim::clip_grad_norm(params, 1.0);
    opt.step();
  };
  step();
  Timing t;
  auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) step();
  t.step = since(t0) / 3.0;
  t0 = Clock::now();
  evaluate(model, c.ev, *c.s, false, false);
  t.eval = since(t0);
  t0 = Clock::now();
  evaluate(model, c.ev, *c.s, false, true);
  t.final_eval = since(t0);
  return t;
}

}  // namespace vga_lm
