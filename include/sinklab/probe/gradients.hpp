// Backward observables of the gradient-sinks paper (§2, eq. 3).
//
// token_grad_norms(G): ‖∇x_t‖₂ per position t, averaged over the batch (and over heads for
// per-head gradients): G is [B, H, T, d] (∇q, ∇k, ∇v per head) or [B, T, D]; the result is [T].
//
// Branch ratios, per token t, for one pre-norm residual branch (attention or MLP):
//   h      branch input on the residual stream          h̃ = Norm(h)   the normed branch input
//   r      branch output, h_{+1/2} = h + r               ∇r = ∇h_{+1/2} (the skip path)
//   Bloat_t    = ‖∇h̃_t‖ / ‖∇r_t‖
//   Compress_t = ‖∇h_t − ∇h_{+1/2,t}‖ / ‖∇h̃_t‖
//   Change_t   = ‖∇h_t‖ / ‖∇h_{+1/2,t}‖
// All gradients are [B, T, D]. Each norm is first averaged over the batch per token (the
// paper's "batch-aggregated" observables), then the ratios are taken; a zero denominator
// gives +inf (or NaN for 0/0), never a silent 0.
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

template <class T>
Tensor<double> token_grad_norms(const Tensor<T>& G) {
  constexpr std::string_view fn = "probe::token_grad_norms";
  SINKLAB_CHECK(G.defined() && (G.rank() == 3 || G.rank() == 4), fn,
                ": expected gradients [B, H, T, d] or [B, T, D], got ",
                G.defined() ? G.shape().str() : std::string("undefined"));
  detail::require_nonempty(fn, "gradient", G);
  const Tensor<T> c = G.rank() == 3 ? G.contiguous().view({G.size(0), 1, G.size(1), G.size(2)}) : G.contiguous();
  const int64_t BH = c.size(0) * c.size(1), Tn = c.size(2), d = c.size(3);
  Tensor<double> out = Tensor<double>::zeros({Tn});
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t t = 0; t < Tn; ++t) out(t) += detail::norm2(c.data() + (bh * Tn + t) * d, d);
  for (int64_t t = 0; t < Tn; ++t) out(t) /= static_cast<double>(BH);
  return out;
}

template <class T>
struct BranchGradients {
  Tensor<T> normed_input;  // ∇h̃  [B, T, D]
  Tensor<T> output;        // ∇r   [B, T, D]; may be left undefined: it equals ∇h_{+1/2}
  Tensor<T> input;         // ∇h   [B, T, D]
  Tensor<T> after;         // ∇h_{+1/2} [B, T, D]
};

struct BranchRatios {
  Tensor<double> bloat, compress, change;  // [T] each
};

template <class T>
BranchRatios branch_ratios(const BranchGradients<T>& g) {
  constexpr std::string_view fn = "probe::branch_ratios";
  detail::require_rank(fn, "∇h̃ (normed_input)", g.normed_input, 3, "[B, T, D]");
  detail::require_nonempty(fn, "∇h̃ (normed_input)", g.normed_input);
  const Shape s = g.normed_input.shape();
  auto same = [&](const Tensor<T>& t, const char* what) {
    SINKLAB_CHECK(t.defined() && t.shape() == s, fn, ": ", what, " has shape ",
                  t.defined() ? t.shape().str() : std::string("undefined"), ", expected ", s, " like ∇h̃");
  };
  same(g.input, "∇h (input)");
  same(g.after, "∇h_{+1/2} (after)");
  if (g.output.defined()) same(g.output, "∇r (output)");
  const Tensor<T> gt = g.normed_input.contiguous(), gh = g.input.contiguous(), ga = g.after.contiguous();
  const Tensor<T> gr = g.output.defined() ? g.output.contiguous() : ga;
  const int64_t B = s[0], Tn = s[1], D = s[2];
  Tensor<double> n_tilde = Tensor<double>::zeros({Tn}), n_r = Tensor<double>::zeros({Tn}),
                 n_h = Tensor<double>::zeros({Tn}), n_after = Tensor<double>::zeros({Tn}),
                 n_branch = Tensor<double>::zeros({Tn});
  std::vector<double> diff(static_cast<std::size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t o = (b * Tn + t) * D;
      n_tilde(t) += detail::norm2(gt.data() + o, D);
      n_r(t) += detail::norm2(gr.data() + o, D);
      n_h(t) += detail::norm2(gh.data() + o, D);
      n_after(t) += detail::norm2(ga.data() + o, D);
      for (int64_t k = 0; k < D; ++k)
        diff[k] = static_cast<double>(gh.data()[o + k]) - static_cast<double>(ga.data()[o + k]);
      n_branch(t) += detail::norm2(diff.data(), D);
    }
  // The batch mean cancels in the ratios, so the sums are divided directly.
  BranchRatios r{Tensor<double>::zeros({Tn}), Tensor<double>::zeros({Tn}), Tensor<double>::zeros({Tn})};
  for (int64_t t = 0; t < Tn; ++t) {
    r.bloat(t) = n_tilde(t) / n_r(t);
    r.compress(t) = n_branch(t) / n_tilde(t);
    r.change(t) = n_h(t) / n_after(t);
  }
  return r;
}

}  // namespace sinklab::probe
