// examples/sink_toys: one run of the broadcast toy — the paired start, AdamW at a constant rate
// on fresh Gaussian batches, and per evaluation and layer the hub's signatures: sink match to the
// selected token j*, the value-norm ratio at j*, the stable rank of the attention update, and
// with registers how much of the broadcast they carry.
#include <cmath>
#include <cstdio>
#include <string>

#include "models.hpp"
#include "../common/paired_start.hpp"
#include "sinklab/data/toys.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/probe/sink_match.hpp"
#include "sinklab/probe/spectral.hpp"
#include "sinklab/probe/value_norms.hpp"
#include "study.hpp"

namespace sink_toys {
namespace {

template <class Tokens>
void fit(experiment::Run& run, const Context& c, const Variant& v) {
  using Model = typename BroadcastModel<Tokens>::template Module<float>;
  const Settings& s = *c.s;
  const int64_t L = s.seq_len, R = v.registers ? s.registers : 0;
  Rng rng(run.seed());
  Model model(s.d, L, R, rng);
  examples::paired_start(run, model, "sink_toys", "the model without registers of this seed", [&](Rng& r) {
    return typename BroadcastModel<tokens::None>::template Module<float>(s.d, L, 0, r);
  });
  const data::BroadcastToy toy({.d = s.d, .seq_len = L, .alpha = s.alpha, .seed = run.seed()});
  Rng eval_rng(s.eval_seed);
  const data::BroadcastBatch eval = toy.sample(eval_rng, s.eval_batch);
  const int64_t B = s.eval_batch;

  auto params = nn::parameter_list<float>(model);
  optim::AdamW<float> opt(params, {.lr = s.bc_lr, .weight_decay = s.weight_decay});
  autodiff::Tape<float> tape;
  auto mse = [](Var<float> out, const Tensor<float>& y, Tape<float>& t) {
    return autodiff::mean(autodiff::square(out - t.constant(y)));
  };

  struct Look {
    io::LogRow row;
    std::array<Tensor<float>, 2> weights;
  };
  auto look = [&] {
    autodiff::no_grad ng;
    Tape<float> t;
    std::array<autodiff::AttentionRecorder<float>, 2> rec;
    std::array<Tensor<float>, 2> upd;
    Look l;
    l.row.emplace_back("mse", static_cast<double>(mse(model.forward(t, eval.x, &rec, &upd), eval.y, t).item()));
    Tensor<int64_t> hub = Tensor<int64_t>::empty({B, 1});
    for (int64_t b = 0; b < B; ++b) hub(b, 0) = eval.source(b);
    double match = 0, vratio = 0, srank = 0;
    for (int l_ = 0; l_ < 2; ++l_) {
      const Tensor<float>& A = rec[l_].weights;  // [B, 1, L + R, L + R]
      l.weights[l_] = A;
      const Tensor<float> Areal = A.slice(2, 0, L);  // the sequence's queries (registers' rows left out)
      const probe::SinkMatch m = probe::sink_match(Areal, eval.source);
      const Tensor<int64_t> inflow = probe::attention_inflow(Areal);
      const Tensor<float>& W_O = model.layers[l_].attn.w_o.value;
      const std::string p = experiment::Matrix::layer_metric(l_, "");
      const double vr_hub = probe::value_norm_ratio_at(rec[l_].values, W_O, hub)[0];
      const double sr = probe::stable_rank(upd[l_].slice(1, 0, L));
      l.row.emplace_back(p + "match", m.match_rate[0]);
      l.row.emplace_back(p + "strength", m.strength[0]);
      l.row.emplace_back(p + "sink", probe::sink_score(Areal).score[0]);
      l.row.emplace_back(p + "vratio_hub", vr_hub);
      l.row.emplace_back(p + "vratio_inflow", probe::value_norm_ratio_at(rec[l_].values, W_O, inflow)[0]);
      l.row.emplace_back(p + "srank", sr);
      match += m.match_rate[0] / 2, vratio += vr_hub / 2, srank += sr / 2;
      if (R > 0) {
        // How much of the broadcast the registers carry: the share of sequences whose inflow peak
        // is a register, the attention mass the tokens give the registers, and how much the
        // registers' own queries read j* (a register that gathers the payload).
        double on_reg = 0, reg_mass = 0, reg_to_hub = 0;
        for (int64_t b = 0; b < B; ++b) {
          on_reg += inflow(b, 0) >= L ? 1.0 : 0.0;
          for (int64_t i = 0; i < L; ++i)
            for (int64_t j = L; j < L + R; ++j) reg_mass += A(b, 0, i, j);
          for (int64_t i = L; i < L + R; ++i) reg_to_hub += A(b, 0, i, eval.source(b));
        }
        l.row.emplace_back(p + "inflow_reg", on_reg / double(B));
        l.row.emplace_back(p + "reg_mass", reg_mass / double(B * L));
        l.row.emplace_back(p + "reg_to_hub", reg_to_hub / double(B * R));
      }
    }
    l.row.emplace_back("match", match);
    l.row.emplace_back("vratio_hub", vratio);
    l.row.emplace_back("srank", srank);
    return l;
  };
  // The final model's attention maps of the first evaluation sequence, per layer (its j* is
  // recorded in result.json as hub_seq0).
  auto at_end = [&] {
    const Look l = look();
    const int64_t S = L + R;
    for (int l_ = 0; l_ < 2; ++l_) {
      const Tensor<float> A = l.weights[l_].contiguous();
      std::vector<double> m(A.data(), A.data() + S * S);
      experiment::write_matrix(run.dir() / ("attn_L" + std::to_string(l_) + "_seq0.dat"), m.data(), S, S);
    }
    return experiment::Json{{"hub_seq0", eval.source(0)}};
  };
  auto report = [R](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[240];
    int n = std::snprintf(buf, sizeof buf,
                          "mse %.4f | match to j* L1 %.2f L2 %.2f | ‖W_O v_j*‖ ratio L1 %.2f L2 %.2f | stable rank L1 %.2f L2 %.2f",
                          get("mse"), get("L0_match"), get("L1_match"), get("L0_vratio_hub"), get("L1_vratio_hub"),
                          get("L0_srank"), get("L1_srank"));
    if (R > 0 && n > 0 && n < int(sizeof buf))
      std::snprintf(buf + n, sizeof buf - n, " | inflow on registers L1 %.2f L2 %.2f", get("L0_inflow_reg"),
                    get("L1_inflow_reg"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt, {.steps = c.steps, .eval_every = s.bc_eval_every, .report = report, .at_end = at_end},
      [&](Rng& data) {
        const data::BroadcastBatch b = toy.sample(data, s.bc_batch);
        run.see_batch(b.x);
        tape.clear();
        opt.zero_grad();
        Var<float> loss = mse(model.forward(tape, b.x), b.y, tape);
        tape.backward(loss);
        opt.step();
        return static_cast<double>(loss.item());
      },
      [&](int64_t) { return look().row; });
}

}  // namespace

void run_broadcast(experiment::Run& run, const Context& c, const Variant& v) {
  if (v.registers) fit<tokens::Registers>(run, c, v);
  else fit<tokens::None>(run, c, v);
}

}  // namespace sink_toys
