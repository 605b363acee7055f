// examples/sink_toys: one run of the NOP toy (parts nop and slow) — the paired start, AdamW at a
// constant rate on fresh Gaussian batches, and per evaluation the sink's signatures.
#include <cmath>
#include <cstdio>
#include <string>

#include "models.hpp"
#include "../common/paired_start.hpp"
#include "sinklab/data/toys.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/spectral.hpp"
#include "sinklab/probe/token_norms.hpp"
#include "sinklab/probe/value_norms.hpp"
#include "study.hpp"

namespace sink_toys {
namespace {

// Mean squared error per element over the tokens whose weight is 1 (weight [B, L]).
Var<float> masked_mse(Tape<float>& tape, Var<float> out, const Tensor<float>& target, const Tensor<float>& weight) {
  const int64_t B = target.size(0), L = target.size(1), d = target.size(2);
  Tensor<float> w = Tensor<float>::empty({B, L, d});
  double count = 0;
  for (int64_t i = 0; i < B * L; ++i) {
    std::fill(w.data() + i * d, w.data() + (i + 1) * d, weight.data()[i]);
    count += weight.data()[i];
  }
  return autodiff::sum(autodiff::square(out - tape.constant(target)) * tape.constant(w)) / (count * double(d));
}

template <class Attn>
void fit(experiment::Run& run, const Context& c, const Variant& v) {
  using Model = typename NopModel<Attn>::template Module<float>;
  const Settings& s = *c.s;
  const bool slow = v.part == Part::Slow;
  Rng rng(run.seed());
  Model model(s.d, s.seq_len, rng);
  examples::paired_start(run, model, "sink_toys", "the ungated model of this seed",
                         [&](Rng& r) { return typename NopModel<Enc>::template Module<float>(s.d, s.seq_len, r); });
  // The flag direction v comes from the run's seed: every variant of a seed flags along the same v.
  const data::NopToy toy({.d = s.d, .seq_len = s.seq_len, .p = v.p, .lambda = v.lambda, .gamma = v.gamma,
                          .null_token = !slow, .seed = run.seed()});
  Rng eval_rng(s.eval_seed);
  const data::NopBatch eval = toy.sample(eval_rng, s.eval_batch);

  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = s.nop_lr, .weight_decay = s.weight_decay});
  autodiff::Tape<float> tape;
  auto loss_of = [&](Tape<float>& t, const data::NopBatch& b, typename Model::Out* keep = nullptr,
                     autodiff::AttentionRecorder<float>* rec = nullptr,
                     const std::vector<nn::Intervention>* edits = nullptr) {
    auto o = model.forward(t, b.x, rec, edits);
    Var<float> loss = masked_mse(t, slow ? o.stream + o.update : o.update, b.target, b.loss_weight);
    if (keep) *keep = o;
    return loss;
  };

  // Queries that need no update ("NOP" queries): in setup a the flagged tokens (γ·x ≈ 0); in
  // setup b the unflagged ones (O = z already matches x). Token 0 is left out of both groups.
  Tensor<float> nop_q = Tensor<float>::zeros({s.eval_batch, s.seq_len}), act_q = nop_q.clone();
  for (int64_t b = 0; b < s.eval_batch; ++b)
    for (int64_t i = 1; i < s.seq_len; ++i) ((eval.mask(b, i) > 0.5f) != slow ? nop_q : act_q)(b, i) = 1.f;

  struct Look {
    io::LogRow row;
    Tensor<float> weights, values, update, pre_norm, key_norms;
    std::vector<double> spectrum;
  };
  auto look = [&] {
    autodiff::no_grad ng;
    Tape<float> t;
    autodiff::AttentionRecorder<float> rec;
    typename Model::Out o;
    const double loss = loss_of(t, eval, &o, &rec).item();
    Look l;
    l.weights = rec.weights, l.values = rec.values, l.update = o.update.value(), l.pre_norm = o.pre_norm;
    l.key_norms = rec.key_norms;
    const probe::SinkScore sc = probe::sink_score(rec.weights);
    const Tensor<float> w = model.attn.w_qkv.value;
    l.spectrum = probe::qk_singular_values(w.slice(1, 0, s.d), w.slice(1, s.d, 2 * s.d), 1).front();
    auto group = [&](const Tensor<float>& m) {
      double n = 0;
      for (int64_t k = 0; k < m.numel(); ++k) n += m.data()[k];
      return n > 0 ? probe::attn_to_key(rec.weights, 0, m)[0] : NAN;
    };
    l.row = {{"mse", loss},
             {"sink", sc.score[0]},
             {"sink_key", sc.key[0]},
             {"attn0_nop", group(nop_q)},
             {"attn0_active", group(act_q)},
             {"vratio", probe::value_norm_ratio(rec.values, model.attn.w_o.value, 0)[0]},
             {"kratio", probe::norm_ratio_to_others(rec.key_norms, 0)[0]},
             {"qk_sigma1", l.spectrum[0]},
             {"qk_sigma_ratio", l.spectrum.size() > 1 && l.spectrum[1] > 0 ? l.spectrum[0] / l.spectrum[1] : NAN},
             {"srank", probe::stable_rank(o.update.value())},
             {"bos_ratio", probe::norm_ratio_to_others(probe::token_norms(o.pre_norm).view({1, s.seq_len}), 0)[0]}};
    // The causal test of the NOP reading: if attending to the sink does nothing because its value
    // is ≈ 0, zeroing that value leaves the loss, while giving it the other tokens' mean norm (same
    // direction) makes every query that rests on the sink write it, and the loss rises.
    auto mse_with = [&](const nn::Intervention& edit) {
      Tape<float> t2;
      const std::vector<nn::Intervention> edits{edit};
      return static_cast<double>(loss_of(t2, eval, nullptr, nullptr, &edits).item());
    };
    const double v0_ratio = probe::value_norm_ratio(rec.values, 0)[0];
    l.row.emplace_back("mse_v0_zero", mse_with(nn::Intervention::zero(nn::Site::Value, 0, 0, 0)));
    l.row.emplace_back("mse_v0_restored", v0_ratio > 0 ? mse_with(nn::Intervention::scaled(nn::Site::Value, 0, 0, 0, 1.0 / v0_ratio)) : NAN);
    if (rec.gate_values.defined()) {
      double g = 0;
      const Tensor<float> gv = rec.gate_values.contiguous();
      for (int64_t k = 0; k < gv.numel(); ++k) g += gv.data()[k];
      l.row.emplace_back("gate", g / double(gv.numel()));
    }
    return l;
  };

  // The final model's pictures: the attention map (batch mean and one sequence), per-position
  // norms (‖W_O v_j‖, ‖k_j‖, the pre-norm stream) and the spectrum of W_Q W_Kᵀ.
  auto at_end = [&] {
    const Look l = look();
    const int64_t L = s.seq_len, B = s.eval_batch;
    std::vector<double> mean(static_cast<std::size_t>(L * L), 0.0), first(mean.size());
    const Tensor<float> A = l.weights.contiguous();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < L * L; ++k) {
        mean[k] += A.data()[b * L * L + k] / double(B);
        if (b == 0) first[k] = A.data()[k];
      }
    experiment::write_matrix(run.dir() / "attn.dat", mean.data(), L, L);
    experiment::write_matrix(run.dir() / "attn_seq0.dat", first.data(), L, L);
    const Tensor<double> vn = probe::output_value_norms(l.values, model.attn.w_o.value);
    const Tensor<double> pn = probe::token_norms(l.pre_norm);
    io::CsvLog norms(run.dir() / "norms.csv");
    for (int64_t j = 0; j < L; ++j) {
      double kn = 0;
      for (int64_t b = 0; b < B; ++b) kn += l.key_norms(b, 0, j) / double(B);
      norms.log({{"pos", j}, {"value_out_norm", vn(0, j)}, {"key_norm", kn}, {"pre_norm", pn(j)}});
    }
    io::CsvLog spec(run.dir() / "qk_spectrum.csv");
    for (std::size_t i = 0; i < l.spectrum.size(); ++i)
      spec.log({{"index", static_cast<int64_t>(i + 1)}, {"sigma", l.spectrum[i]}});
    return experiment::Json::object();
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[200];
    std::snprintf(buf, sizeof buf, "mse %.4f | sink %.3f (key %.0f) | ‖W_O v_0‖ ratio %.3f | ‖k_0‖ ratio %.2f | σ₁(W_Q W_Kᵀ) %.2f | BOS norm ratio %.2f",
                  get("mse"), get("sink"), get("sink_key"), get("vratio"), get("kratio"), get("qk_sigma1"),
                  get("bos_ratio"));
    return std::string(buf);
  };
  const int64_t batch = slow ? s.slow_batch : s.nop_batch;
  experiment::train(
      run, model, opt,
      {.steps = c.steps, .eval_every = slow ? s.slow_eval_every : s.nop_eval_every, .report = report, .at_end = at_end},
      [&](Rng& data) {
        const data::NopBatch b = toy.sample(data, batch);
        run.see_batch(b.x);
        tape.clear();
        opt.zero_grad();
        Var<float> loss = loss_of(tape, b);
        tape.backward(loss);
        opt.step();
        return static_cast<double>(loss.item());
      },
      [&](int64_t) { return look().row; });
}

}  // namespace

void run_nop(experiment::Run& run, const Context& c, const Variant& v) {
  if (v.gate) fit<GatedEnc>(run, c, v);
  else fit<Enc>(run, c, v);
}

}  // namespace sink_toys
