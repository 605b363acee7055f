// examples/vit_sinks: one run of one architecture — the paired start, AdamW with warmup and
// cosine decay, the per-evaluation measurements (accuracy; per layer the sink score, the inflow
// peak and where it sits, the value-norm ratio at each image's own sink, the stable rank of the
// attention update, the gate) and at the end the dense linear probe on the frozen final-norm patch
// tokens plus the attention maps for the figures. Included by arch_plain.cpp and arch_gated.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/paired_start.hpp"
#include "sinklab/nn/vit.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"
#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/head_update_rank.hpp"
#include "sinklab/probe/sink_match.hpp"
#include "sinklab/probe/spectral.hpp"
#include "sinklab/probe/value_norms.hpp"
#include "study.hpp"

namespace vit_sinks {

using namespace sinklab;

using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;
// The G1 gate of Qiu et al. as the paper uses it: σ(LN1(x)·W_g + b) per channel of each head's
// output, before W_O; W_g = 0 and b = 2 at the start (gate::Init::nop(), every gate σ(2) ≈ 0.88).
using GatedEnc = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>, value::Identity,
                                 mask::Bidirectional>;
template <class Attn, class Tokens>
using Vit = nn::ViT<nn::PreNorm<norm::LayerNorm>, Attn, ffn::GeluMLP, Tokens>;
using Vanilla = Vit<Enc, tokens::None>;

// The attention policy of a ViT type, and its policies with the gate (when there is one) at the
// paper's init.
template <class M>
struct attention_of;
template <class Block, class Attn, class FFN, class Tokens, class Mix>
struct attention_of<nn::ViT<Block, Attn, FFN, Tokens, Mix>> {
  using type = Attn;
};
template <class Model>
typename attention_of<Model>::type::Policies policies() {
  typename attention_of<Model>::type::Policies pol;
  if constexpr (requires { pol.gate.init; }) pol.gate.init = gate::Init::nop();
  return pol;
}

struct ImageBatch {
  Tensor<float> x;    // [B, 28, 28]
  Tensor<int32_t> y;  // [B]
};

inline ImageBatch gather(const data::ImageDataset& ds, const std::vector<int64_t>& idx) {
  const int64_t H = ds.images.size(1), W = ds.images.size(2), n = H * W;
  ImageBatch b{Tensor<float>::empty({static_cast<int64_t>(idx.size()), H, W}),
               Tensor<int32_t>::empty({static_cast<int64_t>(idx.size())})};
  const float* src = ds.images.data();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::copy(src + idx[i] * n, src + (idx[i] + 1) * n, b.x.data() + static_cast<int64_t>(i) * n);
    b.y.data()[i] = ds.labels.data()[idx[i]];
  }
  return b;
}

inline ImageBatch range_batch(const data::ImageDataset& ds, int64_t begin, int64_t end) {
  std::vector<int64_t> idx;
  for (int64_t i = begin; i < end; ++i) idx.push_back(i);
  return gather(ds, idx);
}

inline ImageBatch random_batch(const data::ImageDataset& ds, Rng& rng, int64_t B) {
  std::vector<int64_t> idx(static_cast<std::size_t>(B));
  for (auto& i : idx) i = rng.randint(0, ds.size());
  return gather(ds, idx);
}

// Per-patch labels of the dense probe: 0 (background) when the patch's mean pixel is below
// `foreground`, else 1 + the image's class. [B·N] in raster order of the patches.
inline std::vector<int32_t> patch_labels(const ImageBatch& b, int64_t P, double foreground) {
  const int64_t B = b.x.size(0), H = b.x.size(1), W = b.x.size(2), ny = H / P, nx = W / P;
  std::vector<int32_t> out;
  out.reserve(static_cast<std::size_t>(B * ny * nx));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t py = 0; py < ny; ++py)
      for (int64_t px = 0; px < nx; ++px) {
        double s = 0;
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x) s += b.x.data()[(i * H + py * P + y) * W + px * P + x];
        out.push_back(s / double(P * P) < foreground ? 0 : 1 + b.y.data()[i]);
      }
  return out;
}

// Everything one evaluation reads off the probe images, per layer ("L<l>_...") and as the mean
// over layers:
//   sink        the paper's sink score max_j mean_{b,i} A_bij, mean over heads (uniform: 1/S)
//   inflow      per image and head the peak column mass (1/S) Σ_i A_b,i,ĵ, mean over both
//   inflow_cls / inflow_patch / inflow_reg   where ĵ sits: fractions of (image, head) pairs
//   cls_mass / reg_mass   mean attention a query gives the CLS token / all registers
//   vratio      ‖W_O v_ĵ‖ / mean_{j≠ĵ} ‖W_O v_j‖ at each image's own inflow token (< 0.2: NOP)
//   srank       stable rank ‖U‖_F² / σ₁² of the attention update U [S, D], mean over images
//   gate        mean gate activation (gated variants)
// and per head ("L<l>_h<h>_..."), the two axes of the paper's sink phenotypes (Fig. 6 and 8): its
// sink score, the value ratio at its inflow tokens, and the stable rank of its own update
// A_h V_h W_O,h (≈ 1: every query receives the same vector, a broadcast).
template <class Model>
void attention_metrics(Model& model, const nn::ModelProbe<float>& pr, int64_t patches, io::LogRow& row) {
  const auto L = static_cast<int64_t>(pr.layers.size());
  const std::vector<std::string> keys = {"sink",     "inflow",   "inflow_cls", "inflow_patch", "inflow_reg",
                                         "cls_mass", "reg_mass", "vratio",     "srank",        "gate"};
  std::vector<double> sum(keys.size(), 0.0);
  bool gated = false;
  for (int64_t l = 0; l < L; ++l) {
    const auto& rec = pr.layers[static_cast<std::size_t>(l)];
    const Tensor<float> A = rec.attn.weights.contiguous();
    const int64_t B = A.size(0), H = A.size(1), T = A.size(2), S = A.size(3);
    const Tensor<int64_t> at = probe::attention_inflow(A);
    double on_cls = 0, on_patch = 0, on_reg = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t j = at(b, h);
        (j == 0 ? on_cls : j <= patches ? on_patch : on_reg) += 1;
      }
    const double pairs = double(B * H);
    double cls_mass = 0, reg_mass = 0;
    const float* a = A.data();
    for (int64_t r = 0; r < B * H * T; ++r) {
      cls_mass += a[r * S];
      for (int64_t j = 1 + patches; j < S; ++j) reg_mass += a[r * S + j];
    }
    double gate = NAN;
    if (rec.attn.gate_values.defined() && rec.attn.gate_values.numel() > 0) {
      const Tensor<float> g = rec.attn.gate_values.contiguous();
      double s = 0;
      for (int64_t i = 0; i < g.numel(); ++i) s += g.data()[i];
      gate = s / double(g.numel());
    }
    const auto& layer = model.layers[static_cast<std::size_t>(l)];
    const probe::PerHead sink = probe::sink_score(A).score;
    const probe::PerHead vratio = probe::value_norm_ratio_at(rec.attn.values, layer.attn.w_o.value, at);
    const probe::PerHead srank = probe::head_update_stable_rank(A, rec.attn.values, layer.attn.w_o.value);
    const std::vector<double> vals = {
        sink.mean(),
        probe::inflow_strength(A).mean(),
        on_cls / pairs,
        on_patch / pairs,
        on_reg / pairs,
        cls_mass / double(B * H * T),
        reg_mass / double(B * H * T),
        vratio.mean(),
        probe::stable_rank(rec.attn_out),
        gate};
    const std::string p = experiment::Matrix::layer_metric(l, "");
    for (int64_t h = 0; h < H; ++h) {
      const std::string ph = p + "h" + std::to_string(h) + "_";
      row.emplace_back(ph + "sink", sink[h]);
      row.emplace_back(ph + "vratio", vratio[h]);
      row.emplace_back(ph + "srank", srank[h]);
    }
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (keys[k] == "gate" && !std::isfinite(vals[k])) continue;
      gated |= keys[k] == "gate";
      row.emplace_back(p + keys[k], vals[k]);
      sum[k] += vals[k];
    }
  }
  const double n = double(std::max<int64_t>(L, 1));
  for (std::size_t k = 0; k < keys.size(); ++k)
    if (keys[k] != "gate" || gated) row.emplace_back(keys[k], sum[k] / n);
}

// The dense probe: a linear classifier [D, 11] + bias on frozen final-norm patch tokens, trained
// with AdamW on minibatches of patches, scored by patch accuracy and mIoU over the classes present
// in the test patches.
struct DenseScore {
  double acc = NAN, miou = NAN;
};

template <class Model>
Tensor<float> patch_features(Model& model, const ImageBatch& all, int64_t chunk = 250) {
  const int64_t B = all.x.size(0), N = model.patches, D = model.cfg.d_model;
  Tensor<float> out = Tensor<float>::empty({B * N, D});
  const int64_t n = all.x.size(1) * all.x.size(2);
  for (int64_t s = 0; s < B; s += chunk) {
    const int64_t e = std::min(B, s + chunk);
    Tensor<float> x = Tensor<float>::empty({e - s, all.x.size(1), all.x.size(2)});
    std::copy(all.x.data() + s * n, all.x.data() + e * n, x.data());
    nn::ModelProbe<float> pr;
    pr.attention = false;
    autodiff::no_grad ng;
    autodiff::Tape<float> t;
    model.features(t, x, &pr);
    const Tensor<float> h = pr.final_hidden.contiguous();  // [b, 1 + N, D]
    for (int64_t b = 0; b < e - s; ++b)
      std::copy(h.data() + (b * (1 + N) + 1) * D, h.data() + (b * (1 + N) + 1 + N) * D, out.data() + ((s + b) * N) * D);
  }
  return out;
}

template <class Model>
DenseScore dense_probe(Model& model, const Settings& s, const Data& d, uint64_t seed) {
  constexpr int32_t K = 11;
  const ImageBatch tr = range_batch(d.train, 0, std::min<int64_t>(s.dense_train, d.train.size()));
  const ImageBatch te = range_batch(d.test, 0, std::min<int64_t>(s.dense_test, d.test.size()));
  const Tensor<float> ftr = patch_features(model, tr), fte = patch_features(model, te);
  const std::vector<int32_t> ytr = patch_labels(tr, s.patch, s.foreground), yte = patch_labels(te, s.patch, s.foreground);
  const int64_t D = ftr.size(1), ntr = ftr.size(0), nte = fte.size(0);
  Rng rng(seed, 7);
  nn::Linear<float> clf("dense", D, K, rng, nn::Init::normal(0.0), true);
  clf.weight.value.fill(0.0f);
  clf.bias.value.fill(0.0f);
  optim::AdamW<float> opt(std::vector<autodiff::Parameter<float>*>{&clf.weight, &clf.bias},
                          {.lr = s.dense_lr, .beta1 = 0.9, .beta2 = 0.999, .weight_decay = 0.0});
  const optim::Schedule sched({.decay = optim::Decay::Cosine, .warmup_steps = 0, .total_steps = s.dense_steps});
  constexpr int64_t kBatch = 512;
  autodiff::Tape<float> tape;
  for (int64_t step = 0; step < s.dense_steps; ++step) {
    Tensor<float> x = Tensor<float>::empty({kBatch, D});
    Tensor<int32_t> y = Tensor<int32_t>::empty({kBatch});
    for (int64_t i = 0; i < kBatch; ++i) {
      const int64_t r = rng.randint(0, ntr);
      std::copy(ftr.data() + r * D, ftr.data() + (r + 1) * D, x.data() + i * D);
      y.data()[i] = ytr[static_cast<std::size_t>(r)];
    }
    tape.clear();
    opt.zero_grad();
    auto loss = autodiff::cross_entropy(clf(tape, tape.constant(x)), y);
    tape.backward(loss);
    opt.set_lr_scale(sched.lr_scale(opt.step_count()));
    opt.step();
  }
  // Scoring: argmax of x·W + b per test patch.
  std::vector<double> tp(K, 0), fp(K, 0), fn(K, 0);
  double correct = 0;
  const Tensor<float> Wc = clf.weight.value.contiguous(), bc = clf.bias.value.contiguous();
  for (int64_t r = 0; r < nte; ++r) {
    int32_t best = 0;
    double best_v = -INFINITY;
    for (int32_t k = 0; k < K; ++k) {
      double v = bc.data()[k];
      for (int64_t j = 0; j < D; ++j) v += double(fte.data()[r * D + j]) * Wc.data()[j * K + k];
      if (v > best_v) best_v = v, best = k;
    }
    const int32_t t = yte[static_cast<std::size_t>(r)];
    if (best == t) {
      correct += 1;
      tp[t] += 1;
    } else {
      fp[best] += 1;
      fn[t] += 1;
    }
  }
  double iou = 0;
  int present = 0;
  for (int32_t k = 0; k < K; ++k)
    if (tp[k] + fn[k] > 0) {
      iou += tp[k] / (tp[k] + fp[k] + fn[k]);
      ++present;
    }
  return {correct / double(std::max<int64_t>(nte, 1)), present ? iou / present : NAN};
}

// The attention maps the figures show, written into the run's folder: per layer the mean (over
// probe images and heads) attention matrix attn_L<l>.dat [S, S], the CLS row over the patches of
// probe image 0 on the patch grid cls_L<l>.dat (mean over heads), and image0.dat.
inline void write_maps(const std::filesystem::path& dir, const nn::ModelProbe<float>& pr, const Tensor<float>& probe_images,
                       int64_t patch) {
  const int64_t H = probe_images.size(1), W = probe_images.size(2), ny = H / patch, nx = W / patch;
  {
    std::vector<double> img(static_cast<std::size_t>(H * W));
    for (int64_t i = 0; i < H * W; ++i) img[i] = probe_images.data()[i];
    experiment::write_matrix(dir / "image0.dat", img.data(), H, W);
  }
  for (std::size_t l = 0; l < pr.layers.size(); ++l) {
    const Tensor<float> A = pr.layers[l].attn.weights.contiguous();
    const int64_t B = A.size(0), Hh = A.size(1), T = A.size(2), S = A.size(3);
    std::vector<double> m(static_cast<std::size_t>(T * S), 0.0), cls(static_cast<std::size_t>(ny * nx), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hh; ++h)
        for (int64_t i = 0; i < T * S; ++i) m[i] += A.data()[(b * Hh + h) * T * S + i] / double(B * Hh);
    for (int64_t h = 0; h < Hh; ++h)
      for (int64_t j = 0; j < ny * nx; ++j) cls[j] += A.data()[h * T * S + 1 + j] / double(Hh);
    experiment::write_matrix(dir / ("attn_L" + std::to_string(l) + ".dat"), m.data(), T, S);
    experiment::write_matrix(dir / ("cls_L" + std::to_string(l) + ".dat"), cls.data(), ny, nx);
  }
}

// Trains Model (its attention built with `pol`) for one run of the matrix.
template <class Model>
void fit(experiment::Run& run, const Context& c) {
  const Settings& s = *c.s;
  const Data& d = *c.d;
  Rng rng(run.seed());
  typename Model::template Module<float> model("", c.cfg, rng, policies<Model>());
  examples::paired_start(run, model, "vit_sinks", "the vanilla init of this seed",
                         [&](Rng& r) { return Vanilla::Module<float>("", c.cfg, r); });

  // AdamW: decay on the matrices (projections, patch embedding, head), none on gains, biases,
  // CLS, positions and registers.
  auto params = nn::parameter_list<float>(model);
  std::vector<autodiff::Parameter<float>*> decay, no_decay;
  for (auto* p : params) {
    const bool matrix = p->value.rank() == 2 && p->value.size(0) > 1 && p->name.find("pos") == std::string::npos &&
                        p->name.find("registers") == std::string::npos;
    (matrix ? decay : no_decay).push_back(p);
  }
  const optim::AdamWOptions ao{.lr = s.lr, .beta1 = 0.9, .beta2 = 0.999, .weight_decay = s.weight_decay};
  optim::AdamWOptions ao0 = ao;
  ao0.weight_decay = 0;
  optim::AdamW<float> opt(std::vector<optim::AdamW<float>::Group>{{decay, ao}, {no_decay, ao0}});
  const int64_t total = c.steps;
  const int64_t warm = std::min<int64_t>(total - 1, std::max<int64_t>(1, std::llround(double(total) * s.warmup)));
  const optim::Schedule sched({.decay = optim::Decay::Cosine, .warmup_steps = std::max<int64_t>(0, warm), .total_steps = total});
  autodiff::Tape<float> tape;
  const int64_t n_test = s.test_images > 0 ? std::min<int64_t>(s.test_images, d.test.size()) : d.test.size();

  auto probe_forward = [&] {
    nn::ModelProbe<float> pr;
    autodiff::no_grad ng;
    autodiff::Tape<float> t;
    model.features(t, d.probe, &pr);
    return pr;
  };
  auto evaluate = [&](int64_t) {
    io::LogRow row;
    double correct = 0, loss = 0;
    for (int64_t b = 0; b < n_test; b += 500) {
      const ImageBatch batch = range_batch(d.test, b, std::min(n_test, b + 500));
      autodiff::no_grad ng;
      autodiff::Tape<float> t;
      const Tensor<float> lg = model.logits(t, batch.x).value().contiguous();
      const int64_t n = lg.size(0), K = lg.size(1);
      for (int64_t i = 0; i < n; ++i) {
        const float* r = lg.data() + i * K;
        const int64_t arg = std::max_element(r, r + K) - r;
        correct += arg == batch.y.data()[i];
        double mx = r[arg], z = 0;
        for (int64_t k = 0; k < K; ++k) z += std::exp(double(r[k]) - mx);
        loss += mx + std::log(z) - r[batch.y.data()[i]];
      }
    }
    row.emplace_back("test_acc", correct / double(n_test));
    row.emplace_back("test_loss", loss / double(n_test));
    attention_metrics(model, probe_forward(), model.patches, row);
    return row;
  };
  auto at_end = [&] {
    const DenseScore ds = dense_probe(model, s, d, run.seed());
    write_maps(run.dir(), probe_forward(), d.probe, s.patch);
    experiment::Json j;
    j["dense_acc"] = ds.acc;
    j["dense_miou"] = ds.miou;
    j["parameters"] = nn::parameter_count<float>(model);
    run.progress().print("[" + run.tag() + "] dense probe: patch accuracy " + experiment::fixed(ds.acc) + ", mIoU " +
                         experiment::fixed(ds.miou));
    return j;
  };
  auto report = [](const io::LogRow& row) {
    auto get = [&](const std::string& k) { return io::number(row, k); };
    char buf[200];
    std::snprintf(buf, sizeof buf, "acc %.3f loss %.3f | sink %.3f | inflow %.3f (cls %.2f reg %.2f) | vratio %.2f | srank %.2f",
                  get("test_acc"), get("test_loss"), get("sink"), get("inflow"), get("inflow_cls"), get("inflow_reg"),
                  get("vratio"), get("srank"));
    return std::string(buf);
  };
  experiment::train(
      run, model, opt,
      {.steps = total, .eval_every = s.eval_every, .report = report, .diverge_above = 50.0, .at_end = at_end},
      [&](Rng& data) {
        const ImageBatch b = random_batch(d.train, data, s.batch);
        run.see_batch(b.x);
        return experiment::optimisation_step(tape, model, opt, b, sched, params, s.clip);
      },
      evaluate);
}

}  // namespace vit_sinks
