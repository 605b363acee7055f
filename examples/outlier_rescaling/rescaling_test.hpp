// The outlier paper's App. A.1, tested by intervention on a trained model. A.1 bounds the norm
// of RMSNorm's output, ‖LN(h)‖rms ≤ ‖λ‖∞ √((1 − r²) + ε²r²), where r is the outlier's share of ‖h‖
// and ε the norm gain λ_c of its channel over ‖λ‖∞: a large, lightly weighted channel scales every
// other channel down. The paper infers that role; here it is tested. At every residual-stream
// point — so before every RMSNorm that reads the stream, the final one included — one channel is
// edited and the validation loss measured again:
//   shrink   the residual-sink channel c clamped to the stream's median |x| (its sign kept): the
//            magnitude, and with it the rescaling, removed; what the channel says kept
//   flip     c negated: the magnitude and the rescaling kept, the direction reversed
//   control  a typical channel (the median by median |x|) negated: what reversing an ordinary
//            channel costs
// If c works as a scale, shrinking it costs far more than flipping it. Also logged: how much the
// shrink raises the other channels after the norm (rms(h) / rms(h'), mean over tokens and points)
// and c's norm gain over the mean gain (the paper: 0.006 against 1).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sinklab/nn/module.hpp"
#include "sinklab/nn/projection.hpp"
#include "sinklab/probe/residual_sinks.hpp"
#include "sinklab/quant/model.hpp"

namespace outlier_rescaling {

using namespace sinklab;

// `last_output` is the last layer's output stream on the probe batch (it names the channels).
template <class Model, class Batches>
std::vector<std::pair<std::string, double>> rescaling_test(Model& model, const Tensor<float>& last_output,
                                                           const Batches& validation, double sink_ratio) {
  const probe::ResidualSinks rs = probe::residual_sinks(last_output, sink_ratio);
  const auto D = static_cast<int64_t>(rs.ratios.size());
  std::vector<int64_t> order(rs.ratios.size());
  for (int64_t d = 0; d < D; ++d) order[static_cast<std::size_t>(d)] = d;
  std::nth_element(order.begin(), order.begin() + D / 2, order.end(),
                   [&](int64_t a, int64_t b) { return rs.ratios[a] > rs.ratios[b]; });
  // rs.top is −1 only where every entry is 0.
  const int64_t sink = std::max<int64_t>(rs.top, 0), typical = order[static_cast<std::size_t>(D / 2)];

  enum class Edit { shrink, flip, control };
  double gain_sum = 0;
  int64_t gain_n = 0;
  const auto loss_with = [&](Edit e) {
    const nn::StreamHook<float> hook = [&, e](autodiff::Tape<float>& tape, autodiff::Var<float> h, const std::string&) {
      Tensor<float> x = h.value().contiguous().clone();
      float* p = x.data();
      const int64_t rows = x.numel() / D;
      if (e == Edit::shrink) {
        std::vector<float> a(static_cast<std::size_t>(x.numel()));
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::fabs(p[i]);
        std::nth_element(a.begin(), a.begin() + std::ptrdiff_t(a.size() / 2), a.end());
        const float m = a[a.size() / 2];
        for (int64_t r = 0; r < rows; ++r) {
          float* row = p + r * D;
          double before = 0, after = 0;
          for (int64_t d = 0; d < D; ++d) before += double(row[d]) * row[d];
          row[sink] = std::copysign(std::min(std::fabs(row[sink]), m), row[sink]);
          for (int64_t d = 0; d < D; ++d) after += double(row[d]) * row[d];
          if (after > 0) gain_sum += std::sqrt(before / after), ++gain_n;
        }
      } else {
        const int64_t ch = e == Edit::flip ? sink : typical;
        for (int64_t r = 0; r < rows; ++r) p[r * D + ch] = -p[r * D + ch];
      }
      return tape.record(x, {h}, [h](autodiff::Tape<float>& t, const Tensor<float>& g) { t.accumulate(h, g); });
    };
    nn::StreamScope<float> scope(hook);
    return quant::mean_token_loss(model, validation).first;
  };
  const double base = quant::mean_token_loss(model, validation).first;
  std::vector<std::pair<std::string, double>> row;
  row.emplace_back("rescale_dim", static_cast<double>(sink));
  row.emplace_back("rescale_dim_ratio", rs.top_ratio);
  row.emplace_back("rescale_dloss_shrink", loss_with(Edit::shrink) - base);
  row.emplace_back("rescale_gain", gain_n ? gain_sum / double(gain_n) : NAN);
  row.emplace_back("rescale_dloss_flip", loss_with(Edit::flip) - base);
  row.emplace_back("rescale_dloss_control", loss_with(Edit::control) - base);
  // c's gain in the norms that read the stream, over the mean |gain| of the same norm (mean over norms).
  double lam = 0;
  int n = 0;
  for (auto* p : nn::parameter_list<float>(model)) {
    const std::string& name = p->name;
    const bool stream_norm = name.ends_with("attn_norm.weight") || name.ends_with("ffn_norm.weight") ||
                             name.ends_with("final_norm.weight");
    if (!stream_norm || p->value.rank() != 1 || p->value.numel() != D) continue;
    const Tensor<float> w = p->value.contiguous();
    double mean = 0;
    for (int64_t d = 0; d < D; ++d) mean += std::fabs(double(w.data()[d]));
    mean /= double(D);
    if (mean > 0) lam += std::fabs(double(w.data()[sink])) / mean, ++n;
  }
  row.emplace_back("rescale_lambda_ratio", n ? lam / n : NAN);
  return row;
}

}  // namespace outlier_rescaling
