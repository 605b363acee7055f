// examples/vga_bigram_backcopy: one run of one architecture — the paired start from the seed's
// vanilla init, AdamW at a constant rate, and per evaluation the measurements on the fixed eval
// batch (risks, Attn_<s>, the value-state drain, Δlogit_<s>, the gates); the last evaluation also
// writes eval sequence 0's attention map and value norms into the run's folder. Included by the
// arch_*.cpp files, which name the architectures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/io/metrics_log.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/delta_logit.hpp"
#include "sinklab/probe/gradients.hpp"
#include "sinklab/probe/value_norms.hpp"
#include "study.hpp"

namespace vga_bigram_backcopy {

using namespace sinklab;
namespace ex = sinklab::experiment;
namespace fs = std::filesystem;
using autodiff::Parameter;
using autodiff::Tape;

template <class Score, class Gate, class Tokens = tokens::None>
using Model = nn::Transformer<nn::PreNorm<norm::LayerNorm>, attn::Attention<Score, Gate>, ffn::ReluMLP, pos::Learned,
                              Tokens>;
using Vanilla = Model<score::Softmax, gate::None>;

// What the end of a run shows about eval sequence 0, written into the run directory.
struct Snapshot {
  int64_t n = 0;
  std::vector<double> attention;                         // n×n, row = query
  std::vector<double> value_norm, wo_value_norm, gate;  // per token
  std::vector<double> copy_score;                        // per layer
};

// ---------------------------------------------------------------------------------------------
// Evaluation on the fixed eval batch

template <class M>
io::LogRow evaluate(M& model, const data::BigramBackcopy& task, const EvalSet& ev, int layer, bool sink_logit,
                    Snapshot* snap) {
  // One probed pass with its backward: the probe records the attention and, after backward(),
  // ∂L/∂v of each layer (it outlives the tape's backward, which writes into it). The gradients go
  // into the parameters too; the next training step zeroes them first.
  Tape<float> tape;
  nn::ModelProbe<float> probe;
  probe.attention = true;
  auto logits = model.logits(tape, ev.x, &probe);
  const auto loss = autodiff::cross_entropy(logits, ev.y);
  tape.backward(loss);
  const auto risk = task.risk(ev.x, ev.y, logits.value());

  // Prepended tokens (the register) sit before <s>: keys and queries of the sequence start at `o`.
  const int64_t o = model.tokens.offset();
  const int64_t T = ev.x.size(1);
  const auto& rec = probe.layers[static_cast<std::size_t>(layer)].attn;
  const Tensor<float> A = rec.weights.slice(2, o, o + T).slice(3, o, o + T).contiguous();
  const Tensor<float> L = rec.logits.slice(2, o, o + T).slice(3, o, o + T).contiguous();
  const Tensor<float> V = rec.values.slice(2, o, o + T).contiguous();
  const Tensor<float>& w_o = model.layers[static_cast<std::size_t>(layer)].attn.w_o.value;
  const int64_t B = A.size(0), H = A.size(1);

  // Attention that lands outside the sequence: the register's key, or the sink logit's share
  // (its weight is 1 − Σ_j A_ij), over the same non-trigger queries as Attn_<s>.
  double extra = 0, trig = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 1; i < T; ++i) {
      if (ev.non_trigger(b, i) == 0.f) continue;
      ++count;
      for (int64_t h = 0; h < H; ++h) {
        double row = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row += A(b, h, i, j);
          // Trigger tokens are never copied (the copy target is the token before a trigger), so
          // they are the other keys a head can park attention on.
          if (j >= 1 && ev.trigger(b, j) != 0.f) trig += A(b, h, i, j) / double(H);
        }
        if (o > 0) extra += double(rec.weights(b, h, o + i, 0)) / double(H);
        else if (sink_logit) extra += (1.0 - row) / double(H);
      }
    }
  const Tensor<double> vn = probe::value_norms(V);  // [H, T], batch means
  const Tensor<double> on = probe::output_value_norms(V, w_o);
  double vs = 0, os = 0;
  for (int64_t h = 0; h < H; ++h) {
    vs += vn(h, 0);
    os += on(h, 0);
  }
  double gate_sink = 1, gate_rest = 1;
  if (rec.gate_values.defined()) {  // [B, heads, T, 1]
    const Tensor<float>& g = rec.gate_values;
    double s0 = 0, rest = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < g.size(1); ++h)
        for (int64_t t = 0; t < T; ++t) (t == 0 ? s0 : rest) += g(b, h, t, 0);
    gate_sink = s0 / double(B * g.size(1));
    gate_rest = rest / double(B * g.size(1) * (T - 1));
  }

  if (snap) {
    const int64_t n = std::min<int64_t>(T, 32);
    snap->n = n;
    snap->attention.assign(static_cast<std::size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) snap->attention[i * n + j] = A(0, 0, i, j);
    const Tensor<double> one = probe::output_value_norms(V.slice(0, 0, 1).contiguous(), w_o);
    snap->value_norm.clear();
    snap->wo_value_norm.clear();
    snap->gate.clear();
    for (int64_t j = 0; j < n; ++j) {
      snap->value_norm.push_back(rec.value_norms(0, 0, o + j));
      snap->wo_value_norm.push_back(one(0, j));
      snap->gate.push_back(rec.gate_values.defined() ? double(rec.gate_values(0, 0, j, 0)) : 1.0);
    }
    // Which layer copies: mean attention from trigger queries i to key i − 1 (the token to copy).
    snap->copy_score.clear();
    for (const auto& l : probe.layers) {
      const Tensor<float>& W = l.attn.weights;
      double s = 0;
      int64_t c = 0;
      for (int64_t b = 0; b < W.size(0); ++b)
        for (int64_t i = 1; i < T; ++i)
          if (ev.trigger(b, i) != 0.f) {
            for (int64_t h = 0; h < W.size(1); ++h) s += W(b, h, o + i, o + i - 1) / double(W.size(1));
            ++c;
          }
      snap->copy_score.push_back(c ? s / double(c) : NAN);
    }
  }
  // ‖∂L/∂v_<s>‖ over the other tokens' mean (batch-mean norms; a register before <s> left out): the
  // pressure that drains the sink's value. Under a value gate it is eq. 8's content path,
  // g_s Σ_i α_is ∂L/∂z_i, which the paper says vanishes as the gate at <s> closes (its
  // self-regulatory path carries the same factor g_s).
  const Tensor<double> grad_norms = probe::token_grad_norms(rec.grad_v).slice(0, o, o + T).contiguous();  // [T]
  return {{"loss", loss.item()},
          {"bigram_risk", risk.bigram},
          {"backcopy_risk", risk.backcopy},
          {"attn_sink", probe::attn_to_key(A, 0, ev.non_trigger).mean()},
          {"attn_extra", count ? extra / double(count) : 0.0},
          {"attn_triggers", count ? trig / double(count) : 0.0},
          {"val_sink", vs / double(H)},
          {"val_sink_ratio", probe::norm_ratio_to_others(vn, 0).mean()},
          {"wo_val_sink", os / double(H)},
          {"wo_val_sink_ratio", probe::norm_ratio_to_others(on, 0).mean()},
          {"delta_logit", probe::delta_logit(L, 0, ev.non_trigger).mean()},
          {"gate_sink", gate_sink},
          {"gate_rest", gate_rest},
          {"grad_v_sink_ratio", probe::norm_ratio_to_others(grad_norms.view({1, T}), 0)[0]}};
}

inline std::string report_line(const io::LogRow& r) {
  auto get = [&](const char* k) { return io::number(r, k); };
  char buf[200];
  std::snprintf(buf, sizeof buf, "bigram %.3f backcopy %.3f Attn<s> %.3f |v<s>| %.3f (%.2fx) dlogit %+.2f",
                get("bigram_risk"), get("backcopy_risk"), get("attn_sink"), get("val_sink"), get("val_sink_ratio"),
                get("delta_logit"));
  return buf;
}

inline void write_snapshot(const fs::path& dir, const Snapshot& snap, const EvalSet& ev,
                           const data::BigramBackcopy& task) {
  experiment::write_matrix(dir / "attn.dat", snap.attention.data(), snap.n, snap.n);
  io::CsvLog csv(dir / "value_norms.csv");
  for (int64_t j = 0; j < snap.n; ++j) {
    const auto k = static_cast<std::size_t>(j);
    // The token goes last: CsvLog quotes a ',' label, which then cannot shift gnuplot's columns.
    csv.log({{"pos", j},
             {"trigger", task.is_trigger(ev.x(0, j))},
             {"value_norm", snap.value_norm[k]},
             {"wo_value_norm", snap.wo_value_norm[k]},
             {"gate", snap.gate[k]},
             {"token", token_label(task, ev.x(0, j))}});
  }
}

// ---------------------------------------------------------------------------------------------
// Training one variant of one seed

template <class Score, class Gate, class Tokens = tokens::None>
void fit(ex::Run& run, const Context& c, const ex::TensorBank& reference) {
  using M = Model<Score, Gate, Tokens>;
  typename attn::Attention<Score, Gate>::Policies pol;
  if constexpr (Gate::enabled) pol.gate.init = {gate::WeightInit::Zero, 0.02, gate::BiasInit::None};
  Rng rng(run.seed());
  typename M::template Module<float> model("", c.cfg, rng, pol);
  const ex::Pairing pairing = reference.apply(model);
  SINKLAB_CHECK(pairing.ok(), "vga_bigram_backcopy: ", run.tag(), ": ", pairing.line());
  run.progress().print("[" + run.tag() + "] " + pairing.line());

  std::vector<Parameter<float>*> params;
  model.parameters([&](Parameter<float>& p) {
    // The N(0, 0.02) scheme keeps LayerNorm shifts at 0; PyTorch's trains them.
    if (c.s.init == "normal" && p.name.ends_with("norm.bias")) p.requires_grad = false;
    params.push_back(&p);
  });
  optim::AdamW<float> opt(params, {.lr = c.s.lr, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
                                   .weight_decay = c.s.weight_decay});
  Tape<float> tape;
  const optim::Schedule constant_lr(optim::ScheduleOptions{});
  ex::train(
      run, model, opt, {.steps = c.s.flags.steps, .eval_every = c.s.log_every, .report = report_line},
      [&](Rng& data) {
        const data::TokenBatch batch = c.task.sample(data, c.s.batch);
        run.see_batch(batch.x);
        // No clipping, a constant rate (the paper's setting); data-parallel under --distribute data.
        return ex::optimisation_step(tape, model, opt, batch, constant_lr, params, /*clip_norm=*/0);
      },
      [&](int64_t step) {
        Snapshot snap;
        const bool last = step == c.s.flags.steps;
        io::LogRow row = evaluate(model, c.task, c.ev, c.layer, Score::has_sink, last ? &snap : nullptr);
        if (last) {
          write_snapshot(run.dir(), snap, c.ev, c.task);
          std::string line = "[" + run.tag() + "] copy score per layer (trigger -> previous token):";
          for (double x : snap.copy_score) {
            char b[16];
            std::snprintf(b, sizeof b, " %.3f", x);
            line += b;
          }
          run.progress().print(line);
        }
        return row;
      });
}

}  // namespace vga_bigram_backcopy
