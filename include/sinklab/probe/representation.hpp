// Representation-collapse measures (ExoFormer §5.3, NOP-vs-broadcast):
//
//   mean_pairwise_cosine(X)          mean over token pairs i ≠ j of cos(x_i, x_j) within each
//                                    sequence, averaged over the batch (X [B, T, D] or [T, D])
//   cosine_to_embedding(X, E)        mean over (b, t) of cos(x_bt, e_bt): a layer's hidden state
//                                    against the input embedding of the same token
//   pca_core_features(X, threshold)  number of principal components needed to explain a fraction
//                                    `threshold` (default 0.99) of the variance of the token
//                                    vectors (rows of X [N, D]; [B, T, D] is flattened to tokens)
//
// Zero vectors have no direction: they are left out of cosine averages.
#pragma once
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"

namespace sinklab::probe {

namespace detail {
template <class T>
Tensor<T> as_batch_of_tokens(std::string_view fn, const Tensor<T>& x) {
  SINKLAB_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3), fn, ": expected [B, T, D] or [T, D], got ",
                x.defined() ? x.shape().str() : std::string("undefined"));
  require_nonempty(fn, "input", x);
  return x.rank() == 2 ? x.contiguous().view({1, x.size(0), x.size(1)}) : x.contiguous();
}
}  // namespace detail

template <class T>
double mean_pairwise_cosine(const Tensor<T>& X) {
  constexpr std::string_view fn = "probe::mean_pairwise_cosine";
  const Tensor<T> c = detail::as_batch_of_tokens(fn, X);
  const int64_t B = c.size(0), Tn = c.size(1), D = c.size(2);
  std::vector<double> sum(static_cast<std::size_t>(D));
  double total = 0;
  int64_t sequences = 0;
  for (int64_t b = 0; b < B; ++b) {
    // Σ_{i≠j} cos(x_i, x_j) = ‖Σ_i u_i‖² − n for unit vectors u_i.
    std::fill(sum.begin(), sum.end(), 0.0);
    int64_t n = 0;
    for (int64_t t = 0; t < Tn; ++t) {
      const T* x = c.data() + (b * Tn + t) * D;
      const double norm = detail::norm2(x, D);
      if (norm == 0) continue;
      ++n;
      for (int64_t d = 0; d < D; ++d) sum[d] += static_cast<double>(x[d]) / norm;
    }
    if (n < 2) continue;
    double s2 = 0;
    for (double v : sum) s2 += v * v;
    total += (s2 - static_cast<double>(n)) / static_cast<double>(n * (n - 1));
    ++sequences;
  }
  SINKLAB_CHECK(sequences > 0, fn, ": no sequence of ", X.shape(), " has two nonzero token vectors");
  return total / static_cast<double>(sequences);
}

template <class T>
double cosine_to_embedding(const Tensor<T>& X, const Tensor<T>& E) {
  constexpr std::string_view fn = "probe::cosine_to_embedding";
  SINKLAB_CHECK(X.defined() && E.defined() && X.shape() == E.shape(), fn, ": hidden states ",
                X.defined() ? X.shape().str() : std::string("undefined"), " and embeddings ",
                E.defined() ? E.shape().str() : std::string("undefined"), " must have the same shape");
  const Tensor<T> x = detail::as_batch_of_tokens(fn, X), e = detail::as_batch_of_tokens(fn, E);
  const int64_t rows = x.size(0) * x.size(1), D = x.size(2);
  double total = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* a = x.data() + r * D;
    const T* b = e.data() + r * D;
    const double na = detail::norm2(a, D), nb = detail::norm2(b, D);
    if (na == 0 || nb == 0) continue;
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(a[d]) * static_cast<double>(b[d]);
    total += dot / (na * nb);
    ++n;
  }
  SINKLAB_CHECK(n > 0, fn, ": every token of ", X.shape(), " has a zero hidden state or embedding");
  return total / static_cast<double>(n);
}

struct PcaCoreFeatures {
  int64_t components = 0;  // smallest k whose leading k components explain ≥ threshold of the variance
  double threshold = 0;    // the variance fraction asked for
  std::vector<double> explained_variance_ratio;  // per component, largest first
};

template <class T>
PcaCoreFeatures pca_core_features(const Tensor<T>& X, double threshold = 0.99) {
  constexpr std::string_view fn = "probe::pca_core_features";
  SINKLAB_CHECK(threshold > 0 && threshold <= 1, fn, ": variance threshold must be in (0, 1], got ", threshold);
  const Tensor<T> c = detail::as_batch_of_tokens(fn, X);
  const int64_t N = c.size(0) * c.size(1), D = c.size(2);
  SINKLAB_CHECK(N >= 2, fn, ": need at least two token vectors, got ", X.shape());
  Eigen::MatrixXd m(N, D);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t d = 0; d < D; ++d) m(r, d) = static_cast<double>(c.data()[r * D + d]);
  m.rowwise() -= m.colwise().mean();
  const Eigen::MatrixXd cov = (m.transpose() * m) / static_cast<double>(N - 1);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov, Eigen::EigenvaluesOnly);
  SINKLAB_CHECK(eig.info() == Eigen::Success, fn, ": eigen decomposition failed for input ", X.shape());
  std::vector<double> ev(eig.eigenvalues().data(), eig.eigenvalues().data() + D);
  for (double& v : ev) v = std::max(v, 0.0);  // round-off can leave tiny negatives
  std::sort(ev.rbegin(), ev.rend());
  double total = 0;
  for (double v : ev) total += v;
  PcaCoreFeatures out;
  out.threshold = threshold;
  if (total == 0) return out;  // constant data: no variance to explain
  double cum = 0;
  for (double v : ev) {
    out.explained_variance_ratio.push_back(v / total);
    if (out.components == 0) {
      cum += v;
      // The relative slack keeps threshold = 1 reachable despite summation round-off.
      if (cum >= threshold * total * (1 - 1e-12)) out.components = static_cast<int64_t>(out.explained_variance_ratio.size());
    }
  }
  return out;
}

}  // namespace sinklab::probe
