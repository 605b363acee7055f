// Spectra of matrices the sink papers read (NOP vs broadcast):
//
//   singular_values(M)                 σ₁ ≥ σ₂ ≥ … of a [N, D] matrix (Eigen BDCSVD, in double)
//   stable_rank(U)                     ‖U‖_F² / σ₁² of an attention update U [N, D]
//                                      (or the batch mean over U [B, N, D]); a zero matrix gives 0
//   qk_singular_values(W_Q, W_K, H)    per head, the singular values of Θ_h = W_Q,h W_K,hᵀ [D, D]
//
// W_Q, W_K are [D, H·d_h] in the y·W convention (q = x W_Q; head h owns columns h·d_h ..
// (h+1)·d_h − 1), matching the paper's q_i = W_Qᵀ x_i with W_Q ∈ R^{d×d_h}. A PyTorch-layout
// weight [H·d_h, D] is passed as W.transpose(0, 1). Grouped keys (W_K with fewer heads) are
// shared as in GQA: query head h reads key head h / (H / H_kv).
#pragma once
#include <Eigen/Dense>
#include <Eigen/SVD>
#include <cstdint>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

namespace detail {
template <class T>
Eigen::MatrixXd to_eigen(const T* p, int64_t rows, int64_t cols) {
  Eigen::MatrixXd m(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m(r, c) = static_cast<double>(p[r * cols + c]);
  return m;
}
inline std::vector<double> singular_values(const Eigen::MatrixXd& m) {
  Eigen::BDCSVD<Eigen::MatrixXd> svd(m);  // values only
  const Eigen::VectorXd s = svd.singularValues();
  return std::vector<double>(s.data(), s.data() + s.size());
}
inline double stable_rank(const Eigen::MatrixXd& m) {
  const std::vector<double> s = singular_values(m);
  if (s.empty() || s[0] == 0.0) return 0.0;
  return m.squaredNorm() / (s[0] * s[0]);
}
}  // namespace detail

template <class T>
std::vector<double> singular_values(const Tensor<T>& M) {
  constexpr std::string_view fn = "probe::singular_values";
  detail::require_rank(fn, "matrix", M, 2, "[N, D]");
  const Tensor<T> c = M.contiguous();
  return detail::singular_values(detail::to_eigen(c.data(), c.size(0), c.size(1)));
}

template <class T>
double stable_rank(const Tensor<T>& U) {
  constexpr std::string_view fn = "probe::stable_rank";
  SINKLAB_CHECK(U.defined() && (U.rank() == 2 || U.rank() == 3), fn, ": expected an update [N, D] or a batch [B, N, D], got ",
                U.defined() ? U.shape().str() : std::string("undefined"));
  detail::require_nonempty(fn, "update", U);
  const Tensor<T> c = U.rank() == 2 ? U.contiguous().view({1, U.size(0), U.size(1)}) : U.contiguous();
  const int64_t B = c.size(0), N = c.size(1), D = c.size(2);
  double sum = 0;
  for (int64_t b = 0; b < B; ++b) sum += detail::stable_rank(detail::to_eigen(c.data() + b * N * D, N, D));
  return sum / static_cast<double>(B);
}

template <class T>
std::vector<std::vector<double>> qk_singular_values(const Tensor<T>& W_Q, const Tensor<T>& W_K, int64_t heads,
                                                    int64_t kv_heads = 0) {
  constexpr std::string_view fn = "probe::qk_singular_values";
  detail::require_rank(fn, "W_Q", W_Q, 2, "[D, H*d_head] (y·W convention)");
  detail::require_rank(fn, "W_K", W_K, 2, "[D, H_kv*d_head] (y·W convention)");
  if (kv_heads == 0) kv_heads = heads;
  SINKLAB_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0, fn, ": ", heads, " query heads cannot share ",
                kv_heads, " key heads");
  const int64_t D = W_Q.size(0);
  SINKLAB_CHECK(W_Q.size(1) % heads == 0, fn, ": W_Q of shape ", W_Q.shape(), " does not split into ", heads, " heads");
  const int64_t dh = W_Q.size(1) / heads;
  SINKLAB_CHECK(W_K.size(0) == D && W_K.size(1) == kv_heads * dh, fn, ": W_K of shape ", W_K.shape(),
                " does not match W_Q ", W_Q.shape(), " (expected [", D, ", ", kv_heads * dh, "])");
  const Eigen::MatrixXd q = detail::to_eigen(W_Q.contiguous().data(), D, heads * dh);
  const Eigen::MatrixXd k = detail::to_eigen(W_K.contiguous().data(), D, kv_heads * dh);
  std::vector<std::vector<double>> out;
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t hk = h / (heads / kv_heads);
    const Eigen::MatrixXd theta = q.middleCols(h * dh, dh) * k.middleCols(hk * dh, dh).transpose();
    out.push_back(detail::singular_values(theta));
  }
  return out;
}

}  // namespace sinklab::probe
