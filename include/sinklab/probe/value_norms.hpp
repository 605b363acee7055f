// Value-state norms per head and token (VGA's ‖Val_<s>‖, NOP-vs-broadcast's value-norm ratio).
//
//   V    [B, H, T, d_h]  value states per head
//   W_O  [H·d_h, D]      output projection in the y·W convention of nn::Linear ([in, out]; head h
//                        owns rows h·d_h .. (h+1)·d_h − 1); a PyTorch-layout weight [D, H·d_h] is
//                        passed as W.transpose(0, 1)
//
//   value_norms(V)                 ‖v_t‖ per head and token, batch mean, [H, T]
//   output_value_norms(V, W_O)     ‖W_O v_t‖ (the head's write to the residual stream), [H, T]
//   value_norm_ratio(V, W_O, s)    ‖W_O v_s‖ / mean_{j ≠ s} ‖W_O v_j‖ per head (< 0.2 ⇒ NOP sink)
//   value_norm_ratio_at(V, W_O, sinks)  the same at each sequence's own sink token (sinks [B, H])
//
// The ratio compares batch means; the sink itself is left out of the denominator so that the
// ratio says how the sink compares with the *other* tokens (the mean over all j would pull it
// towards 1/T for a strong NOP sink on short sequences).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"
#include "sinklab/probe/per_head.hpp"

namespace sinklab::probe {

template <class T>
Tensor<double> value_norms(const Tensor<T>& V) {
  constexpr std::string_view fn = "probe::value_norms";
  detail::require_rank(fn, "values", V, 4, "[B, H, T, d_head]");
  detail::require_nonempty(fn, "values", V);
  const int64_t B = V.size(0), H = V.size(1), Tn = V.size(2), dh = V.size(3);
  const Tensor<T> v = V.contiguous();
  Tensor<double> out = Tensor<double>::zeros({H, Tn});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Tn; ++t) out(h, t) += detail::norm2(v.data() + ((b * H + h) * Tn + t) * dh, dh);
  for (int64_t k = 0; k < out.numel(); ++k) out.data()[k] /= static_cast<double>(B);
  return out;
}

namespace detail {
// ‖W_O v_t‖ per sequence, head and token, [B, H, T].
template <class T>
Tensor<double> output_value_norms_per_sequence(std::string_view fn, const Tensor<T>& V, const Tensor<T>& W_O) {
  detail::require_rank(fn, "values", V, 4, "[B, H, T, d_head]");
  detail::require_nonempty(fn, "values", V);
  detail::require_rank(fn, "W_O", W_O, 2, "[H*d_head, D] (y·W convention)");
  const int64_t B = V.size(0), H = V.size(1), Tn = V.size(2), dh = V.size(3), D = W_O.size(1);
  SINKLAB_CHECK(W_O.size(0) == H * dh, fn, ": W_O of shape ", W_O.shape(), " does not match values ", V.shape(),
                " (expected [", H * dh, ", D]; a PyTorch-layout weight is passed as W.transpose(0, 1))");
  const Tensor<T> v = V.contiguous();
  const Tensor<T> w = W_O.contiguous();
  Tensor<double> out = Tensor<double>::zeros({B, H, Tn});
  std::vector<double> o(static_cast<std::size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Tn; ++t) {
        const T* x = v.data() + ((b * H + h) * Tn + t) * dh;
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t k = 0; k < dh; ++k) {
          const double xk = static_cast<double>(x[k]);
          const T* row = w.data() + (h * dh + k) * D;
          for (int64_t n = 0; n < D; ++n) o[n] += xk * static_cast<double>(row[n]);
        }
        out(b, h, t) = detail::norm2(o.data(), D);
      }
  return out;
}
}  // namespace detail

template <class T>
Tensor<double> output_value_norms(const Tensor<T>& V, const Tensor<T>& W_O) {
  const Tensor<double> per = detail::output_value_norms_per_sequence("probe::output_value_norms", V, W_O);
  const int64_t B = per.size(0), HT = per.numel() / B;
  Tensor<double> out = Tensor<double>::zeros({per.size(1), per.size(2)});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < HT; ++k) out.data()[k] += per.data()[b * HT + k] / static_cast<double>(B);
  return out;
}

// Ratio of token s's norm to the mean norm of the other tokens, per head, from a [H, T] table
// such as value_norms() or output_value_norms() return, or from per-sequence norms [B, H, T]
// (e.g. the attention recorder's value_norms), which are first averaged over the batch.
template <class T>
PerHead norm_ratio_to_others(const Tensor<T>& table, int64_t s) {
  constexpr std::string_view fn = "probe::norm_ratio_to_others";
  SINKLAB_CHECK(table.defined() && (table.rank() == 2 || table.rank() == 3), fn,
                ": expected norms [H, T] or [B, H, T], got ",
                table.defined() ? table.shape().str() : std::string("undefined"));
  detail::require_nonempty(fn, "norms", table);
  const Tensor<T> c = table.rank() == 2 ? table.contiguous().view({1, table.size(0), table.size(1)}) : table.contiguous();
  Tensor<double> norms = Tensor<double>::zeros({c.size(1), c.size(2)});
  for (int64_t b = 0; b < c.size(0); ++b)
    for (int64_t k = 0; k < norms.numel(); ++k)
      norms.data()[k] += static_cast<double>(c.data()[b * norms.numel() + k]) / static_cast<double>(c.size(0));
  const int64_t H = norms.size(0), Tn = norms.size(1);
  SINKLAB_CHECK(0 <= s && s < Tn, fn, ": token ", s, " out of range for norms of shape ", norms.shape());
  SINKLAB_CHECK(Tn >= 2, fn, ": need at least two tokens, got norms of shape ", norms.shape());
  PerHead out;
  for (int64_t h = 0; h < H; ++h) {
    double rest = 0;
    for (int64_t t = 0; t < Tn; ++t)
      if (t != s) rest += norms(h, t);
    rest /= static_cast<double>(Tn - 1);
    out.values.push_back(rest > 0 ? norms(h, s) / rest : (norms(h, s) > 0 ? INFINITY : 1.0));
  }
  return out;
}

template <class T>
PerHead value_norm_ratio(const Tensor<T>& V, const Tensor<T>& W_O, int64_t s = 0) {
  return norm_ratio_to_others(output_value_norms(V, W_O), s);
}

// The ratio at each sequence's own sink: sinks [B, H] holds the sink token of every sequence and
// query head (probe::attention_inflow(A), where the sink moves between inputs, as in a ViT);
// per head, the mean over sequences of ‖W_O v_s‖ / mean_{j ≠ s} ‖W_O v_j‖. Grouped values
// (fewer value heads than query heads) are read as in GQA: query head h uses value head h / (H / H_kv).
template <class T, class I>
PerHead value_norm_ratio_at(const Tensor<T>& V, const Tensor<T>& W_O, const Tensor<I>& sinks) {
  constexpr std::string_view fn = "probe::value_norm_ratio_at";
  const Tensor<double> n = detail::output_value_norms_per_sequence(fn, V, W_O);
  const int64_t B = n.size(0), Hkv = n.size(1), Tn = n.size(2);
  SINKLAB_CHECK(sinks.defined() && sinks.rank() == 2 && sinks.size(0) == B && sinks.size(1) % Hkv == 0, fn,
                ": sinks of shape ", sinks.defined() ? sinks.shape().str() : std::string("undefined"), " for values ",
                V.shape(), ", expected [", B, ", H] with H a multiple of ", Hkv);
  SINKLAB_CHECK(Tn >= 2, fn, ": need at least two tokens, got values ", V.shape());
  const int64_t H = sinks.size(1), group = H / Hkv;
  PerHead out;
  for (int64_t h = 0; h < H; ++h) {
    double sum = 0;
    for (int64_t b = 0; b < B; ++b) {
      const auto s = static_cast<int64_t>(sinks(b, h));
      SINKLAB_CHECK(0 <= s && s < Tn, fn, ": sink ", s, " of sequence ", b, ", head ", h, " is not a token of values ",
                    V.shape());
      const double* row = n.data() + (b * Hkv + h / group) * Tn;
      double rest = 0;
      for (int64_t t = 0; t < Tn; ++t)
        if (t != s) rest += row[t];
      rest /= static_cast<double>(Tn - 1);
      sum += rest > 0 ? row[s] / rest : (row[s] > 0 ? INFINITY : 1.0);
    }
    out.values.push_back(sum / static_cast<double>(B));
  }
  return out;
}

// Same ratio on the raw value states ‖v_s‖ / mean_{j ≠ s} ‖v_j‖.
template <class T>
PerHead value_norm_ratio(const Tensor<T>& V, int64_t s = 0) {
  return norm_ratio_to_others(value_norms(V), s);
}

}  // namespace sinklab::probe
