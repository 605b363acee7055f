// The fused attention with bf16 products (AttentionOptions::precision = bf16: Q·Kᵀ, P·V and the
// backward's four products take bf16 operands with fp32 sums; scores, the online normaliser and
// the row statistics stay fp32) against the fp32 kernel, for every score family, on the blocked
// paths (head sizes of whole vectors, the transposed softmax forward) and the general one
// (d = 20), causal and bidirectional with padded keys; and through autodiff::attention, whose
// tape's precision reaches the kernels forward and backward.
//
// The bound: bf16 keeps 8 significant bits, so each rounded operand moves by at most u = 2^-8
// relative. A logit moves by ≤ 2u·Σ|q||k|·scale, a weight by a few times that, the weights and
// values (or gradients) by u each in the second product, so outputs and gradients move by a small
// multiple of u times the magnitudes they sum; with logits of order 1 (unit q, k, 1/√d) that is
// within 8u = 2^-5 of the largest element. Measured: 1–2u (0.25–0.5%).
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_testing.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "softcap_score.hpp"

using namespace attn_test;

namespace {

constexpr double kBound = 8.0 / 256.0;  // 8u, u = 2^-8

// Whether a row of logits s (visible keys) has a weight whose derivative jumps within reach of
// bf16's change of the logits, |Δs_j| ≤ δ_j (ReLU at s = 0; the clipped softmax where
// (ζ − γ)·p + γ crosses 0 or 1, p moving by a factor e^{±2·max δ}). There a gradient changes by
// O(1) under any change of the logits, bf16's or another summation order's, so these rows are
// left out of the gradient comparison (their output gradient is set to 0).
template <class Score>
bool near_kink(const Score&, const std::vector<double>&, const std::vector<double>&) {
  return false;
}
bool near_kink(const score::ReLU&, const std::vector<double>& s, const std::vector<double>& delta) {
  for (std::size_t j = 0; j < s.size(); ++j)
    if (std::abs(s[j]) <= delta[j]) return true;
  return false;
}
bool near_kink(const score::ClippedSoftmax& c, const std::vector<double>& s, const std::vector<double>& delta) {
  if (s.empty()) return false;
  double mx = -INFINITY, sum = 0, dmax = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double x : s) sum += std::exp(x - mx);
  for (double d : delta) dmax = std::max(dmax, d);
  const double reach = std::expm1(2 * dmax);
  for (double x : s) {
    const double pj = std::exp(x - mx) / sum;
    for (double kink : {-c.gamma / (c.zeta - c.gamma), (1 - c.gamma) / (c.zeta - c.gamma)})
      if (std::abs(pj - kink) <= reach * kink) return true;
  }
  return false;
}

// w with the rows near a kink (near_kink) set to 0; the share of rows kept.
template <class Score, class Mask, class P>
double drop_kink_rows(const Score& score, const Dims& dm, P& p) {
  const double scale = 1.0 / std::sqrt(double(dm.d)), reach = 1.5 * std::ldexp(2.0, -8);  // 1.5 · 2u
  int64_t kept = 0, rows = 0;
  for (int64_t b = 0; b < dm.B; ++b)
    for (int64_t h = 0; h < dm.H; ++h)
      for (int64_t i = 0; i < dm.T; ++i) {
        const int64_t kvlen = dm.kv_lengths.empty() ? dm.S : dm.kv_lengths[static_cast<std::size_t>(b)];
        const int64_t end = Mask::key_end(i, dm.T, dm.S, kvlen), hk = h / (dm.H / dm.Hkv);
        std::vector<double> s, delta;
        for (int64_t j = 0; j < end; ++j) {
          double dot = 0, mag = 0;
          for (int64_t c = 0; c < dm.d; ++c) {
            const double x = double(p.q(b, h, i, c)) * double(p.k(b, hk, j, c));
            dot += x;
            mag += std::abs(x);
          }
          s.push_back(scale * dot);
          delta.push_back(reach * scale * mag);
        }
        ++rows;
        if (!near_kink(score, s, delta)) {
          ++kept;
          continue;
        }
        for (int64_t c = 0; c < dm.d; ++c) p.w.data()[((b * dm.H + h) * dm.T + i) * dm.d + c] = 0.0f;
      }
  return double(kept) / double(rows);
}

template <class Score, class Mask>
void check_bf16_against_fp32(const Score& score, const Dims& dm, uint64_t seed) {
  INFO(std::string(Score::name), " / ", std::string(Mask::name), " T=", dm.T, " S=", dm.S, " d=", dm.d, " H=", dm.H,
       " Hkv=", dm.Hkv);
  auto p = cast<float>(make_problem(score, value::Identity{}, GateCfg::None, dm, seed));
  const double kept = drop_kink_rows<Score, Mask>(score, dm, p);
  CAPTURE(kept);
  REQUIRE(kept >= 0.05);  // enough rows left to compare
  AttentionOptions o32 = p.opt, o16 = p.opt;
  o16.precision = kernels::Precision::bf16;
  const Mask mask;
  const auto f32 = attention_fused_forward(score, mask, p.q, p.k, p.v, p.sp, o32);
  const auto f16 = attention_fused_forward(score, mask, p.q, p.k, p.v, p.sp, o16);
  const auto g32 = attention_fused_backward(score, mask, p.q, p.k, p.v, p.sp, f32, p.w, o32);
  const auto g16 = attention_fused_backward(score, mask, p.q, p.k, p.v, p.sp, f16, p.w, o16);
  const double e_out = rel_error(f16.out, f32.out), e_dq = rel_error(g16.dq, g32.dq), e_dk = rel_error(g16.dk, g32.dk),
               e_dv = rel_error(g16.dv, g32.dv);
  CAPTURE(e_out);
  CAPTURE(e_dq);
  CAPTURE(e_dk);
  CAPTURE(e_dv);
  CHECK(e_out <= kBound);
  CHECK(e_dq <= kBound);
  CHECK(e_dk <= kBound);
  CHECK(e_dv <= kBound);
  // The products really ran in bf16: the outputs differ from fp32's (by more than fp32 rounding).
  CHECK(e_out > 1e-5);
  CHECK(e_dv > 1e-5);
  if constexpr (Score::family == score::Family::Normalised) CHECK(rel_error(f16.lse, f32.lse) <= kBound);
  std::vector<Tensor<float>> d32, d16;
  g32.dscore.parameters([&](const char*, const Tensor<float>& t) { d32.push_back(t); });
  g16.dscore.parameters([&](const char*, const Tensor<float>& t) { d16.push_back(t); });
  for (std::size_t i = 0; i < d32.size(); ++i) CHECK(rel_error(d16[i], d32[i]) <= kBound);
}

const std::vector<Dims>& dims() {
  // Blocks as the models run them (32 queries × 128 keys) and smaller ones (several key blocks,
  // masked edges), head sizes 32 and 64 (block products: key blocks of whole vectors, so S > the
  // block or a multiple of 16) and 20 (general GEMMs), grouped kv heads, padding.
  static const std::vector<Dims> ds = {{2, 4, 2, 150, 150, 32, {}, 32, 128},
                                       {1, 2, 1, 100, 100, 64, {100}, 32, 32},
                                       {2, 2, 2, 45, 45, 20, {45, 30}, 16, 16},
                                       {1, 4, 2, 37, 53, 32, {53}, 32, 16},
                                       // query blocks of 4 rows: a key block grows by less than a vector at a time
                                       {1, 2, 1, 100, 100, 32, {}, 4, 64}};
  return ds;
}

// ReLU's kinks leave few rows of 100 keys or more out of bf16's reach: its cases have at most 72.
const std::vector<Dims>& relu_dims() {
  static const std::vector<Dims> ds = {{2, 4, 2, 70, 70, 32, {}, 32, 64},
                                       {1, 2, 1, 30, 30, 64, {}, 32, 16},
                                       dims()[2],
                                       dims()[3],
                                       {1, 2, 1, 72, 72, 32, {}, 4, 64}};
  return ds;
}

template <class Score>
void check_score(const Score& score, uint64_t seed, const std::vector<Dims>& list = dims()) {
  for (const Dims& dm : list) {
    check_bf16_against_fp32<Score, mask::Causal>(score, dm, seed++);
    check_bf16_against_fp32<Score, mask::Bidirectional>(score, dm, seed++);
  }
}

}  // namespace

TEST_CASE("fused attention, bf16 products: within 8u of fp32 for every score family") {
  check_score(score::Softmax{}, 10);
  check_score(score::SoftmaxSink{}, 20);
  check_score(score::ClippedSoftmax{1.05, -0.1}, 30);
  check_score(user::Softcap{}, 40);  // a logits transform
  check_score(score::Sigmoid{}, 50);
  check_score(score::Sigmoid::with_bias(-1.5), 60);
  check_score(score::ReLU{}, 70, relu_dims());
  check_score(score::Pointwise<score::fn::ReLU2>{{}, 0.5}, 80);
  check_score(score::Polynomial{}, 90);
}

// Keys a row may not see never enter its sums, whatever they hold: with NaN in the padded keys and
// values (past kv_lengths), both precisions give finite outputs and gradients, as far apart as ever.
// (A bf16 product packs a key block once for all the query blocks that see part of it: a sum over
// keys must still stop at what this block of queries sees, or 0 × NaN would reach it.)
TEST_CASE("fused attention, bf16 products: NaN in padded keys and values stays out") {
  for (const Dims& dm : {Dims{2, 4, 2, 150, 150, 32, {150, 97}, 32, 128}, Dims{1, 2, 1, 100, 100, 64, {61}, 32, 32},
                         Dims{1, 2, 1, 100, 100, 32, {77}, 4, 64}}) {
    auto run = [&](const auto& score, auto mask, uint64_t seed) {
      using Score = std::decay_t<decltype(score)>;
      INFO(std::string(Score::name), " / ", std::string(decltype(mask)::name), " T=", dm.T, " d=", dm.d);
      auto p = cast<float>(make_problem(score, value::Identity{}, GateCfg::None, dm, seed));
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (int64_t b = 0; b < dm.B; ++b)
        for (int64_t h = 0; h < dm.Hkv; ++h)
          for (int64_t j = dm.kv_lengths[static_cast<std::size_t>(b)]; j < dm.S; ++j)
            for (int64_t c = 0; c < dm.d; ++c) {
              p.k.data()[((b * dm.Hkv + h) * dm.S + j) * dm.d + c] = nan;
              p.v.data()[((b * dm.Hkv + h) * dm.S + j) * dm.d + c] = nan;
            }
      AttentionOptions o16 = p.opt;
      o16.precision = kernels::Precision::bf16;
      for (const AttentionOptions& o : {p.opt, o16}) {
        const auto f = attention_fused_forward(score, mask, p.q, p.k, p.v, p.sp, o);
        const auto g = attention_fused_backward(score, mask, p.q, p.k, p.v, p.sp, f, p.w, o);
        CHECK(all_finite(f.out));
        CHECK(all_finite(g.dq));
        CHECK(all_finite(g.dk));
        CHECK(all_finite(g.dv));
      }
    };
    run(score::Softmax{}, mask::Causal{}, 1);
    run(score::Softmax{}, mask::Bidirectional{}, 2);
    run(score::ClippedSoftmax{1.05, -0.1}, mask::Causal{}, 3);
    run(score::Sigmoid{}, mask::Bidirectional{}, 4);
  }
}

// The packed operands are the kernels' scratch: AttentionMemory's peak under bf16 exceeds
// fp32's by at least one key block's packing (Bk · d bf16 values) and by no more than every
// thread holding a whole kv head's keys and values four times over in fp32.
TEST_CASE("fused attention, bf16 products: their packed operands count in AttentionMemory") {
  const Dims dm{1, 2, 1, 256, 256, 32, {}, 32, 128};
  const auto p = cast<float>(make_problem(score::Softmax{}, value::Identity{}, GateCfg::None, dm, 7));
  auto peak = [&](kernels::Precision precision, bool backward) {
    AttentionOptions o = p.opt;
    o.precision = precision;
    const auto f = attention_fused_forward(score::Softmax{}, mask::Causal{}, p.q, p.k, p.v, p.sp, o);
    AttentionMemory::reset();
    if (backward)
      attention_fused_backward(score::Softmax{}, mask::Causal{}, p.q, p.k, p.v, p.sp, f, p.w, o);
    else
      attention_fused_forward(score::Softmax{}, mask::Causal{}, p.q, p.k, p.v, p.sp, o);
    return AttentionMemory::peak_bytes();
  };
  const int64_t block = dm.block_k * dm.d * 2, most = num_threads() * 4 * 2 * dm.S * dm.d * 4;
  for (const bool backward : {false, true}) {
    CAPTURE(backward);
    const int64_t extra = peak(kernels::Precision::bf16, backward) - peak(kernels::Precision::fp32, backward);
    CHECK(extra >= block);
    CHECK(extra <= most);
  }
}

TEST_CASE("autodiff::attention on a bf16 tape runs the kernels in bf16; PrecisionScope keeps fp32") {
  const Dims dm{2, 4, 2, 40, 40, 32, {}, 32, 128};
  const auto p = cast<float>(make_problem(score::Softmax{}, value::Identity{}, GateCfg::None, dm, 5));
  using Call = autodiff::AttentionCall<score::Softmax, gate::None, value::Identity, mask::Causal, float>;
  Call call;
  call.options = p.opt;
  auto run = [&](kernels::Precision precision) {
    autodiff::Tape<float> tape;
    tape.set_precision(precision);
    auto q = tape.leaf(p.q), k = tape.leaf(p.k), v = tape.leaf(p.v);
    auto y = autodiff::attention(call, q, k, v, autodiff::Var<float>{});
    tape.backward(autodiff::sum(y * tape.leaf(p.w, false)));  // the gradient at y is w
    return std::vector<Tensor<float>>{y.value(), q.grad(), k.grad(), v.grad()};
  };
  const auto a32 = run(kernels::Precision::fp32), a16 = run(kernels::Precision::bf16);
  AttentionOptions o16 = p.opt;
  o16.precision = kernels::Precision::bf16;
  const auto f16 = attention_fused_forward(score::Softmax{}, mask::Causal{}, p.q, p.k, p.v, p.sp, o16);
  const auto g16 = attention_fused_backward(score::Softmax{}, mask::Causal{}, p.q, p.k, p.v, p.sp, f16, p.w, o16);
  CHECK(a16[0].to_vector() == f16.out.to_vector());
  CHECK(a16[1].to_vector() == g16.dq.to_vector());
  CHECK(a16[2].to_vector() == g16.dk.to_vector());
  CHECK(a16[3].to_vector() == g16.dv.to_vector());
  CHECK(a16[0].to_vector() != a32[0].to_vector());
  // A PrecisionScope around the call keeps its products in fp32, forward and backward.
  autodiff::Tape<float> tape;
  tape.set_precision(kernels::Precision::bf16);
  auto q = tape.leaf(p.q), k = tape.leaf(p.k), v = tape.leaf(p.v);
  autodiff::Var<float> y;
  {
    autodiff::PrecisionScope keep(tape, kernels::Precision::fp32);
    y = autodiff::attention(call, q, k, v, autodiff::Var<float>{});
  }
  tape.backward(autodiff::sum(y * tape.leaf(p.w, false)));
  CHECK(y.value().to_vector() == a32[0].to_vector());
  CHECK(q.grad().to_vector() == a32[1].to_vector());
}
