// Post-training fake quantization of a whole model, and its loss next to the float model's.
//
//   quant::PtqResult r = quant::evaluate_ptq(model, calibration_batches, eval_batches,
//                                            {.scheme = quant::Scheme::w8a8, .smoothquant = true});
//   r.float_perplexity, r.quant_perplexity, r.delta_perplexity()
//
// What is quantized: every weight projection y = x·W of the model — nn::Linear (FFN, LM head,
// GatedNorm's gate, mixing layers), the attention's QKV, gate and output projections and a
// tied LM head — both its weight and its input (Bondarenko et al. quantize the inputs of every
// linear layer). The sites are found through the nn::project seam (nn/projection.hpp) during
// calibration, keyed by the weight's parameter name. With `residual_stream` (W8A8 only)
// the residual stream is quantized too, at every nn::stream_point: the embeddings entering the
// first layer and the sum after each attention and FFN branch, asymmetric per-tensor INT8 with
// static min-max ranges — Bondarenko et al.'s residual-sum quantizers, which see the massive
// activations that the normed projection inputs do not. Left in float: the embedding table
// (unless tied to the head), norms, biases, policy parameters, and the attention core (q·kᵀ,
// softmax, A·v run inside one fused kernel; Bondarenko et al. also quantize those).
//
// Schemes:
//   w8a8       weights symmetric per-tensor INT8 with an MSE range search (int8_weight.hpp);
//              inputs asymmetric per-tensor INT8, static min-max ranges from the calibration
//              batches (minmax_observer.hpp semantics)
//   w4a4_int4  weights INT4 (−7..7) with an fp32 scale per block of 16 along the reduction axis;
//   w4a4_fp4   the same with FP4 E2M1 elements; inputs dynamic, per token, one scale per block
//              of `act_block` (16, NVFP4-style; 0 = one scale per token row) (block_quant.hpp)
//   none       nothing rounded: with smoothquant on, the smoothed float model (X/s)·(diag(s)W),
//              which equals the original up to float rounding
// SmoothQuant (α = 0.5 by default): per site, s_j = max|X_j|^α / max|W_j|^(1−α) from the
// calibration inputs' per-channel maxima (smoothquant.hpp). The weight becomes diag(s)·W and the
// input is divided by s at the seam, before its quantizer (static W8A8 ranges are those of X/s,
// exact from the per-channel minima and maxima). Dividing online rather than folding 1/s into
// the preceding norm gain keeps every site independent (a QKV and a gate projection reading the
// same normed input get their own s) and is the same arithmetic up to float rounding. A tied
// LM head is not smoothed: its weight is also the embedding table, which diag(s) would change.
//
// Integer inference (W8A8): after quantize_weights(), integer_scope() runs every projection as
// an integer GEMM (kernels/cpu/gemm_s8.hpp): the input's uint8 codes (x/s through the static
// activation quantizer) times the weight's int8 codes, summed exactly in int32 and scaled once by
// s_x·s_W. The codes are those the fake quantizers produce, so the two paths differ only by the
// rounding of the fake path's fp32 sums. The residual-stream quantizers stay fake (they are a
// round trip between float ops either way); the attention core and norms stay float.
//
// Projections can be left in float: PtqConfig::keep_float names them by weight (the gates of
// GatedNorm, say, whose low-rank products are a small share of the compute and whose output
// scales every channel). Their weights and inputs are not observed, quantized or counted in
// PtqResult::sites; the rest of the model is quantized as usual.
//
// Calibration runs the float model once per calibration batch; activation ranges are those of
// the float (smoothed) inputs. ModelQuantizer keeps pointers to the model's Parameters between
// calibrate() and restore(), so the model must not move meanwhile; restore() (and the
// destructor) puts every original weight back bit for bit. The seam hook is thread-local: it
// applies to forward passes run on the thread that installed it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/gemm_s8.hpp"
#include "sinklab/nn/projection.hpp"
#include "sinklab/quant/block_quant.hpp"
#include "sinklab/quant/int8_weight.hpp"
#include "sinklab/quant/smoothquant.hpp"
#include "sinklab/quant/uniform.hpp"

namespace sinklab::quant {

enum class Scheme { none, w8a8, w4a4_int4, w4a4_fp4 };

inline const char* scheme_name(Scheme s) {
  switch (s) {
    case Scheme::none: return "float";
    case Scheme::w8a8: return "W8A8";
    case Scheme::w4a4_int4: return "W4A4-INT4";
    case Scheme::w4a4_fp4: return "W4A4-FP4";
  }
  return "?";
}

struct PtqConfig {
  Scheme scheme = Scheme::w8a8;
  bool smoothquant = false;
  double alpha = 0.5;          // SmoothQuant migration strength
  bool weights = true;         // quantize the projection weights
  bool activations = true;     // quantize the projection inputs
  bool residual_stream = false;  // W8A8: also quantize the residual stream at every nn::stream_point
  int mse_candidates = 100;    // W8A8 weight clipping ranges tried
  int64_t weight_block = 16;   // W4A4 weight block along the reduction axis
  int64_t act_block = 16;      // W4A4 input block per token; 0: one scale per token
  int32_t ignore_index = -100;  // targets left out of the evaluated loss
  bool integer = false;        // W8A8: evaluate with integer GEMMs (ModelQuantizer::integer_scope)
  // A projection whose weight's name it accepts stays in float (weights and inputs); empty: none.
  std::function<bool(const std::string& weight)> keep_float{};
};

// One projection, as calibration saw it.
struct SiteStats {
  std::string weight;      // the weight's parameter name
  bool transposed = false;  // a tied head reading the weight as Wᵀ
  int64_t channels = 0;    // input features
  int64_t batches = 0;     // calibration inputs observed
  std::vector<double> channel_min, channel_max;  // of the float input, per channel
  std::vector<double> smoothing;                 // s_j (empty: not smoothed)
  UniformQuantizer activation;                   // W8A8: static range of X/s
  UniformQuantizer weight_quantizer;             // W8A8: the weight's scale (after smoothing)
  double weight_clip_ratio = 1.0;                // W8A8: chosen clip / max|W|
  double weight_mse = 0.0;                       // mean squared weight quantization error
};

// One residual-stream point, as calibration saw it.
struct StreamStats {
  std::string point;  // nn::stream_point's name
  int64_t batches = 0;
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  UniformQuantizer quantizer;  // asymmetric INT8 over [min, max]
};

template <class T>
class ModelQuantizer {
 public:
  explicit ModelQuantizer(PtqConfig cfg) : cfg_(cfg) {
    SINKLAB_CHECK(cfg_.alpha >= 0 && cfg_.alpha <= 1, "quant::ModelQuantizer: SmoothQuant alpha must be in [0, 1], got ",
                  cfg_.alpha);
    SINKLAB_CHECK(!cfg_.residual_stream || cfg_.scheme == Scheme::w8a8 || cfg_.scheme == Scheme::none,
                  "quant::ModelQuantizer: residual_stream quantization is defined for W8A8 (static per-tensor INT8), not ",
                  scheme_name(cfg_.scheme));
    SINKLAB_CHECK(cfg_.weight_block >= 1 && cfg_.act_block >= 0, "quant::ModelQuantizer: weight_block must be >= 1 and "
                  "act_block >= 0, got ", cfg_.weight_block, " and ", cfg_.act_block);
    observe_ = [this](autodiff::Tape<T>& tape, autodiff::Var<T> x, const nn::ProjectionSite<T>& s) {
      if (!kept_float(s)) observe(s, x.value());
      return s.product(tape, x);
    };
    quantize_ = [this](autodiff::Tape<T>& tape, autodiff::Var<T> x, const nn::ProjectionSite<T>& s) {
      return kept_float(s) ? s.product(tape, x) : s.product(tape, quantize_input(tape, x, s));
    };
    integer_ = [this](autodiff::Tape<T>& tape, autodiff::Var<T> x, const nn::ProjectionSite<T>& s) {
      return kept_float(s) ? s.product(tape, x) : integer_product(tape, x, s);
    };
    observe_stream_ = [this](autodiff::Tape<T>&, autodiff::Var<T> h, const std::string& point) {
      observe_stream(point, h.value());
      return h;
    };
    quantize_stream_ = [this](autodiff::Tape<T>& tape, autodiff::Var<T> h, const std::string& point) {
      return quantize_stream(tape, h, point);
    };
  }
  ~ModelQuantizer() { restore(); }
  ModelQuantizer(const ModelQuantizer&) = delete;
  ModelQuantizer& operator=(const ModelQuantizer&) = delete;

  const PtqConfig& config() const { return cfg_; }

  // Runs forward() (one or more float forward passes) with observers at every projection input.
  template <class F>
  void calibrate(F&& forward) {
    SINKLAB_CHECK(saved_.empty(), "quant::ModelQuantizer::calibrate: weights are quantized; restore() first");
    nn::ProjectionScope<T> scope(observe_);
    std::optional<nn::StreamScope<T>> stream;
    if (cfg_.residual_stream) stream.emplace(observe_stream_);
    forward();
    finalized_ = false;
  }

  // Smoothing scales and static input ranges from what calibration saw (quantize_weights and
  // the activation scope call it; call it directly to inspect sites() before quantizing).
  void finalize() {
    if (finalized_) return;
    SINKLAB_CHECK(!sites_.empty(), "quant::ModelQuantizer: no projection was seen; run calibrate() with a forward pass "
                  "of the model first", cfg_.keep_float ? " (or PtqConfig::keep_float keeps every projection in float)" : "");
    for (Site& s : sites_) {
      SiteStats& st = s.stats;
      st.smoothing.clear();
      if (cfg_.smoothquant && !st.transposed) {
        std::vector<double> act(st.channel_min.size());
        for (std::size_t j = 0; j < act.size(); ++j) act[j] = std::max(std::abs(st.channel_min[j]), std::abs(st.channel_max[j]));
        st.smoothing = smoothing_scales(act, weight_input_absmax(s.param->value), cfg_.alpha);
      }
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (std::size_t j = 0; j < st.channel_min.size(); ++j) {
        const double sj = st.smoothing.empty() ? 1.0 : st.smoothing[j];
        lo = std::min(lo, st.channel_min[j] / sj);
        hi = std::max(hi, st.channel_max[j] / sj);
      }
      st.activation = UniformQuantizer::asymmetric(lo, hi, 8);
    }
    SINKLAB_CHECK(!cfg_.residual_stream || !streams_.empty(), "quant::ModelQuantizer: residual_stream is on but calibration "
                  "passed no residual-stream point (the model has no nn::stream_point)");
    for (StreamStats& st : streams_) st.quantizer = UniformQuantizer::asymmetric(st.min, st.max, 8);
    finalized_ = true;
  }

  // Replaces every site's weight by diag(s)·W (when smoothing), fake-quantized (when cfg.weights
  // and the scheme quantizes). The originals are kept for restore().
  void quantize_weights() {
    finalize();
    SINKLAB_CHECK(saved_.empty(), "quant::ModelQuantizer::quantize_weights: weights are already quantized");
    for (Site& s : sites_) {
      Parameter& p = *s.param;
      SINKLAB_CHECK(p.value.defined() && p.value.rank() == 2 && p.value.size(s.stats.transposed ? 1 : 0) == s.stats.channels,
                    "quant::ModelQuantizer: weight '", p.name, "' has shape ", p.value.shape(), " but calibration saw ",
                    s.stats.channels, " input channels (was the model changed or moved?)");
      saved_.push_back({&p, p.value.clone()});
      Tensor<T> w = smoothed_weight(s);
      w = quantized_weight(s, w);
      p.value.copy_from(w);
    }
  }

  // Puts the original weights back, bit for bit (nothing to do when none were replaced).
  void restore() {
    for (auto& [p, original] : saved_) p->value.copy_from(original);
    saved_.clear();
    for (Site& s : sites_) s.packed = {};
  }
  bool weights_quantized() const { return !saved_.empty(); }

  // While the returned scope lives, projection inputs on this thread are smoothed and
  // fake-quantized, and with residual_stream the residual stream too (straight-through gradients).
  class ActivationScope {
   public:
    ActivationScope(const nn::ProjectionHook<T>& projections, const nn::StreamHook<T>* stream)
        : projections_(projections) {
      if (stream) stream_.emplace(*stream);
    }

   private:
    nn::ProjectionScope<T> projections_;
    std::optional<nn::StreamScope<T>> stream_;
  };
  ActivationScope activation_scope() {
    finalize();
    return ActivationScope(quantize_, cfg_.residual_stream ? &quantize_stream_ : nullptr);
  }

  // While the returned scope lives, every projection on this thread is an integer GEMM on the
  // codes of its input and of its quantized weight (and with residual_stream the residual stream
  // is fake-quantized as in activation_scope()). W8A8 with weights and activations quantized,
  // after quantize_weights(); inference only (forward passes under autodiff::no_grad). The
  // weights' codes are packed on the first call after quantize_weights().
  ActivationScope integer_scope() {
    if constexpr (!std::is_same_v<T, float>) {
      SINKLAB_CHECK(false, "quant::ModelQuantizer::integer_scope: integer inference computes in float; this quantizer's "
                    "model is not a float model");
    }
    SINKLAB_CHECK(cfg_.scheme == Scheme::w8a8 && cfg_.weights && cfg_.activations, "quant::ModelQuantizer::integer_scope: "
                  "integer GEMMs need W8A8 with both weights and activations quantized, not ", scheme_name(cfg_.scheme),
                  cfg_.weights ? "" : " (weights off)", cfg_.activations ? "" : " (activations off)");
    SINKLAB_CHECK(weights_quantized(), "quant::ModelQuantizer::integer_scope: call quantize_weights() first (the integer "
                  "weights are the codes of the quantized weights)");
    for (Site& s : sites_)
      if (!s.packed.data) s.packed = pack_weight_codes(s);
    return ActivationScope(integer_, cfg_.residual_stream ? &quantize_stream_ : nullptr);
  }

  // The input transform of one site, on values: x / s, then the scheme's input quantizer.
  Tensor<T> transform_input(const std::string& weight_name, const Tensor<T>& x) const {
    const Site& s = site(weight_name);
    SINKLAB_CHECK(finalized_, "quant::ModelQuantizer::transform_input: call finalize() (or quantize) first");
    SINKLAB_CHECK(x.defined() && x.rank() >= 1 && x.size(-1) == s.stats.channels, "quant::ModelQuantizer: input of shape ",
                  x.defined() ? x.shape().str() : std::string("undefined"), " for weight '", weight_name, "', expected [..., ",
                  s.stats.channels, "]");
    Tensor<T> v = x.contiguous();
    if (!s.stats.smoothing.empty()) v = divide_channels(v, s.stats.smoothing);
    if (!cfg_.activations) return v;
    switch (cfg_.scheme) {
      case Scheme::none: return v;
      case Scheme::w8a8: return fake_quantize(v, s.stats.activation);
      case Scheme::w4a4_int4:
      case Scheme::w4a4_fp4:
        return block_fake_quantize(v, format4(), cfg_.act_block > 0 ? cfg_.act_block : v.size(-1), -1).values;
    }
    return v;
  }

  std::vector<SiteStats> sites() const {
    std::vector<SiteStats> out;
    for (const Site& s : sites_) out.push_back(s.stats);
    return out;
  }
  int64_t site_count() const { return static_cast<int64_t>(sites_.size()); }
  const std::vector<StreamStats>& stream_points() const { return streams_; }

 private:
  using Parameter = autodiff::Parameter<T>;
  struct Site {
    Parameter* param = nullptr;
    SiteStats stats;
    kernels::cpu::PackedS8 packed;  // the weight's int8 codes as [in, out], for integer_scope()
  };

  Format4 format4() const { return cfg_.scheme == Scheme::w4a4_int4 ? Format4::int4 : Format4::fp4_e2m1; }

  bool kept_float(const nn::ProjectionSite<T>& s) const { return cfg_.keep_float && cfg_.keep_float(s.weight.name); }

  const Site& site(const std::string& name) const {
    auto it = index_.find(name);
    SINKLAB_CHECK(it != index_.end(), "quant::ModelQuantizer: projection with weight '", name,
                  "' was not seen during calibration (calibrate with the same model and forward path)");
    return sites_[it->second];
  }

  void observe(const nn::ProjectionSite<T>& ps, const Tensor<T>& x) {
    const Parameter& p = ps.weight;
    SINKLAB_CHECK(x.rank() >= 1 && x.numel() > 0, "quant::ModelQuantizer::calibrate: empty input to weight '", p.name, "'");
    const int64_t C = x.size(-1);
    auto [it, fresh] = index_.try_emplace(p.name, sites_.size());
    if (fresh) {
      Site s;
      s.param = &ps.weight;
      s.stats.weight = p.name;
      s.stats.transposed = ps.transposed;
      s.stats.channels = C;
      s.stats.channel_min.assign(static_cast<std::size_t>(C), std::numeric_limits<double>::infinity());
      s.stats.channel_max.assign(static_cast<std::size_t>(C), -std::numeric_limits<double>::infinity());
      sites_.push_back(std::move(s));
    }
    Site& s = sites_[it->second];
    SINKLAB_CHECK(s.param == &ps.weight && s.stats.transposed == ps.transposed && s.stats.channels == C,
                  "quant::ModelQuantizer::calibrate: weight '", p.name, "' is reached twice in different ways (another "
                  "parameter of the same name, another orientation, or ", C, " vs ", s.stats.channels, " input channels)");
    const Tensor<T> c = x.contiguous();
    const int64_t rows = c.numel() / C;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < C; ++j) {
        const double v = static_cast<double>(c.data()[r * C + j]);
        SINKLAB_CHECK(std::isfinite(v), "quant::ModelQuantizer::calibrate: non-finite input ", v, " to weight '", p.name, "'");
        s.stats.channel_min[j] = std::min(s.stats.channel_min[j], v);
        s.stats.channel_max[j] = std::max(s.stats.channel_max[j], v);
      }
    ++s.stats.batches;
  }

  static Tensor<T> divide_channels(const Tensor<T>& x, const std::vector<double>& s) {
    Tensor<T> out = x.clone();
    const int64_t C = x.size(-1), rows = x.numel() / C;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < C; ++j) {
        T& v = out.data()[r * C + j];
        v = static_cast<T>(static_cast<double>(v) / s[j]);
      }
    return out;
  }

  Tensor<T> smoothed_weight(const Site& s) const {
    const Tensor<T>& W = s.param->value;
    if (s.stats.smoothing.empty()) return W.clone();
    return apply_smoothing(Tensor<T>::zeros({1, W.size(0)}), W, s.stats.smoothing).W;
  }

  Tensor<T> quantized_weight(Site& s, const Tensor<T>& w) const {
    if (!cfg_.weights) return w;
    switch (cfg_.scheme) {
      case Scheme::none: return w;
      case Scheme::w8a8: {
        QuantizedWeight<T> q = quantize_weight_mse(w, 8, cfg_.mse_candidates);
        s.stats.weight_quantizer = q.quantizer;
        s.stats.weight_clip_ratio = q.clip_ratio;
        s.stats.weight_mse = q.mse;
        return q.values;
      }
      case Scheme::w4a4_int4:
      case Scheme::w4a4_fp4: {
        // Blocks run along the reduction axis: rows of W [in, out], columns of a tied Wᵀ.
        Tensor<T> q = block_fake_quantize(w, format4(), cfg_.weight_block, s.stats.transposed ? 1 : 0).values;
        double e = 0;
        for (int64_t i = 0; i < w.numel(); ++i) {
          const double d = static_cast<double>(w.data()[i]) - static_cast<double>(q.data()[i]);
          e += d * d;
        }
        s.stats.weight_mse = e / static_cast<double>(w.numel());
        return q;
      }
    }
    return w;
  }

  autodiff::Var<T> quantize_input(autodiff::Tape<T>& tape, autodiff::Var<T> x, const nn::ProjectionSite<T>& ps) {
    const Site& s = site(ps.weight.name);
    Tensor<T> q = transform_input(ps.weight.name, x.value());
    // Straight-through: the rounding passes the gradient unchanged; the division by s does not.
    std::vector<double> inv;
    for (double sj : s.stats.smoothing) inv.push_back(1.0 / sj);
    return tape.record(q, {x}, [x, inv](autodiff::Tape<T>& t, const Tensor<T>& g) {
      if (inv.empty()) return t.accumulate(x, g);
      Tensor<T> gx = g.contiguous().clone();
      const int64_t C = static_cast<int64_t>(inv.size()), rows = gx.numel() / C;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < C; ++j) gx.data()[r * C + j] = static_cast<T>(gx.data()[r * C + j] * inv[j]);
      t.accumulate(x, std::move(gx));
    });
  }

  // The weight's codes (it holds the fake-quantized values, each exactly a code times the scale),
  // oriented as the product reads them: [in, out], a tied head's Wᵀ too.
  kernels::cpu::PackedS8 pack_weight_codes(const Site& s) const {
    const Tensor<T> W = s.param->value.contiguous();
    const UniformQuantizer& q = s.stats.weight_quantizer;
    const int64_t K = s.stats.channels, N = W.numel() / K;
    std::vector<int8_t> codes(static_cast<std::size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) {
        const T w = s.stats.transposed ? W.data()[j * K + k] : W.data()[k * N + j];
        const int32_t c = q.quantize(static_cast<double>(w));
        SINKLAB_CHECK(static_cast<T>(q.dequantize(c)) == w, "quant::ModelQuantizer::integer_scope: weight '", s.stats.weight,
                      "' holds ", w, ", which is not a code of its quantizer (scale ", q.scale,
                      "); was it changed after quantize_weights()?");
        codes[static_cast<std::size_t>(k * N + j)] = static_cast<int8_t>(c);
      }
    return kernels::cpu::pack_s8(codes.data(), N, K, N);
  }

  autodiff::Var<T> integer_product(autodiff::Tape<T>& tape, autodiff::Var<T> x, const nn::ProjectionSite<T>& ps) {
    const Site& s = site(ps.weight.name);
    SINKLAB_CHECK(!(autodiff::grad_enabled() && x.requires_grad()), "quant::ModelQuantizer: the integer projection of '",
                  ps.weight.name, "' has no gradient; run integer inference under autodiff::no_grad");
    SINKLAB_CHECK(s.packed.data && s.packed.K == s.stats.channels, "quant::ModelQuantizer: weight '", ps.weight.name,
                  "' has no integer codes; call integer_scope() after quantize_weights()");
    const Tensor<T> xc = x.value().contiguous();
    const int64_t K = s.stats.channels, N = s.packed.N;
    SINKLAB_CHECK(xc.rank() >= 1 && xc.size(-1) == K, "quant::ModelQuantizer: input of shape ", xc.shape(), " for weight '",
                  ps.weight.name, "', expected [..., ", K, "]");
    const int64_t M = xc.numel() / K;
    const UniformQuantizer& qa = s.stats.activation;
    // The codes transform_input's fake quantizer rounds to: x / s_j rounded to T first, as there.
    thread_local std::vector<uint8_t> buffer;  // reused: one projection's input codes at a time
    buffer.resize(static_cast<std::size_t>(M * K));
    uint8_t* codes = buffer.data();
    const double* sm = s.stats.smoothing.empty() ? nullptr : s.stats.smoothing.data();
    const T* xd = xc.data();
    parallel_for(0, M, 16, [&](int64_t r0, int64_t r1) {
      thread_local std::vector<T> smoothed;  // one row of x / s, reused across calls on each thread
      if (sm) smoothed.resize(static_cast<std::size_t>(K));
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = xd + r * K;
        if (sm) {
          for (int64_t j = 0; j < K; ++j) smoothed[j] = static_cast<T>(static_cast<double>(xr[j]) / sm[j]);
          xr = smoothed.data();
        }
        qa.quantize_row(xr, K, codes + r * K);
      }
    });
    Tensor<T> y = Tensor<T>::empty(xc.shape().with(-1, N));
    if constexpr (std::is_same_v<T, float>)
      kernels::cpu::gemm_u8s8(M, codes, K, qa.zero_point, s.packed, qa.scale * s.stats.weight_quantizer.scale, y.data(), N);
    return tape.constant(y);
  }

  void observe_stream(const std::string& point, const Tensor<T>& h) {
    auto [it, fresh] = stream_index_.try_emplace(point, streams_.size());
    if (fresh) {
      StreamStats st;
      st.point = point;
      streams_.push_back(std::move(st));
    }
    StreamStats& st = streams_[it->second];
    const Tensor<T> c = h.contiguous();
    for (int64_t i = 0; i < c.numel(); ++i) {
      const double v = static_cast<double>(c.data()[i]);
      SINKLAB_CHECK(std::isfinite(v), "quant::ModelQuantizer::calibrate: non-finite value ", v, " in the residual stream at '",
                    point, "'");
      st.min = std::min(st.min, v);
      st.max = std::max(st.max, v);
    }
    ++st.batches;
  }

  autodiff::Var<T> quantize_stream(autodiff::Tape<T>& tape, autodiff::Var<T> h, const std::string& point) {
    const auto it = stream_index_.find(point);
    SINKLAB_CHECK(it != stream_index_.end(), "quant::ModelQuantizer: residual-stream point '", point,
                  "' was not seen during calibration (calibrate with the same model and forward path)");
    if (cfg_.scheme != Scheme::w8a8 || !cfg_.activations) return h;
    Tensor<T> q = fake_quantize(h.value().contiguous(), streams_[it->second].quantizer);
    return tape.record(q, {h}, [h](autodiff::Tape<T>& t, const Tensor<T>& g) { t.accumulate(h, g); });
  }

  PtqConfig cfg_;
  std::vector<Site> sites_;
  std::map<std::string, std::size_t> index_;
  std::vector<StreamStats> streams_;
  std::map<std::string, std::size_t> stream_index_;
  std::vector<std::pair<Parameter*, Tensor<T>>> saved_;
  bool finalized_ = false;
  nn::ProjectionHook<T> observe_, quantize_, integer_;
  nn::StreamHook<T> observe_stream_, quantize_stream_;
};

// Mean next-token cross-entropy (in double) over every target that is not ignore_index, and
// the number of such targets. The model needs logits(tape, ids) → [B, T, vocab]; a batch is
// anything with token ids `x` and targets `y` [B, T] (data::TokenBatch).
template <class Model, class Batch>
std::pair<double, int64_t> mean_token_loss(Model& model, const std::vector<Batch>& batches,
                                           int32_t ignore_index = -100) {
  using T = typename std::remove_cvref_t<decltype(model.embed.weight.value)>::value_type;
  SINKLAB_CHECK(!batches.empty(), "quant::mean_token_loss: no batches");
  autodiff::no_grad guard;
  autodiff::Tape<T> tape;
  double total = 0;
  int64_t count = 0;
  for (const Batch& b : batches) {
    tape.clear();
    const Tensor<T> lg = model.logits(tape, b.x).value().contiguous();
    SINKLAB_CHECK(lg.rank() == 3 && b.y.shape() == lg.shape().without(-1), "quant::mean_token_loss: logits ", lg.shape(),
                  " do not match targets ", b.y.shape());
    const int64_t V = lg.size(2), rows = b.y.numel();
    const Tensor<int32_t> y = b.y.contiguous();
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = y.data()[r];
      if (t == ignore_index) continue;
      SINKLAB_CHECK(t >= 0 && t < V, "quant::mean_token_loss: target ", t, " outside [0, ", V, ")");
      const T* row = lg.data() + r * V;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < V; ++j) m = std::max(m, static_cast<double>(row[j]));
      double s = 0;
      for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(row[j]) - m);
      total += std::log(s) + m - static_cast<double>(row[t]);
      ++count;
    }
  }
  SINKLAB_CHECK(count > 0, "quant::mean_token_loss: every target is ignore_index (", ignore_index, ")");
  return {total / static_cast<double>(count), count};
}

struct PtqResult {
  std::string scheme;
  bool smoothquant = false;
  double float_loss = 0, quant_loss = 0;              // mean cross-entropy per target token (nats)
  double float_perplexity = 0, quant_perplexity = 0;  // exp(loss)
  int64_t tokens = 0;  // evaluated targets
  int64_t sites = 0;   // projections quantized
  int64_t stream_points = 0;  // residual-stream points quantized (PtqConfig::residual_stream)
  bool integer = false;       // the quantized model ran integer GEMMs
  double delta_loss() const { return quant_loss - float_loss; }
  double delta_perplexity() const { return quant_perplexity - float_perplexity; }
};

// Calibrates on `calibration`, evaluates the float and the quantized model on `eval`, and
// leaves the model exactly as it was.
template <class Model, class Batch>
PtqResult evaluate_ptq(Model& model, const std::vector<Batch>& calibration, const std::vector<Batch>& eval,
                       const PtqConfig& cfg = {}) {
  using T = typename std::remove_cvref_t<decltype(model.embed.weight.value)>::value_type;
  SINKLAB_CHECK(!calibration.empty(), "quant::evaluate_ptq: no calibration batches");
  PtqResult r;
  r.scheme = scheme_name(cfg.scheme);
  r.smoothquant = cfg.smoothquant;
  r.integer = cfg.integer;
  std::tie(r.float_loss, r.tokens) = mean_token_loss(model, eval, cfg.ignore_index);
  ModelQuantizer<T> q(cfg);
  q.calibrate([&] {
    autodiff::no_grad guard;
    autodiff::Tape<T> tape;
    for (const Batch& b : calibration) {
      tape.clear();
      model.logits(tape, b.x);
    }
  });
  q.quantize_weights();
  {
    auto scope = cfg.integer ? q.integer_scope() : q.activation_scope();
    r.quant_loss = mean_token_loss(model, eval, cfg.ignore_index).first;
  }
  q.restore();
  r.sites = q.site_count();
  r.stream_points = static_cast<int64_t>(q.stream_points().size());
  r.float_perplexity = std::exp(r.float_loss);
  r.quant_perplexity = std::exp(r.quant_loss);
  return r;
}

}  // namespace sinklab::quant
