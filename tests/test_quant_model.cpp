// Post-training quantization of whole models (quant/model.hpp) through the projection seam
// (nn/projection.hpp): which sites are found, degradation ordering W8A8 < W4A4 on a tiny trained
// model, weights and inputs on their grids, exact restore, SmoothQuant's float equivalence and
// its effect on an injected outlier channel; the residual-stream points; integer W8A8 inference
// against the fake quantizers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sinklab/data/token_batch.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/quant/model.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

using Llama = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;
using G1 = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;
using GatedTied = nn::Transformer<nn::PreNorm<norm::GatedNorm<norm::RMS, 4>>, G1, ffn::GeluMLP, pos::Learned>;

constexpr int64_t kVocab = 16, kT = 16;

// Noisy copying at a fixed lag: token t repeats token t − 4 with probability 0.8, else it is
// uniform. Predicting it needs attention (a Markov chain would not: the current token suffices).
struct CopyTask {
  static constexpr int64_t lag = 4;
  data::TokenBatch batch(Rng& rng, int64_t B) const {
    Tensor<int32_t> seq = Tensor<int32_t>::empty({B, kT + 1});
    for (int64_t i = 0; i < B; ++i)
      for (int64_t t = 0; t <= kT; ++t)
        seq(i, t) = (t >= lag && rng.uniform() < 0.8) ? seq(i, t - lag) : static_cast<int32_t>(rng.randint(0, kVocab));
    data::TokenBatch b{Tensor<int32_t>::empty({B, kT}), Tensor<int32_t>::empty({B, kT})};
    for (int64_t i = 0; i < B; ++i)
      for (int64_t t = 0; t < kT; ++t) {
        b.x(i, t) = seq(i, t);
        b.y(i, t) = seq(i, t + 1);
      }
    return b;
  }
};

nn::ModelConfig small_config() {
  nn::ModelConfig c;
  c.vocab = kVocab;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 2;
  c.ffn_hidden = 64;
  c.max_len = kT;
  return c;
}

template <class M>
void train(M& model, const CopyTask& chain, int steps, uint64_t seed) {
  optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = 5e-3, .weight_decay = 0.0});
  Rng rng(seed);
  Tape<float> tape;
  for (int s = 0; s < steps; ++s) {
    auto b = chain.batch(rng, 16);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, b.x, b.y);
    tape.backward(loss);
    opt.step();
  }
}

std::vector<data::TokenBatch> batches(const CopyTask& chain, uint64_t seed, int n, int64_t B = 16) {
  Rng rng(seed);
  std::vector<data::TokenBatch> out;
  for (int i = 0; i < n; ++i) out.push_back(chain.batch(rng, B));
  return out;
}

template <class M>
std::vector<std::vector<float>> snapshot(M& model) {
  std::vector<std::vector<float>> out;
  model.parameters([&](Parameter<float>& p) { out.push_back(p.value.to_vector()); });
  return out;
}

template <class M>
std::vector<float> logits_of(M& model, const Tensor<int32_t>& ids) {
  no_grad g;
  Tape<float> tape;
  return model.logits(tape, ids).value().to_vector();
}

// The trained model every test reads (trained once per process).
Llama::Module<float>& trained() {
  static CopyTask chain;
  static Llama::Module<float>* model = [] {
    Rng rng(1);
    auto* m = new Llama::Module<float>("", small_config(), rng);
    train(*m, chain, 250, 11);
    return m;
  }();
  return *model;
}
const CopyTask& chain() {
  static CopyTask c;
  return c;
}

}  // namespace

TEST_CASE("the projection seam reaches every weight projection of a model, a tied head transposed") {
  Rng rng(3);
  auto cfg = small_config();
  cfg.tie_embeddings = true;
  GatedTied::Module<float> model("m", cfg, rng);
  quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8});
  auto ids = chain().batch(rng, 2).x;
  q.calibrate([&] {
    Tape<float> t;
    model.logits(t, ids);
  });
  std::set<std::string> seen;
  bool head_transposed = false;
  for (const auto& s : q.sites()) {
    seen.insert(s.weight);
    if (s.weight == "m.embed.weight") head_transposed = s.transposed;
    CHECK(s.batches == 1);
  }
  std::set<std::string> want{"m.embed.weight", "m.final_norm.gate.down.weight", "m.final_norm.gate.up.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "m.layers." + std::to_string(l) + ".";
    for (const char* w : {"attn.qkv.weight", "attn.gate.weight", "attn.o.weight", "ffn.fc1.weight", "ffn.fc2.weight",
                          "attn_norm.gate.down.weight", "attn_norm.gate.up.weight", "ffn_norm.gate.down.weight",
                          "ffn_norm.gate.up.weight"})
      want.insert(p + w);
  }
  CHECK(seen == want);
  CHECK(head_transposed);
  // Without a scope the seam is the identity: the same logits as before calibration's hook.
  const auto a = logits_of(model, ids);
  const auto b = logits_of(model, ids);
  CHECK(a == b);
}

TEST_CASE("PTQ of a tiny trained model: W8A8 degrades little, W4A4 INT4 and FP4 more; the model comes back bit-identical") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 4);
  const auto eval = batches(chain(), 202, 8);
  const auto before = snapshot(model);
  const auto ids = eval[0].x;
  const auto logits_before = logits_of(model, ids);

  auto w8 = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8});
  auto i4 = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w4a4_int4});
  auto f4 = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w4a4_fp4});
  auto w8s = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8, .smoothquant = true});
  auto f4s = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w4a4_fp4, .smoothquant = true});
  for (const auto& r : {w8, i4, f4, w8s, f4s})
    MESSAGE(std::string(r.scheme + (r.smoothquant ? "+SQ" : "")) << ": loss " << r.float_loss << " -> " << r.quant_loss
                     << ", ppl " << r.float_perplexity << " -> " << r.quant_perplexity << " over " << r.tokens
                     << " tokens, " << r.sites << " sites");

  CHECK(w8.float_loss < std::log(double(kVocab)) - 0.5);  // the model did learn the chain
  CHECK(w8.sites == 2 * 4 + 1);  // per layer qkv, o, gate_up, down; the LM head
  CHECK(w8.tokens == 8 * 16 * kT);
  CHECK(std::abs(w8.delta_loss()) < 0.02);
  CHECK(std::abs(w8s.delta_loss()) < 0.02);
  // 4-bit noise is ~16x the 8-bit noise, so it moves the loss more; on a model this small the
  // move can go either way (a lucky perturbation lowers the loss), so compare magnitudes.
  CHECK(std::abs(i4.delta_loss()) > std::abs(w8.delta_loss()));
  CHECK(std::abs(f4.delta_loss()) > std::abs(w8.delta_loss()));
  CHECK(std::abs(f4s.delta_loss()) > std::abs(w8.delta_loss()));
  CHECK(w8.float_perplexity == doctest::Approx(std::exp(w8.float_loss)));
  CHECK(w8.float_loss == i4.float_loss);

  CHECK(snapshot(model) == before);
  CHECK(logits_of(model, ids) == logits_before);
}

TEST_CASE("quantized weights and inputs lie on their grids") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 2);
  auto calibrate = [&](quant::ModelQuantizer<float>& q) {
    q.calibrate([&] {
      no_grad g;
      Tape<float> t;
      for (auto& b : calib) {
        t.clear();
        model.logits(t, b.x);
      }
    });
  };
  std::map<std::string, Parameter<float>*> params;
  model.parameters([&](Parameter<float>& p) { params[p.name] = &p; });

  SUBCASE("W8A8 (with SmoothQuant): weight/scale integers in [-127, 127], inputs on the asymmetric grid") {
    quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .smoothquant = true});
    calibrate(q);
    q.quantize_weights();
    for (const auto& s : q.sites()) {
      const Tensor<float>& w = params.at(s.weight)->value;
      const double scale = s.weight_quantizer.scale;
      double worst = 0, amax = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double k = w.data()[i] / scale;
        worst = std::max(worst, std::abs(k - std::round(k)));
        amax = std::max(amax, std::abs(k));
      }
      INFO(s.weight);
      CHECK(worst < 1e-3);
      CHECK(amax <= 127.0 + 1e-3);
      CHECK(s.smoothing.size() == static_cast<std::size_t>(s.channels));
      // An input far outside the calibration range saturates at the range's ends.
      Rng rng(5);
      Tensor<float> x = rng.normal<float>({3, s.channels}, 0.f, 10.f);
      Tensor<float> xq = q.transform_input(s.weight, x);
      const auto& a = s.activation;
      for (int64_t i = 0; i < xq.numel(); ++i) {
        const double k = xq.data()[i] / a.scale + a.zero_point;
        CHECK(std::abs(k - std::round(k)) < 1e-3);
        CHECK(k >= -1e-3);
        CHECK(k <= 255 + 1e-3);
      }
    }
    q.restore();
  }
  SUBCASE("W4A4 INT4 and FP4: every block of 16 along the reduction axis is scale × grid, inputs per token block") {
    for (auto scheme : {quant::Scheme::w4a4_int4, quant::Scheme::w4a4_fp4}) {
      const auto fmt = scheme == quant::Scheme::w4a4_int4 ? quant::Format4::int4 : quant::Format4::fp4_e2m1;
      quant::ModelQuantizer<float> q({.scheme = scheme});
      calibrate(q);
      q.quantize_weights();
      auto on_grid = [&](const float* v, int64_t n, int64_t stride) {
        double amax = 0;
        for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(double(v[i * stride])));
        if (amax == 0) return true;
        const double scale = amax / quant::grid_max(fmt);
        for (int64_t i = 0; i < n; ++i) {
          const double g = v[i * stride] / scale;
          if (std::abs(g - quant::round_to_grid(fmt, g)) > 1e-4) return false;
        }
        return true;
      };
      for (const auto& s : q.sites()) {
        const Tensor<float>& w = params.at(s.weight)->value;  // [K, N]: blocks down each column
        const int64_t K = w.size(0), N = w.size(1);
        bool ok = true;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k0 = 0; k0 < K; k0 += 16) ok = ok && on_grid(w.data() + k0 * N + n, std::min<int64_t>(16, K - k0), N);
        INFO(s.weight, " ", quant::scheme_name(scheme));
        CHECK(ok);
        CHECK(s.weight_mse > 0);
        Rng rng(6);
        Tensor<float> xq = q.transform_input(s.weight, rng.normal<float>({4, s.channels}, 0.f, 1.f));
        bool xok = true;
        for (int64_t r = 0; r < 4; ++r)
          for (int64_t k0 = 0; k0 < s.channels; k0 += 16)
            xok = xok && on_grid(xq.data() + r * s.channels + k0, std::min<int64_t>(16, s.channels - k0), 1);
        CHECK(xok);
      }
      q.restore();
    }
  }
  SUBCASE("inside the activation scope a projection multiplies the transformed input") {
    quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .smoothquant = true});
    calibrate(q);
    q.quantize_weights();
    auto& lin = model.layers[1].ffn.down;
    Rng rng(8);
    Tensor<float> x = rng.normal<float>({2, 3, lin.in}, 0.f, 1.f);
    Tape<float> t;
    Var<float> y;
    {
      auto scope = q.activation_scope();
      y = lin(t, t.leaf(x));
    }
    Var<float> ref = matmul(t.constant(q.transform_input(lin.weight.name, x)), t.constant(lin.weight.value));
    CHECK(y.value().to_vector() == ref.value().to_vector());
    // Outside the scope the seam is the identity again.
    Var<float> plain = lin(t, t.leaf(x));
    Var<float> ref2 = matmul(t.constant(x), t.constant(lin.weight.value));
    CHECK(plain.value().to_vector() == ref2.value().to_vector());
    q.restore();
  }
}

TEST_CASE("SmoothQuant keeps the float model's outputs, and rescues W8A8 from an outlier input channel") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 4);
  const auto eval = batches(chain(), 202, 8);
  const auto ids = eval[0].x;

  // A function-preserving outlier: channel 3 of every attention norm's gain ×64, the matching
  // rows of W_qkv ÷64 (powers of two: exact, and exactly undone at the end). The float model is
  // unchanged; the QKV input gets a 64× channel.
  auto inject = [&](float f) {
    for (auto& l : model.layers) {
      l.attn_norm.weight.value.data()[3] *= f;
      auto& w = l.attn.w_qkv.value;
      for (int64_t n = 0; n < w.size(1); ++n) w(3, n) /= f;
    }
  };
  const auto before = snapshot(model);
  const auto ref0 = logits_of(model, ids);
  inject(64.f);
  const auto ref = logits_of(model, ids);
  {
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::abs(ref[i] - ref0[i])));
    CHECK(worst < 1e-4);
  }

  SUBCASE("smoothing alone (no rounding) changes weights but not logits (1e-5)") {
    quant::ModelQuantizer<float> q({.scheme = quant::Scheme::none, .smoothquant = true});
    q.calibrate([&] {
      no_grad g;
      Tape<float> t;
      for (auto& b : calib) {
        t.clear();
        model.logits(t, b.x);
      }
    });
    const float w_before = model.layers[0].attn.w_qkv.value(3, 0);
    q.quantize_weights();
    CHECK(model.layers[0].attn.w_qkv.value(3, 0) != w_before);
    double smax = 0;
    for (const auto& s : q.sites())
      for (double v : s.smoothing) smax = std::max(smax, std::abs(std::log(v)));
    CHECK(smax > 0.5);
    std::vector<float> smoothed;
    {
      auto scope = q.activation_scope();
      smoothed = logits_of(model, ids);
    }
    q.restore();
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, double(std::abs(smoothed[i] - ref[i])));
      scale = std::max(scale, double(std::abs(ref[i])));
    }
    MESSAGE("smoothed float model: max |Δlogit| " << worst << " (max |logit| " << scale << ")");
    CHECK(worst < 1e-5 * std::max(1.0, scale));
    CHECK(logits_of(model, ids) == ref);
  }
  SUBCASE("W8A8 with the outlier degrades; SmoothQuant recovers most of it") {
    auto plain = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8});
    auto smooth = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8, .smoothquant = true});
    MESSAGE("outlier model W8A8 Δloss " << plain.delta_loss() << ", with SmoothQuant " << smooth.delta_loss());
    CHECK(plain.delta_loss() > 0);
    CHECK(smooth.delta_loss() < 0.5 * plain.delta_loss());
  }
  inject(1.f / 64.f);
  CHECK(snapshot(model) == before);
}

TEST_CASE("residual-stream quantization: one point per embedding output and branch sum, min-max ranges, values on the grid") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 3);
  const auto ids = batches(chain(), 202, 1)[0].x;
  auto calibrate = [&](quant::ModelQuantizer<float>& q) {
    q.calibrate([&] {
      no_grad g;
      Tape<float> t;
      for (auto& b : calib) {
        t.clear();
        model.logits(t, b.x);
      }
    });
  };
  // The float stream at every point, from the probe (it records after the point).
  auto probe_of = [&](const Tensor<int32_t>& x) {
    no_grad g;
    Tape<float> t;
    nn::ModelProbe<float> pr;
    model.logits(t, x, &pr);
    return pr;
  };
  auto stream_tensors = [](const nn::ModelProbe<float>& pr) {
    std::vector<Tensor<float>> v{pr.embeddings};
    for (const auto& l : pr.layers) v.insert(v.end(), {l.mid, l.output});
    return v;
  };
  {
    quant::ModelQuantizer<float> off({.scheme = quant::Scheme::w8a8});
    calibrate(off);
    off.finalize();
    CHECK(off.stream_points().empty());
  }
  quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .residual_stream = true});
  calibrate(q);
  q.finalize();
  const auto& points = q.stream_points();
  REQUIRE(points.size() == 1 + 2 * model.layers.size());
  CHECK(points[0].point == "embeddings");
  CHECK(points[1].point == "layers.0.residual.attn");
  CHECK(points[2].point == "layers.0.residual.ffn");
  CHECK(points[4].point == "layers.1.residual.ffn");
  // Ranges: the min and max over the calibration batches of the float stream at that point
  // (the probe takes the materialised attention path: equal up to float rounding).
  std::vector<double> lo(points.size(), 1e300), hi(points.size(), -1e300);
  for (auto& b : calib) {
    const auto ts = stream_tensors(probe_of(b.x));
    for (std::size_t k = 0; k < ts.size(); ++k)
      for (float v : ts[k].to_vector()) lo[k] = std::min(lo[k], double(v)), hi[k] = std::max(hi[k], double(v));
  }
  for (std::size_t k = 0; k < points.size(); ++k) {
    CHECK(points[k].batches == 3);
    CHECK(points[k].min == doctest::Approx(lo[k]).epsilon(1e-5));
    CHECK(points[k].max == doctest::Approx(hi[k]).epsilon(1e-5));
  }
  // Inside the scope every stream point's values lie on its INT8 grid, and rounding changed some.
  const auto plain = stream_tensors(probe_of(ids));
  std::vector<Tensor<float>> quantized;
  {
    auto scope = q.activation_scope();
    quantized = stream_tensors(probe_of(ids));
  }
  for (std::size_t k = 0; k < points.size(); ++k) {
    CAPTURE(points[k].point);
    const Tensor<float> again = quant::fake_quantize(quantized[k], points[k].quantizer);
    CHECK(again.to_vector() == quantized[k].to_vector());
    CHECK(quantized[k].to_vector() != plain[k].to_vector());
  }
  // Outside the scope the stream is float again; the end-to-end evaluation counts the points.
  CHECK(stream_tensors(probe_of(ids))[2].to_vector() == plain[2].to_vector());
  const auto r = quant::evaluate_ptq(model, calib, batches(chain(), 303, 2), {.scheme = quant::Scheme::w8a8, .residual_stream = true});
  CHECK(r.stream_points == 5);
  CHECK(std::isfinite(r.quant_loss));
  CHECK_THROWS_WITH_AS(quant::ModelQuantizer<float>({.scheme = quant::Scheme::w4a4_int4, .residual_stream = true}),
                       doctest::Contains("residual_stream"), Error);
}

TEST_CASE("integer W8A8: a projection is the exact int32 sum of the fake quantizers' codes, scaled once") {
  Rng rng(5);
  nn::Linear<float> lin("lin", 37, 70, rng);  // 70 outputs: a 64-column panel and a partial one
  Tensor<float> x = rng.normal<float>({3, 5, 37});
  for (int64_t r = 0; r < 15; ++r) x.data()[r * 37 + 4] *= 20.f;  // an outlier channel for SmoothQuant
  Tensor<float> probe = x.clone();
  for (int64_t i = 0; i < probe.numel(); i += 7) probe.data()[i] *= 1.5f;  // some inputs beyond the calibrated range
  for (const bool smooth : {false, true}) {
    CAPTURE(smooth);
    quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .smoothquant = smooth});
    q.calibrate([&] {
      Tape<float> t;
      lin(t, t.constant(x));
    });
    q.quantize_weights();
    no_grad g;
    Tape<float> t;
    Tensor<float> fake, integer;
    {
      auto scope = q.activation_scope();
      fake = lin(t, t.constant(probe)).value();
    }
    {
      auto scope = q.integer_scope();
      integer = lin(t, t.constant(probe)).value();
    }
    REQUIRE(integer.shape() == Shape{3, 5, 70});
    // The codes, recovered from the fake path's operands (each a code times its scale).
    const quant::SiteStats st = q.sites()[0];
    const quant::UniformQuantizer qa = st.activation, qw = st.weight_quantizer;
    const Tensor<float> xhat = q.transform_input("lin.weight", probe);
    const float scale = qa.scale * qw.scale;
    int clamped = 0, mismatched = 0;
    double worst = 0, peak = 0;
    for (int64_t r = 0; r < 15; ++r)
      for (int64_t j = 0; j < 70; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < 37; ++k) {
          const int32_t a = qa.quantize(xhat.data()[r * 37 + k]), w = qw.quantize(lin.weight.value(k, j));
          clamped += j == 0 && (a == 0 || a == 255);
          acc += int64_t{a - qa.zero_point} * w;
        }
        const float want = static_cast<float>(static_cast<double>(acc) * static_cast<double>(scale));
        mismatched += integer.data()[r * 70 + j] != want;
        worst = std::max(worst, std::abs(double(integer.data()[r * 70 + j]) - fake.data()[r * 70 + j]));
        peak = std::max(peak, std::abs(double(fake.data()[r * 70 + j])));
      }
    CHECK(clamped > 0);
    CHECK(mismatched == 0);
    CHECK(worst <= 1e-5 * peak);  // the fake path's fp32 sums of the same products
  }
}

TEST_CASE("integer W8A8 inference of a model: the fake-quantized model's logits and loss, a tied head included") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 4);
  const auto eval = batches(chain(), 202, 8);
  const auto before = snapshot(model);
  for (const bool smooth : {false, true})
    for (const bool stream : {false, true}) {
      CAPTURE(smooth);
      CAPTURE(stream);
      quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .smoothquant = smooth, .residual_stream = stream});
      q.calibrate([&] {
        Tape<float> t;
        for (const auto& b : calib) model.logits(t, b.x);
      });
      q.quantize_weights();
      std::vector<float> fake, integer;
      {
        auto scope = q.activation_scope();
        fake = logits_of(model, eval[0].x);
      }
      {
        auto scope = q.integer_scope();
        integer = logits_of(model, eval[0].x);
      }
      REQUIRE(fake.size() == integer.size());
      double worst = 0, peak = 0;
      int apart = 0;
      for (std::size_t i = 0; i < fake.size(); ++i) peak = std::max(peak, std::abs(double(fake[i])));
      for (std::size_t i = 0; i < fake.size(); ++i) {
        worst = std::max(worst, std::abs(double(fake[i]) - integer[i]));
        apart += std::abs(double(fake[i]) - integer[i]) > 1e-5 * peak;
      }
      MESSAGE("max |integer - fake| logit " << worst << " of " << peak << "; " << apart << " of " << fake.size() << " apart");
      // Where the two agree on every code the logits agree to fp32 rounding. A ~1e-7 difference
      // in a projection's output can move a later input across a rounding boundary (one code
      // step, seen in one configuration here: 47 of 4,096 logits, 3 token rows, by up to 1% of
      // the largest); a wrong code or scale would move nearly every logit.
      CHECK(apart <= static_cast<int>(fake.size() / 20));
      CHECK(worst <= 0.05 * peak);
    }
  CHECK(snapshot(model) == before);

  const auto fake = quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8, .smoothquant = true});
  const auto integer =
      quant::evaluate_ptq(model, calib, eval, {.scheme = quant::Scheme::w8a8, .smoothquant = true, .integer = true});
  CHECK(integer.integer);
  CHECK(!fake.integer);
  CHECK(integer.float_loss == fake.float_loss);
  CHECK(std::abs(integer.quant_loss - fake.quant_loss) < 1e-4);
  CHECK(snapshot(model) == before);

  // A tied LM head reads the embedding table transposed.
  Rng rng(3);
  auto cfg = small_config();
  cfg.tie_embeddings = true;
  GatedTied::Module<float> tied("m", cfg, rng);
  const auto tied_fake = quant::evaluate_ptq(tied, calib, eval, {.scheme = quant::Scheme::w8a8});
  const auto tied_integer = quant::evaluate_ptq(tied, calib, eval, {.scheme = quant::Scheme::w8a8, .integer = true});
  CHECK(std::abs(tied_integer.quant_loss - tied_fake.quant_loss) < 1e-4);
}

TEST_CASE("integer W8A8 refuses what it cannot run") {
  auto& model = trained();
  const auto calib = batches(chain(), 101, 1);
  auto calibrate = [&](quant::ModelQuantizer<float>& q) {
    q.calibrate([&] {
      Tape<float> t;
      model.logits(t, calib[0].x);
    });
  };
  quant::ModelQuantizer<float> w8({.scheme = quant::Scheme::w8a8});
  calibrate(w8);
  CHECK_THROWS_WITH_AS(w8.integer_scope(), doctest::Contains("call quantize_weights() first"), Error);
  w8.quantize_weights();
  {
    auto scope = w8.integer_scope();
    Tape<float> t;  // gradients on: the integer product has none to give
    CHECK_THROWS_WITH_AS(model.logits(t, calib[0].x), doctest::Contains("under autodiff::no_grad"), Error);
  }
  w8.restore();
  CHECK_THROWS_WITH_AS(w8.integer_scope(), doctest::Contains("call quantize_weights() first"), Error);
  quant::ModelQuantizer<float> w4({.scheme = quant::Scheme::w4a4_int4});
  calibrate(w4);
  w4.quantize_weights();
  CHECK_THROWS_WITH_AS(w4.integer_scope(), doctest::Contains("need W8A8"), Error);
  quant::ModelQuantizer<float> weights_only({.scheme = quant::Scheme::w8a8, .activations = false});
  calibrate(weights_only);
  weights_only.quantize_weights();
  CHECK_THROWS_WITH_AS(weights_only.integer_scope(), doctest::Contains("(activations off)"), Error);
}

TEST_CASE("keep_float leaves the named projections in float: GatedNorm's gates unobserved, unquantized, uncounted") {
  Rng rng(5);
  auto cfg = small_config();
  cfg.tie_embeddings = true;
  GatedTied::Module<float> model("m", cfg, rng);
  const auto is_gate = [](const std::string& w) { return w.find("norm.gate.") != std::string::npos; };
  const auto before = snapshot(model);
  const auto ids = chain().batch(rng, 2).x;
  const auto float_logits = logits_of(model, ids);
  quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w4a4_fp4, .keep_float = is_gate});
  q.calibrate([&] {
    Tape<float> t;
    model.logits(t, ids);
  });
  for (const auto& s : q.sites()) CHECK_MESSAGE(!is_gate(s.weight), s.weight);
  CHECK(q.site_count() == 1 + 2 * 5);  // the tied head; per layer qkv, gate, o, fc1, fc2
  CHECK_THROWS_WITH_AS(q.transform_input("m.layers.0.attn_norm.gate.down.weight", Tensor<float>::zeros({1, 32})),
                       doctest::Contains("was not seen"), Error);
  q.quantize_weights();
  std::map<std::string, std::vector<float>> now;
  model.parameters([&](Parameter<float>& p) { now[p.name] = p.value.to_vector(); });
  std::size_t i = 0, gates = 0, changed = 0;
  model.parameters([&](Parameter<float>& p) {
    if (is_gate(p.name)) {
      CHECK_MESSAGE(now[p.name] == before[i], p.name);
      ++gates;
    }
    if (p.value.rank() == 2 && !is_gate(p.name)) changed += now[p.name] != before[i];
    ++i;
  });
  CHECK(gates == 2 * 2 * 2 + 2);  // down and up of two norms per layer and of the final norm
  CHECK(changed == 1 + 2 * 5);
  {
    // Under the activation scope the gates' inputs pass unquantized (quantizing one would throw:
    // no range was calibrated for it) while the rest is quantized: the logits move.
    auto scope = q.activation_scope();
    std::vector<float> quantized;
    CHECK_NOTHROW(quantized = logits_of(model, ids));
    CHECK(quantized != float_logits);
  }
  q.restore();
  CHECK(snapshot(model) == before);
  const auto everything = [](const std::string&) { return true; };
  CHECK_THROWS_WITH_AS(quant::evaluate_ptq(model, batches(chain(), 1, 1), batches(chain(), 2, 1),
                                           {.scheme = quant::Scheme::w8a8, .keep_float = everything}),
                       doctest::Contains("keep_float keeps every projection"), Error);
}

TEST_CASE("model quantizer errors name the site and the problem") {
  auto& model = trained();
  quant::ModelQuantizer<float> q({});
  CHECK_THROWS_WITH_AS(q.quantize_weights(), doctest::Contains("no projection was seen"), Error);
  q.calibrate([&] {
    Tape<float> t;
    model.logits(t, batches(chain(), 1, 1)[0].x);
  });
  CHECK_THROWS_WITH_AS(q.transform_input("nope.weight", Tensor<float>::zeros({1, 4})), doctest::Contains("nope.weight"),
                       Error);
  CHECK_THROWS_WITH_AS(quant::ModelQuantizer<float>({.alpha = 1.5}), doctest::Contains("alpha"), Error);
}
