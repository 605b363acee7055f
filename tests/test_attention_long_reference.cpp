// The fp32 fused attention kernel against a double reference written out here from each score
// family's formula (not the library's materialised path), for every family (softmax, learnable
// sink, clipped softmax, sigmoid, ReLU/n, n^-α·{ReLU², GELU, softplus, identity}, polynomial):
//   - T = S = 2048, d_head = 16 (the transposed / blocked kernels), default 32 × 128 blocks
//     (16 key blocks), causal, GQA, padding;
//   - 256 queries over 2048 keys, d_head = 12 (the plain-GEMM kernels), odd 45 × 77 blocks,
//     bidirectional and causal aligned at the end;
//   - output VALUES at logits of size ~1e4 (spread, and crowded near the row maximum), on
//     inputs chosen so that every logit is exact in float (small integers, scale 1/4): the online
//     normaliser and the point-wise maps must then agree with the double reference to float
//     rounding, not just stay finite.
//
// Error measure: |out − ref| ≤ tol · Σ_j e_ij·|v_jc| per output element, e_ij the scale of the
// float error of a_ij (|a_ij|; (ζ − γ)·p_ij for the clipped softmax), so a score formula that is
// wrong by any visible amount fails while float accumulation over 2048 keys passes.
// GCC 12 reports its own AVX-512 intrinsics inside xsimd's double exp as -Wuninitialized (a
// false positive, as optim/adamw.hpp notes for sqrt); double models and kernels reach it here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"

using namespace sinklab;
using namespace sinklab::kernels::cpu;

namespace {

// Weights a_ij of one query row, and the scale of their float error (|a| for most families;
// (ζ − γ)·p for the clipped softmax, whose stretch amplifies the error of p near the clip):
// s holds the e visible scaled logits, keys is the batch entry's key count, h the query head.
using WeightFn = std::function<void(const std::vector<double>& s, int64_t e, int64_t keys, int64_t h,
                                    std::vector<double>& a, std::vector<double>& err_scale)>;

struct Problem {
  Tensor<double> q, k, v;  // q [B, H, T, d]; k, v [B, Hkv, S, d]
  std::vector<int64_t> kv_len;
  double scale = 0;  // 0: 1/√d
};

struct Ref {
  Tensor<double> out, mass;  // [B, H, T, d]: Σ_j a_ij v_jc and Σ_j err_scale_ij·|v_jc|
};

// Every family's reference at once (the logits of a row are computed once and shared).
std::vector<Ref> reference(const Problem& p, bool causal, const std::vector<WeightFn>& families) {
  const int64_t B = p.q.size(0), H = p.q.size(1), T = p.q.size(2), d = p.q.size(3), Hkv = p.k.size(1),
                S = p.k.size(2);
  const double scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<Ref> r;
  for (std::size_t f = 0; f < families.size(); ++f)
    r.push_back({Tensor<double>::zeros(p.q.shape()), Tensor<double>::zeros(p.q.shape())});
  std::vector<double> s, a, sc;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv);
      const double* K = p.k.data() + (b * Hkv + hk) * S * d;
      const double* V = p.v.data() + (b * Hkv + hk) * S * d;
      const int64_t keys = p.kv_len[b];
      for (int64_t i = 0; i < T; ++i) {
        // Causal: query i sees keys j ≤ i + (S − T) (aligned at the end); both masks stop at keys.
        const int64_t e = causal ? std::min(i + (S - T) + 1, keys) : keys;
        if (e <= 0) continue;
        const double* qi = p.q.data() + ((b * H + h) * T + i) * d;
        s.assign(e, 0.0);
        for (int64_t j = 0; j < e; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * K[j * d + c];
          s[j] = dot * scale;
        }
        for (std::size_t f = 0; f < families.size(); ++f) {
          a.assign(e, 0.0);
          sc.assign(e, 0.0);
          families[f](s, e, keys, h, a, sc);
          double* o = r[f].out.data() + ((b * H + h) * T + i) * d;
          double* m = r[f].mass.data() + ((b * H + h) * T + i) * d;
          for (int64_t j = 0; j < e; ++j)
            for (int64_t c = 0; c < d; ++c) {
              o[c] += a[j] * V[j * d + c];
              m[c] += sc[j] * std::abs(V[j * d + c]);
            }
        }
      }
    }
  return r;
}

// ---- each family's formula, in double ----
double stable_softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// p = softmax with an optional sink logit per head (empty: none); a = clip((ζ − γ)p + γ, 0, 1)
// when clipped, else p.
WeightFn softmax_family(std::vector<double> sink, bool clipped = false, double zeta = 1, double gamma = 0) {
  return [=](const std::vector<double>& s, int64_t e, int64_t, int64_t h, std::vector<double>& a,
             std::vector<double>& sc) {
    const double sk = sink.empty() ? -INFINITY : sink[h];
    double m = sk;
    for (int64_t j = 0; j < e; ++j) m = std::max(m, s[j]);
    double z = std::isfinite(sk) ? std::exp(sk - m) : 0.0;
    for (int64_t j = 0; j < e; ++j) z += std::exp(s[j] - m);
    for (int64_t j = 0; j < e; ++j) {
      const double p = std::exp(s[j] - m) / z;
      a[j] = clipped ? std::clamp((zeta - gamma) * p + gamma, 0.0, 1.0) : p;
      sc[j] = clipped ? (zeta - gamma) * p : p;
    }
  };
}
// a = n^-α · h(s + bias) with n the visible keys; bias_log_keys: bias = −log(keys) (sigmoid's default).
template <class Hf>
WeightFn pointwise(Hf hf, double alpha, double bias = 0, bool bias_log_keys = false) {
  return [=](const std::vector<double>& s, int64_t e, int64_t keys, int64_t, std::vector<double>& a,
             std::vector<double>& sc) {
    const double c = std::pow(static_cast<double>(e), -alpha);
    const double b = bias_log_keys ? -std::log(static_cast<double>(keys)) : bias;
    for (int64_t j = 0; j < e; ++j) {
      a[j] = c * hf(s[j] + b);
      sc[j] = std::abs(a[j]);
    }
  };
}

// One score family: its name, its reference and the fused kernel in fp32.
struct Family {
  std::string name;
  WeightFn ref;
  std::function<Tensor<float>(const Problem&, bool causal, const AttentionOptions&)> fused;
  bool clipped = false;
};

template <class Score>
Family family(std::string name, Score score, WeightFn ref, std::vector<double> sink = {}) {
  Family f{std::move(name), std::move(ref), {}, Score::clipped};
  f.fused = [score, sink](const Problem& pd, bool causal, const AttentionOptions& opt_in) {
    const int64_t H = pd.q.size(1);
    auto params = score.template make_params<float>(H);
    if constexpr (Score::has_sink)
      for (int64_t h = 0; h < H; ++h) params.sink_logit(h) = static_cast<float>(sink[h]);
    AttentionOptions opt = opt_in;
    opt.scale = pd.scale;
    opt.kv_lengths = Tensor<int64_t>::from({static_cast<int64_t>(pd.kv_len.size())}, pd.kv_len);
    const Tensor<float> q = pd.q.to<float>(), k = pd.k.to<float>(), v = pd.v.to<float>();
    return causal ? attention_fused_forward(score, mask::Causal{}, q, k, v, params, opt).out
                  : attention_fused_forward(score, mask::Bidirectional{}, q, k, v, params, opt).out;
  };
  return f;
}

std::vector<Family> all_families(const std::vector<double>& sink, int64_t S) {
  auto relu = [](double x) { return std::max(x, 0.0); };
  const score::ClippedSoftmax clip = score::ClippedSoftmax::for_length(S);  // ζ = 1, γ = −12/S
  return {
      family("softmax", score::Softmax{}, softmax_family({})),
      family("softmax + sink", score::SoftmaxSink{}, softmax_family(sink), sink),
      family("clipped softmax (1, -12/S)", clip, softmax_family({}, true, 1.0, -12.0 / static_cast<double>(S))),
      family("clipped softmax (1.2, -0.3)", score::ClippedSoftmax{1.2, -0.3}, softmax_family({}, true, 1.2, -0.3)),
      family("sigmoid, b = -log n", score::Sigmoid{}, pointwise(sigmoid, 0.0, 0.0, true)),
      family("sigmoid, b = -2", score::Sigmoid::with_bias(-2.0), pointwise(sigmoid, 0.0, -2.0)),
      family("relu / n", score::ReLU{}, pointwise(relu, 1.0)),
      family("n^-1.5 relu^2", score::Pointwise<score::fn::ReLU2>{{}, 1.5},
             pointwise([relu](double x) { return relu(x) * relu(x); }, 1.5)),
      family("n^-0.5 gelu", score::Pointwise<score::fn::GELU>{{}, 0.5},
             pointwise([](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, 0.5)),
      family("n^-1 softplus", score::Pointwise<score::fn::Softplus>{}, pointwise(stable_softplus, 1.0)),
      family("n^-1 identity", score::Pointwise<score::fn::Identity>{}, pointwise([](double x) { return x; }, 1.0)),
      family("polynomial p = 3 (s^3 / sqrt n)", score::Polynomial{}, pointwise([](double x) { return x * x * x; }, 0.5)),
      family("polynomial p = 2", score::Polynomial{{}, 2}, pointwise([](double x) { return x * x; }, 0.5)),
  };
}

// Runs every score family on one problem: |fused − reference| ≤ tol · mass per element
// (clip_tol for the clipped softmax).
void check_all_scores(const Problem& p, bool causal, const AttentionOptions& opt, const std::vector<double>& sink,
                      double tol, double clip_tol) {
  const std::vector<Family> fams = all_families(sink, p.k.size(2));
  std::vector<WeightFn> refs;
  for (const Family& f : fams) refs.push_back(f.ref);
  const std::vector<Ref> r = reference(p, causal, refs);
  for (std::size_t fi = 0; fi < fams.size(); ++fi) {
    const Family& fam = fams[fi];
    INFO(fam.name, std::string(causal ? " causal" : " bidirectional"), " T = ", p.q.size(2), " S = ", p.k.size(2),
         " d = ", p.q.size(3), " block_q = ", opt.block_q, " block_k = ", opt.block_k);
    const Tensor<float> out = fam.fused(p, causal, opt);
    const double t = fam.clipped ? clip_tol : tol;
    double worst = 0, max_out = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double got = static_cast<double>(out.data()[i]), want = r[fi].out.data()[i], m = r[fi].mass.data()[i];
      const double err = std::isfinite(got) ? std::abs(got - want) : INFINITY;
      if (m > 0) worst = std::max(worst, err / m);
      max_out = std::max(max_out, std::abs(want));
      if (!(err <= t * m + 1e-30)) ++bad;
    }
    INFO("worst |out - ref| / mass = ", worst, ", max |ref| = ", max_out);
    CHECK(bad == 0);
    if (!fam.clipped) CHECK(max_out > 1e-3);  // not trivially zero (a clipped row may be all 0)
  }
}

}  // namespace

TEST_CASE("fp32 fused attention = double reference at T = 2048 for every score family (GQA, padding)") {
  Rng rng(2048);
  // 2 query heads sharing 1 kv head; 1931 valid keys of 2048 (padding at the end).
  SUBCASE("causal, T = S = 2048, d = 16 (the transposed / blocked kernels), default 32 x 128 blocks") {
    Problem p;
    p.q = rng.normal<double>({1, 2, 2048, 16}, 0.0, 1.5);
    p.k = rng.normal<double>({1, 1, 2048, 16}, 0.0, 1.5);
    p.v = rng.normal<double>({1, 1, 2048, 16});
    p.kv_len = {1931};
    check_all_scores(p, true, AttentionOptions{}, {0.7, 4.0}, 2e-5, 2e-5);
  }
  SUBCASE("T = 256 queries over S = 2048 keys, d = 12 (the plain-GEMM kernels), odd 45 x 77 blocks") {
    Problem p;
    p.q = rng.normal<double>({1, 2, 256, 12}, 0.0, 1.5);
    p.k = rng.normal<double>({1, 1, 2048, 12}, 0.0, 1.5);
    p.v = rng.normal<double>({1, 1, 2048, 12});
    p.kv_len = {1931};
    AttentionOptions odd;
    odd.block_q = 45;
    odd.block_k = 77;
    check_all_scores(p, false, odd, {0.7, 4.0}, 2e-5, 2e-5);
    check_all_scores(p, true, odd, {0.7, 4.0}, 2e-5, 2e-5);  // causal aligned at the end: i sees j ≤ i + S − T
  }
}

// The clipped softmax recomputes p = exp(s − lse) with lse = m + log l rounded to float; at
// |s| ≈ 1e4 that rounding (half an ulp of 1e4 = 2^-11 ≈ 4.9e-4) is a relative error of p, and the
// stretch (ζ − γ)p + γ passes it on. The other softmax forms use exp(s − m)/l and stay at float
// rounding. So the clipped family gets 2e-3 here (still far below any formula error), the rest 2e-5.
TEST_CASE("fp32 fused attention VALUES at logits near ±1e4 (exact in float) = double reference") {
  // Small integers: q·k is exact in float, and so are the scales 1/4 (d = 16) and 0.25 (given, d = 12).
  Rng rng(7);
  auto ints = [&](Tensor<double>& t, int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<double>(rng.randint(lo, hi + 1));
  };
  AttentionOptions odd;
  odd.block_q = 64;
  odd.block_k = 96;
  SUBCASE("spread logits: integer entries in [-100, 100], |s| up to ~1e4") {
    for (int64_t d : {16, 12}) {
      const bool causal = d == 16;
      const int64_t T = causal ? 1024 : 128, S = 1024;
      Problem p;
      p.q = Tensor<double>::empty({1, 2, T, d});
      p.k = Tensor<double>::empty({1, 1, S, d});
      ints(p.q, -100, 100);
      ints(p.k, -100, 100);
      p.v = rng.normal<double>({1, 1, S, d});
      p.kv_len = {S};
      p.scale = 0.25;
      double smax = 0;
      for (int64_t i = 0; i < 32; ++i)
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += p.q(0, 0, i, c) * p.k(0, 0, j, c);
          smax = std::max(smax, std::abs(dot * 0.25));
        }
      CHECK(smax > 8e3);
      check_all_scores(p, causal, causal ? AttentionOptions{} : odd, {5e3, -3.0}, 2e-5, 2e-3);
    }
  }
  SUBCASE("crowded logits: s = ±(10000 + small integer), many keys at the row maximum") {
    // k_j = (10000 + κ_j, κ'_j, 0, ...), q_i = ±4·(1, a_i, 0, ...), scale 1/4: s_ij = ±(10000 + κ_j + a_i·κ'_j).
    for (int64_t d : {16, 12}) {
      const bool causal = d == 16;
      const int64_t T = causal ? 1024 : 128, S = 1024;
      Problem p;
      p.q = Tensor<double>::zeros({1, 2, T, d});
      p.k = Tensor<double>::zeros({1, 1, S, d});
      for (int64_t j = 0; j < S; ++j) {
        p.k(0, 0, j, 0) = 10000.0 + static_cast<double>(rng.randint(-4, 5));
        p.k(0, 0, j, 1) = static_cast<double>(rng.randint(-3, 4));
      }
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const double sign = (i / 7 + h) % 3 == 0 ? -4.0 : 4.0;
          p.q(0, h, i, 0) = sign;
          p.q(0, h, i, 1) = sign * static_cast<double>(rng.randint(-1, 2));
        }
      p.v = rng.normal<double>({1, 1, S, d});
      p.kv_len = {S - 100};
      p.scale = 0.25;
      // Head 0's sink sits among the largest logits; head 1's is negligible.
      check_all_scores(p, causal, causal ? odd : AttentionOptions{}, {10003.5, -1e4}, 2e-5, 2e-3);
    }
  }
}

// FINDING (precision, not a formula error), kept as a skipped case: at |logits| ≈ 1e4 the fused
// clipped softmax's weights are off by up to ~4.9e-4 relative (half an ulp of lse ≈ 1e4 in float),
// 5000× the error of the plain softmax on the same inputs, because it evaluates exp(s − lse)
// instead of exp(s − m)/l. The materialised reference path does the same, so fused-vs-reference
// tests cannot see it. Run with --no-skip to reproduce: the two clipped families fail at 2e-5
// (worst |out − ref| / mass ≈ 4.8e-4), every other family passes.
TEST_CASE("FINDING: fp32 clipped softmax at logits ~1e4 is only accurate to ~5e-4 (lse rounded to float)" *
          doctest::skip()) {
  Rng rng(7);
  Problem p;
  const int64_t T = 512, d = 16;
  p.q = Tensor<double>::empty({1, 2, T, d});
  p.k = Tensor<double>::empty({1, 1, T, d});
  for (Tensor<double>* t : {&p.q, &p.k})
    for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = static_cast<double>(rng.randint(-100, 101));
  p.v = rng.normal<double>({1, 1, T, d});
  p.kv_len = {T};
  p.scale = 0.25;
  check_all_scores(p, true, AttentionOptions{}, {5e3, -3.0}, 2e-5, 2e-5);
}
