// Muon pinned against an independent reference written out here (plain loops, double), not
// against the library's own newton_schulz5:
//   - the quintic Newton–Schulz iteration with the published coefficients
//     (a, b, c) = (3.4445, −4.7750, 2.0315) (Keller Jordan's Muon / modded-nanogpt):
//       X = G / (‖G‖_F + 1e-7), transposed when rows > cols; repeat: A = X·Xᵀ, X ← a·X + (b·A + c·A·A)·X;
//   - a Muon step: buf ← β·buf + (1−β)·g; u = (1−β)·g + β·buf (Nesterov) or buf;
//     p ← p·(1 − lr·wd) − lr·√max(1, out/in)·NS5(u), weights stored [in, out];
//   - a MuonAdamW step on a model-like parameter list: Muon for the hidden matrices, PyTorch's
//     AdamW for embeddings, the head and vectors, each computed by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/optim/muon.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

// Published coefficients, written here independently of the library's constants.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

using Mat = std::vector<double>;  // row-major

Mat matmul(const Mat& x, const Mat& y, int64_t n, int64_t k, int64_t m) {  // [n, k] · [k, m]
  Mat z(static_cast<std::size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < m; ++j) z[i * m + j] += x[i * k + l] * y[l * m + j];
  return z;
}
Mat transpose(const Mat& x, int64_t n, int64_t m) {
  Mat t(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) t[j * n + i] = x[i * m + j];
  return t;
}

Mat ns5_reference(const Mat& g, int64_t rows, int64_t cols, int steps = 5, double a = kA, double b = kB,
                  double c = kC) {
  double norm = 0;
  for (double v : g) norm += v * v;
  norm = std::sqrt(norm);
  const bool tall = rows > cols;
  const int64_t r = tall ? cols : rows, n = tall ? rows : cols;
  Mat X = tall ? transpose(g, rows, cols) : g;
  for (double& v : X) v /= norm + 1e-7;
  for (int s = 0; s < steps; ++s) {
    const Mat A = matmul(X, transpose(X, r, n), r, n, r);  // [r, r]
    const Mat AA = matmul(A, A, r, r, r);
    Mat Bm(A.size());
    for (std::size_t i = 0; i < A.size(); ++i) Bm[i] = b * A[i] + c * AA[i];
    const Mat BX = matmul(Bm, X, r, r, n);
    for (std::size_t i = 0; i < X.size(); ++i) X[i] = a * X[i] + BX[i];
  }
  return tall ? transpose(X, r, n) : X;
}

template <class T>
Mat to_mat(const Tensor<T>& t) {
  Mat m;
  for (T v : t.contiguous().to_vector()) m.push_back(static_cast<double>(v));
  return m;
}

double max_abs(const Mat& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}
double max_diff(const Mat& x, const Mat& y) {
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("newton_schulz5 = the published quintic iteration, written out here, for wide, tall and square inputs") {
  CHECK(optim::kNewtonSchulzA == kA);
  CHECK(optim::kNewtonSchulzB == kB);
  CHECK(optim::kNewtonSchulzC == kC);
  const int64_t shapes[][2] = {{6, 15}, {15, 6}, {9, 9}, {1, 7}, {32, 96}};
  uint64_t seed = 1;
  for (const auto& sh : shapes) {
    const int64_t rows = sh[0], cols = sh[1];
    const Tensor<double> G = Rng(seed++).normal<double>({rows, cols}, 0.0, 2.0);
    const Mat g = to_mat(G);
    for (int steps : {1, 2, 5}) {
      INFO("shape [", rows, ", ", cols, "], ", steps, " steps");
      const Mat want = ns5_reference(g, rows, cols, steps);
      CHECK(max_diff(to_mat(optim::newton_schulz5(G, steps)), want) <= 1e-12 * std::max(1.0, max_abs(want)));
      // float: the same iteration to float rounding.
      CHECK(max_diff(to_mat(optim::newton_schulz5(G.to<float>(), steps)), want) <= 2e-5 * std::max(1.0, max_abs(want)));
    }
    // The check can fail: other coefficients (the classic cubic 1.5, −0.5, 0, or the quintic with
    // b and c swapped in sign) give visibly different results.
    const Mat five = ns5_reference(g, rows, cols);
    if (rows > 1) {
      CHECK(max_diff(five, ns5_reference(g, rows, cols, 5, 1.5, -0.5, 0.0)) > 1e-2);
      CHECK(max_diff(five, ns5_reference(g, rows, cols, 5, kA, -kB, -kC)) > 1e-2);
    }
  }
  // One step on a matrix with orthonormal rows scaled by s (here s = 1/‖G‖_F-normalised): the
  // singular values follow p(σ) = aσ + bσ³ + cσ⁵ exactly.
  const Tensor<double> D = Tensor<double>::from({2, 3}, {3.0, 0.0, 0.0, 0.0, 4.0, 0.0});  // σ = 3, 4; ‖·‖_F = 5
  const Tensor<double> O = optim::newton_schulz5(D, 1);
  auto p = [](double s) { return kA * s + kB * s * s * s + kC * s * s * s * s * s; };
  const double s0 = 3.0 / (5.0 + 1e-7), s1 = 4.0 / (5.0 + 1e-7);
  CHECK(O(0, 0) == doctest::Approx(p(s0)).epsilon(1e-13));
  CHECK(O(1, 1) == doctest::Approx(p(s1)).epsilon(1e-13));
  CHECK(O(0, 1) == 0.0);
  CHECK(O(1, 2) == 0.0);
}

namespace {

// One Muon update of p (weights [in, out]) by hand; buf is the momentum, updated in place.
Mat muon_ref_step(const Mat& p, const Mat& g, Mat& buf, int64_t rows, int64_t cols, double lr, double beta, double wd,
                  bool nesterov) {
  Mat u(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    buf[i] = beta * buf[i] + (1 - beta) * g[i];
    u[i] = nesterov ? (1 - beta) * g[i] + beta * buf[i] : buf[i];
  }
  const Mat O = ns5_reference(u, rows, cols);
  const double scale = std::sqrt(std::max(1.0, static_cast<double>(cols) / static_cast<double>(rows)));  // √(out/in)
  Mat out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) out[i] = p[i] * (1 - lr * wd) - lr * scale * O[i];
  return out;
}

// torch.optim.AdamW, step t ≥ 1 (m, v updated in place).
Mat adamw_ref_step(const Mat& p, const Mat& g, Mat& m, Mat& v, int t, double lr, double b1, double b2, double eps,
                   double wd) {
  Mat out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
    out[i] = p[i] * (1 - lr * wd) - lr * mhat / (std::sqrt(vhat) + eps);
  }
  return out;
}

}  // namespace

TEST_CASE("Muon step = hand-computed update (Nesterov or not, wide and tall, decay, lr scale)") {
  for (bool nesterov : {true, false})
    for (int tall = 0; tall < 2; ++tall) {
      const int64_t rows = tall ? 15 : 6, cols = tall ? 6 : 15;
      INFO("nesterov ", nesterov, ", shape [", rows, ", ", cols, "]");
      Parameter<double> w("layers.0.ffn.w.weight", Rng(1).normal<double>({rows, cols}));
      optim::MuonOptions o;
      o.lr = 0.05;
      o.momentum = 0.9;
      o.nesterov = nesterov;
      o.weight_decay = 0.1;
      optim::Muon<double> opt({&w}, o);
      Mat p = to_mat(w.value), buf(p.size(), 0.0);
      for (int step = 0; step < 3; ++step) {
        const Tensor<double> g = Rng(10 + step).normal<double>({rows, cols});
        w.grad.copy_from(g);
        const double scale = step == 2 ? 0.5 : 1.0;
        opt.set_lr_scale(scale);
        opt.step();
        if (step == 0 && !tall) {
          // Mutation check: without the √(out/in) = √2.5 scale the step would differ visibly.
          Mat b2 = buf;
          Mat unscaled = muon_ref_step(p, to_mat(g), b2, rows, cols, 0.05 / std::sqrt(2.5), 0.9, 0.1 * std::sqrt(2.5),
                                       nesterov);
          CHECK(max_diff(to_mat(w.value), unscaled) > 1e-3);
        }
        p = muon_ref_step(p, to_mat(g), buf, rows, cols, 0.05 * scale, 0.9, 0.1, nesterov);
        CHECK(max_diff(to_mat(w.value), p) <= 1e-12);
        CHECK(max_diff(to_mat(opt.state("layers.0.ffn.w.weight").momentum), buf) <= 1e-14);
      }
    }
}

TEST_CASE("MuonAdamW step on a model-like parameter list = Muon (hidden matrices) + AdamW (the rest), by hand") {
  struct P {
    std::string name;
    Shape shape;
    bool muon;
  };
  const std::vector<P> spec = {
      {"embed.weight", {11, 8}, false},                 // embedding table → AdamW
      {"layers.0.attn_norm.weight", {8}, false},        // vector → AdamW
      {"layers.0.attn.qkv.weight", {8, 24}, true},      // wide matrix → Muon, scale √3
      {"layers.0.attn.o.weight", {8, 8}, true},         // square → Muon, scale 1
      {"layers.0.ffn.down.weight", {12, 8}, true},      // tall → Muon, scale 1
      {"layers.0.attn.sink_logit", {2}, false},         // score parameter → AdamW
      {"lm_head.weight", {8, 11}, false},               // head → AdamW
  };
  std::vector<Parameter<double>> ps;
  ps.reserve(spec.size());
  for (std::size_t i = 0; i < spec.size(); ++i) ps.emplace_back(spec[i].name, Rng(100 + i).normal<double>(spec[i].shape));
  std::vector<Parameter<double>*> ptrs;
  for (auto& p : ps) ptrs.push_back(&p);
  const optim::MuonOptions mo{.lr = 0.03, .momentum = 0.9, .nesterov = true, .ns_steps = 5, .weight_decay = 0.1};
  const optim::AdamWOptions ao{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.05};
  optim::MuonAdamW<double> opt(ptrs, mo, ao);
  REQUIRE(opt.muon_params().size() == 3);
  REQUIRE(opt.adamw_params().size() == 4);

  std::vector<Mat> ref, m1, m2;
  for (auto& p : ps) {
    ref.push_back(to_mat(p.value));
    m1.emplace_back(p.numel(), 0.0);
    m2.emplace_back(p.numel(), 0.0);
  }
  for (int step = 1; step <= 3; ++step) {
    const double scale = step == 3 ? 0.25 : 1.0;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const Tensor<double> g = Rng(1000 * step + i).normal<double>(spec[i].shape);
      ps[i].grad.copy_from(g);
      if (step == 1 && spec[i].muon) {  // mutation check: AdamW on a Muon matrix would land elsewhere
        Mat a(m1[i].size(), 0.0), b(m1[i].size(), 0.0);
        Mat via_adamw = adamw_ref_step(ref[i], to_mat(g), a, b, 1, ao.lr, 0.8, 0.95, 1e-6, 0.05);
        Mat c = m1[i];
        CHECK(max_diff(via_adamw, muon_ref_step(ref[i], to_mat(g), c, spec[i].shape[0], spec[i].shape[1], mo.lr, 0.9,
                                                0.1, true)) > 1e-3);
      }
      if (spec[i].muon)
        ref[i] = muon_ref_step(ref[i], to_mat(g), m1[i], spec[i].shape[0], spec[i].shape[1], mo.lr * scale, 0.9, 0.1,
                               true);
      else
        ref[i] = adamw_ref_step(ref[i], to_mat(g), m1[i], m2[i], step, ao.lr * scale, 0.8, 0.95, 1e-6, 0.05);
    }
    opt.set_lr_scale(scale);
    opt.step();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      INFO(spec[i].name, " after step ", step);
      CHECK(max_diff(to_mat(ps[i].value), ref[i]) <= 1e-12);
    }
  }
}
