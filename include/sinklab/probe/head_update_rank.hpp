// Per head, the stable rank of the head's own write to the residual stream — one of the two axes
// on which the NOP-vs-broadcast paper separates sink phenotypes (its Fig. 6 and 8; the other is
// the value-norm ratio, value_norms.hpp):
//
//   head_update_stable_rank(A, V, W_O)   per head h, ‖U_h‖_F² / σ₁² of U_h = A_h V_h W_O,h [T, D],
//                                        the batch mean: ≈ 1 where every query receives one
//                                        token's value (a broadcast sink, rank-1 by its Lemma 3)
//
// A [B, H, T, S] attention weights, V [B, H_kv, S, d_h] values (query head h reads value head
// h / (H / H_kv)), W_O [H·d_h, D] in the y·W convention (head h owns rows h·d_h .. (h+1)·d_h − 1,
// as in value_norms.hpp). A gate on the head's output (G1) is in neither A nor V, so for a gated
// attention this is the update before the gate. Diffuse attention also gives rank ≈ 1 (every
// query receives nearly the same average), so the figure says something only beside the
// model's other heads.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <string_view>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"
#include "sinklab/probe/per_head.hpp"
#include "sinklab/probe/spectral.hpp"

namespace sinklab::probe {

template <class T>
PerHead head_update_stable_rank(const Tensor<T>& A, const Tensor<T>& V, const Tensor<T>& W_O) {
  constexpr std::string_view fn = "probe::head_update_stable_rank";
  detail::require_rank(fn, "attention", A, 4, "[B, H, T, S]");
  detail::require_rank(fn, "values", V, 4, "[B, H_kv, S, d_head]");
  detail::require_rank(fn, "W_O", W_O, 2, "[H*d_head, D] (y·W convention)");
  detail::require_nonempty(fn, "attention", A);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2), S = A.size(3);
  const int64_t Hkv = V.size(1), dh = V.size(3), D = W_O.size(1);
  SINKLAB_CHECK(V.size(0) == B && V.size(2) == S && Hkv > 0 && H % Hkv == 0, fn, ": values ", V.shape(),
                " do not match attention ", A.shape(), " (expected [", B, ", H_kv, ", S, ", d_head] with H_kv dividing ",
                H, ")");
  SINKLAB_CHECK(W_O.size(0) == H * dh, fn, ": W_O of shape ", W_O.shape(), " does not match ", H,
                " heads of width ", dh, " (expected [", H * dh, ", D]; a PyTorch-layout weight is passed as "
                "W.transpose(0, 1))");
  const Tensor<T> a = A.contiguous(), v = V.contiguous();
  const Eigen::MatrixXd w = detail::to_eigen(W_O.contiguous().data(), H * dh, D);
  PerHead out;
  out.values.assign(static_cast<std::size_t>(H), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const Eigen::MatrixXd ah = detail::to_eigen(a.data() + (b * H + h) * Tq * S, Tq, S);
      const Eigen::MatrixXd vh = detail::to_eigen(v.data() + (b * Hkv + h / (H / Hkv)) * S * dh, S, dh);
      out.values[static_cast<std::size_t>(h)] += detail::stable_rank(ah * vh * w.middleRows(h * dh, dh)) / double(B);
    }
  return out;
}

}  // namespace sinklab::probe
