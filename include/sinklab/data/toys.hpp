// The two synthetic tasks of "NOP vs broadcast sinks" (docs/papers.md), as fresh Gaussian batches.
//
// NOP toy: x_i ~ N(0, I_d); flag m_i = 1[<x_i, v> > λ] for a fixed unit vector v, with
// λ = Φ⁻¹(1 − p) so that P[m_i = 1] = p; the attention update should be
// ΔY_i = (1 − m_i) x_i + m_i γ x_i. Option `null_token` (calibration note (a)): token 0 becomes
// a dedicated null token, x_0 = 0, never flagged, target 0 and loss weight 0.
//
// Broadcast toy: x_i ~ N(0, I_d); j* = argmax_j <x_j, u> for a fixed unit vector u;
// y_i = x_i + α R x_{j*} for a fixed random orthogonal R (Haar: QR of a Gaussian matrix with
// the signs of R's diagonal folded into Q).
//
// The fixed directions and R come from the config's seed; batches come from the Rng passed
// to sample(), so (config seed, data seed) fixes everything.
#pragma once
// GCC 12 reports false -Wmaybe-uninitialized inside Eigen's AVX-512 QR/GEMM kernels that this
// header instantiates; the pragma covers this header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <optional>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::data {

// Φ⁻¹(q) for the standard normal, by bisection on erfc to full double precision (q in (0, 1)).
inline double normal_quantile(double q) {
  SINKLAB_CHECK(q > 0.0 && q < 1.0, "data::normal_quantile: probability ", q, " is outside (0, 1)");
  // Compare in the tail where the value is small, so tiny tails keep their precision.
  const bool upper = q > 0.5;
  const double target = upper ? 1.0 - q : q;
  double lo = upper ? 0.0 : -40.0, hi = upper ? 40.0 : 0.0;
  for (int it = 0; it < 200 && hi - lo > 0; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    // lower tail Φ(mid) rises with mid; upper tail 1 − Φ(mid) falls with mid.
    const double tail = upper ? 0.5 * std::erfc(mid / std::sqrt(2.0)) : 0.5 * std::erfc(-mid / std::sqrt(2.0));
    const bool go_right = upper ? tail > target : tail < target;
    (go_right ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

namespace detail {
inline Tensor<float> random_unit_vector(int64_t d, Rng rng) {
  Tensor<double> g = rng.normal<double>({d});
  double n2 = 0;
  for (int64_t i = 0; i < d; ++i) n2 += g(i) * g(i);
  const double inv = 1.0 / std::sqrt(n2);
  Tensor<float> v = Tensor<float>::empty({d});
  for (int64_t i = 0; i < d; ++i) v(i) = static_cast<float>(g(i) * inv);
  return v;
}
inline double dot(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; ++k) s += double(a[k]) * double(b[k]);
  return s;
}
}  // namespace detail

struct NopToyConfig {
  int64_t d = 64;
  int64_t seq_len = 32;           // L
  double p = 0.5;                 // P[m_i = 1]; λ = Φ⁻¹(1 − p)
  std::optional<double> lambda = std::nullopt;  // overrides p when set (e.g. λ = 10: a "never NOP" baseline)
  double gamma = 0.0;             // damping of flagged tokens
  bool null_token = false;        // token 0 is x_0 = 0, outside the loss
  uint64_t seed = 0;              // fixes v
};

struct NopBatch {
  Tensor<float> x;            // [B, L, d]
  Tensor<float> mask;         // [B, L], m_i in {0, 1}
  Tensor<float> target;       // [B, L, d], ΔY
  Tensor<float> loss_weight;  // [B, L], 0 at a null token, else 1
};

class NopToy {
 public:
  explicit NopToy(NopToyConfig cfg) : cfg_(cfg) {
    SINKLAB_CHECK(cfg.d >= 1 && cfg.seq_len >= 1, "NopToy: d and seq_len must be >= 1, got d = ", cfg.d,
                  ", seq_len = ", cfg.seq_len);
    if (!cfg.lambda)
      SINKLAB_CHECK(cfg.p > 0.0 && cfg.p < 1.0, "NopToy: p must be in (0, 1), got ", cfg.p,
                    " (set lambda directly for an always/never-flag threshold)");
    lambda_ = cfg.lambda ? *cfg.lambda : normal_quantile(1.0 - cfg.p);
    v_ = detail::random_unit_vector(cfg.d, Rng(cfg.seed).fork(0x0F1A6));
  }

  const NopToyConfig& config() const { return cfg_; }
  double threshold() const { return lambda_; }
  const Tensor<float>& flag_direction() const { return v_; }

  NopBatch sample(Rng& rng, int64_t batch) const {
    SINKLAB_CHECK(batch >= 1, "NopToy::sample: batch must be >= 1, got ", batch);
    const int64_t L = cfg_.seq_len, d = cfg_.d;
    NopBatch b;
    b.x = rng.normal<float>({batch, L, d});
    b.mask = Tensor<float>::zeros({batch, L});
    b.target = Tensor<float>::empty({batch, L, d});
    b.loss_weight = Tensor<float>::ones({batch, L});
    const float gamma = static_cast<float>(cfg_.gamma);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t i = 0; i < L; ++i) {
        float* xi = b.x.data() + (r * L + i) * d;
        float* ti = b.target.data() + (r * L + i) * d;
        if (cfg_.null_token && i == 0) {
          std::fill(xi, xi + d, 0.f);
          std::fill(ti, ti + d, 0.f);
          b.loss_weight(r, i) = 0.f;
          continue;
        }
        const bool flagged = detail::dot(xi, v_.data(), d) > lambda_;
        b.mask(r, i) = flagged ? 1.f : 0.f;
        const float scale = flagged ? gamma : 1.f;
        for (int64_t k = 0; k < d; ++k) ti[k] = scale * xi[k];
      }
    }
    return b;
  }

 private:
  NopToyConfig cfg_;
  double lambda_ = 0;
  Tensor<float> v_;
};

struct BroadcastToyConfig {
  int64_t d = 64;
  int64_t seq_len = 32;  // L
  double alpha = 1.0;    // broadcast strength
  uint64_t seed = 0;     // fixes u and R
};

struct BroadcastBatch {
  Tensor<float> x;          // [B, L, d]
  Tensor<float> y;          // [B, L, d]
  Tensor<int32_t> source;   // [B], j*
};

class BroadcastToy {
 public:
  explicit BroadcastToy(BroadcastToyConfig cfg) : cfg_(cfg) {
    SINKLAB_CHECK(cfg.d >= 1 && cfg.seq_len >= 1, "BroadcastToy: d and seq_len must be >= 1, got d = ", cfg.d,
                  ", seq_len = ", cfg.seq_len);
    const Rng base(cfg.seed);
    u_ = detail::random_unit_vector(cfg.d, base.fork(0xB0A5));
    const int64_t d = cfg.d;
    Tensor<double> g = base.fork(0x2077).normal<double>({d, d});
    Eigen::MatrixXd a(d, d);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) a(i, j) = g(i, j);
    Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
    Eigen::MatrixXd q = qr.householderQ();
    const Eigen::MatrixXd r = qr.matrixQR();
    for (int64_t j = 0; j < d; ++j)
      if (r(j, j) < 0) q.col(j) *= -1.0;
    rotation_ = Tensor<float>::empty({d, d});
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) rotation_(i, j) = static_cast<float>(q(i, j));
  }

  const BroadcastToyConfig& config() const { return cfg_; }
  const Tensor<float>& selector() const { return u_; }
  const Tensor<float>& rotation() const { return rotation_; }  // R, [d, d], row-major

  BroadcastBatch sample(Rng& rng, int64_t batch) const {
    SINKLAB_CHECK(batch >= 1, "BroadcastToy::sample: batch must be >= 1, got ", batch);
    const int64_t L = cfg_.seq_len, d = cfg_.d;
    BroadcastBatch b;
    b.x = rng.normal<float>({batch, L, d});
    b.y = b.x.clone();
    b.source = Tensor<int32_t>::empty({batch});
    std::vector<double> payload(static_cast<std::size_t>(d));
    for (int64_t r = 0; r < batch; ++r) {
      const float* xr = b.x.data() + r * L * d;
      int64_t best = 0;
      double best_score = detail::dot(xr, u_.data(), d);
      for (int64_t j = 1; j < L; ++j) {
        const double s = detail::dot(xr + j * d, u_.data(), d);
        if (s > best_score) best_score = s, best = j;
      }
      b.source(r) = static_cast<int32_t>(best);
      const float* src = xr + best * d;
      for (int64_t k = 0; k < d; ++k) payload[k] = cfg_.alpha * detail::dot(rotation_.data() + k * d, src, d);
      float* yr = b.y.data() + r * L * d;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t k = 0; k < d; ++k) yr[i * d + k] = static_cast<float>(double(yr[i * d + k]) + payload[k]);
    }
    return b;
  }

 private:
  BroadcastToyConfig cfg_;
  Tensor<float> u_, rotation_;
};

}  // namespace sinklab::data

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
