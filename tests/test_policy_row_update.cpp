// The score families' row updates (policy/row_update.hpp), apart from any kernel: a row of
// logits fed in blocks of any size gives each family's formula (softmax with and without a sink,
// clipped softmax, point-wise scores), the row gradient is the derivative of that formula
// (central differences, double), and the CPU kernels' two Blocks — a row of floats on whole
// vectors, rows across SIMD lanes — give what the scalar protocol gives.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/kernels/cpu/attention_blocks.hpp"
#include "sinklab/policy/row_update.hpp"

using namespace sinklab;

namespace {

constexpr int64_t kKeys = 23, kVisible = 17;

double logit(int64_t j) { return 2.0 * std::sin(0.7 * static_cast<double>(j) + 0.3); }
double value(int64_t j) { return std::cos(0.4 * static_cast<double>(j)); }

// The scalar Block of a test: keys [j0, j0 + n) of the row, `visible` of them at most.
struct SpanBlock {
  double* s;
  int64_t n;
  double max() const {
    double m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
    return m;
  }
  template <class F>
  void map(F&& f) {
    for (int64_t j = 0; j < n; ++j) s[j] = f(s[j]);
  }
  template <class F>
  double map_sum(F&& f) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = f(s[j]));
    return sum;
  }
};

struct RowResult {
  double out = 0, lse = 0;
};

// o = Σ_j a_j v_j over the visible keys by the row-update protocol, blocks of `block` keys.
template <class Score>
RowResult run_protocol(const Score& sc, const typename Score::template Args<double>& args,
                       const std::vector<double>& s0, int64_t block) {
  using U = score::row_update_t<Score, double>;
  U u(sc, args, 0, kVisible, kKeys);
  double o = 0;
  std::vector<double> s(s0.size());
  for (int pass = 0; pass < U::passes; ++pass) {
    for (int64_t j0 = 0; j0 < kVisible; j0 += block) {
      const int64_t n = std::min(block, kVisible - j0);
      for (int64_t j = 0; j < n; ++j) s[j0 + j] = s0[j0 + j];
      SpanBlock b{s.data() + j0, n};
      const double alpha = u.block(sc, pass, b);
      if (U::accumulates(pass)) {
        o *= alpha;
        for (int64_t j = 0; j < n; ++j) o += s[j0 + j] * value(j0 + j);
      }
    }
    u.end_pass(pass);
  }
  RowResult r{o * u.out_scale(), 0};
  if constexpr (U::saves_lse) r.lse = u.lse();
  return r;
}

// The weights by each paper's formula, written out here.
template <class Score>
std::vector<double> direct_weights(const Score& sc, const std::vector<double>& s, double sink_logit = -INFINITY) {
  std::vector<double> a(kVisible);
  if constexpr (Score::family == score::Family::Normalised) {
    double z = std::exp(sink_logit);
    for (int64_t j = 0; j < kVisible; ++j) z += std::exp(s[j]);
    for (int64_t j = 0; j < kVisible; ++j) {
      const double p = std::exp(s[j]) / z;
      if constexpr (Score::clipped)
        a[j] = std::clamp((sc.zeta - sc.gamma) * p + sc.gamma, 0.0, 1.0);
      else
        a[j] = p;
    }
  } else {
    const score::RowConstants rc = sc.row(kVisible, kKeys);
    for (int64_t j = 0; j < kVisible; ++j) a[j] = sc.weight(s[j], rc.scale, rc.bias);
  }
  return a;
}

template <class Score>
void check_family(const Score& sc, const typename Score::template Args<double>& args, double sink_logit = -INFINITY) {
  std::vector<double> s(kKeys);
  for (int64_t j = 0; j < kKeys; ++j) s[j] = logit(j);
  const std::vector<double> a = direct_weights(sc, s, sink_logit);
  double o = 0;
  for (int64_t j = 0; j < kVisible; ++j) o += a[j] * value(j);
  for (int64_t block : {int64_t{1}, int64_t{4}, int64_t{7}, int64_t{16}, kVisible}) {
    CAPTURE(block);
    const RowResult r = run_protocol(sc, args, s, block);
    CHECK(r.out == doctest::Approx(o).epsilon(1e-12));
    if constexpr (score::saves_lse_v<Score>) {
      double z = std::exp(sink_logit);
      for (int64_t j = 0; j < kVisible; ++j) z += std::exp(s[j]);
      CHECK(r.lse == doctest::Approx(std::log(z)).epsilon(1e-12));
    }
  }

  // The row gradient: L = Σ_j a_j(s) dA_j, ∂L/∂s_j = dscore(pre(s_j), dA_j), with D where it needs one.
  using G = score::row_grad_t<Score, double>;
  std::vector<double> dA(kVisible);
  for (int64_t j = 0; j < kVisible; ++j) dA[j] = 0.5 - value(2 * j + 1);
  double lse = 0;
  if constexpr (score::saves_lse_v<Score>) lse = run_protocol(sc, args, s, kVisible).lse;
  const G g0(sc, kVisible, kKeys, lse, 0.0);
  double D = 0, out_dot = 0;
  for (int64_t j = 0; j < kVisible; ++j) {
    D += g0.delta_term(sc, g0.pre(s[j]), dA[j]);
    out_dot += a[j] * dA[j];
  }
  if constexpr (G::delta == score::Delta::FromOutput) CHECK(D == doctest::Approx(out_dot).epsilon(1e-12));
  const G g(sc, kVisible, kKeys, lse, D);
  auto loss = [&](const std::vector<double>& x) {
    const std::vector<double> w = direct_weights(sc, x, sink_logit);
    double l = 0;
    for (int64_t j = 0; j < kVisible; ++j) l += w[j] * dA[j];
    return l;
  };
  for (int64_t j = 0; j < kVisible; ++j) {
    CAPTURE(j);
    CHECK(g.weight(sc, g.pre(s[j])) == doctest::Approx(a[j]).epsilon(1e-12));
    std::vector<double> xp = s, xm = s;
    const double h = 1e-6;
    xp[j] += h, xm[j] -= h;
    const double fd = (loss(xp) - loss(xm)) / (2 * h);
    CHECK(g.dscore(sc, g.pre(s[j]), dA[j]) == doctest::Approx(fd).epsilon(1e-6).scale(1.0));
  }
}

}  // namespace

TEST_CASE("every score family's row update gives its formula, in blocks of any size, and its gradient") {
  SUBCASE("softmax") { check_family(score::Softmax{}, {}); }
  SUBCASE("softmax with a learnable sink") {
    const double sink = 0.7;
    check_family(score::SoftmaxSink{}, score::SoftmaxSink::Args<double>{&sink}, sink);
  }
  SUBCASE("clipped softmax (some weights clipped to 0)") {
    const score::ClippedSoftmax c{1.0, -0.05};
    check_family(c, {});
  }
  SUBCASE("sigmoid") { check_family(score::Sigmoid{}, {}); }
  SUBCASE("relu / n") { check_family(score::ReLU{}, {}); }
  SUBCASE("polynomial") { check_family(score::Polynomial{}, {}); }
}

TEST_CASE("the CPU kernels' Blocks: whole vectors and rows in lanes give the scalar protocol's weights") {
  using T = float;
  using V = xsimd::batch<T>;
  constexpr int64_t W = V::size;
  const score::Softmax sc;
  // A row of 13 visible keys of a 16-key block, on whole vectors: max() pads the masked ones.
  const int64_t cols = 16, ne = 13;
  std::vector<T> row(static_cast<std::size_t>(kernels::cpu::detail::round_up(cols, W)), T(99));
  for (int64_t j = 0; j < ne; ++j) row[j] = static_cast<T>(logit(j));
  kernels::cpu::detail::RowBlock<T> rb(row.data(), ne, cols, true);
  score::row_update_t<score::Softmax, T> u(sc, policy::NoArgs{}, 0, ne, cols);
  u.block(sc, 0, rb);
  double z = 0;
  for (int64_t j = 0; j < ne; ++j) z += std::exp(logit(j));
  for (int64_t j = 0; j < cols; ++j) {
    CAPTURE(j);
    // weights e^{s − m}, m the row's max; masked keys 0
    const double want = j < ne ? std::exp(static_cast<double>(static_cast<T>(logit(j))) - static_cast<double>(u.row.m)) : 0.0;
    CHECK(static_cast<double>(row[j]) == doctest::Approx(want).epsilon(1e-5));
  }
  CHECK(static_cast<double>(u.lse()) == doctest::Approx(std::log(z)).epsilon(1e-6));

  // W rows across lanes, lane r seeing the first 3 + r keys of W + 3 (every lane has a masked key,
  // whatever the vector width): lse per lane as the scalar one.
  const int64_t keys = W + 3;
  std::vector<T> st(static_cast<std::size_t>(keys * W));
  alignas(64) T end[W];
  for (int64_t r = 0; r < W; ++r) {
    end[r] = static_cast<T>(3 + r);
    for (int64_t j = 0; j < keys; ++j) st[j * W + r] = static_cast<T>(logit(j + r));
  }
  kernels::cpu::detail::LaneBlock<T> lb{st.data(), W, keys, 0, V::load_aligned(end), true};
  score::row_update_t<score::Softmax, V> lanes(sc, policy::NoArgs{}, 0, 0, keys);
  alignas(64) T lse[W];
  lanes.block(sc, 0, lb);
  lanes.lse().store_aligned(lse);
  for (int64_t r = 0; r < W; ++r) {
    CAPTURE(r);
    double zr = 0;
    for (int64_t j = 0; j < 3 + r; ++j) zr += std::exp(static_cast<double>(static_cast<T>(logit(j + r))));
    CHECK(static_cast<double>(lse[r]) == doctest::Approx(std::log(zr)).epsilon(1e-6));
    for (int64_t j = 3 + r; j < keys; ++j) CHECK(st[j * W + r] == T(0));  // masked keys weigh 0
  }
}
