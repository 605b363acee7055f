// Attention policies: the element math agrees between scalars and xsimd batches, derivatives
// agree with finite differences, the weights follow each paper's formula (checked against
// direct loops here), and the gate / value-transform / probe pieces do what they say.

#include "attention_testing.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/xsimd.hpp"

using namespace attn_test;

namespace {

const std::vector<double> kGrid = {-1e4, -30.0, -3.0, -1.0, -0.3, -1e-3, 0.0, 2e-3, 0.4, 1.0, 2.5, 7.0, 40.0, 1e4};

// f(batch) lane by lane equals f(scalar), for float and double.
template <class F>
void check_batch_matches_scalar(F&& f, double tol = 1e-6) {
  auto one = [&](auto tag) {
    using T = decltype(tag);
    using B = xsimd::batch<T>;
    for (double x0 : kGrid) {
      alignas(64) T in[B::size], out[B::size];
      for (std::size_t i = 0; i < B::size; ++i) in[i] = static_cast<T>(x0 * (1.0 + 0.01 * static_cast<double>(i)));
      f(B::load_aligned(in)).store_aligned(out);
      for (std::size_t i = 0; i < B::size; ++i) {
        const double s = static_cast<double>(f(in[i]));
        INFO("x = ", static_cast<double>(in[i]));
        REQUIRE(std::isfinite(static_cast<double>(out[i])) == std::isfinite(s));
        if (std::isfinite(s)) CHECK(std::abs(static_cast<double>(out[i]) - s) <= tol * std::max(1.0, std::abs(s)));
      }
    }
  };
  one(float{});
  one(double{});
}

// f' matches central differences of f (double) away from kinks.
template <class F, class DF>
void check_derivative(F&& f, DF&& df) {
  for (double x : kGrid) {
    if (std::abs(x) > 100 || std::abs(x) < 1e-2) continue;
    const double h = 1e-6;
    const double fd = (f(x + h) - f(x - h)) / (2 * h);
    INFO("x = ", x);
    CHECK(std::abs(fd - df(x)) <= 1e-6 * std::max(1.0, std::abs(fd)));
  }
}

template <class H>
void check_activation() {
  INFO(std::string(H::name));
  check_batch_matches_scalar([](auto x) { return H::f(x); });
  check_batch_matches_scalar([](auto x) { return H::df(x); });
  check_derivative([](double x) { return H::f(x); }, [](double x) { return H::df(x); });
}

}  // namespace

TEST_CASE("policies: point-wise activations agree on scalars and xsimd batches; derivatives are right") {
  check_activation<score::fn::ReLU>();
  check_activation<score::fn::ReLU2>();
  check_activation<score::fn::GELU>();
  check_activation<score::fn::Softplus>();
  check_activation<score::fn::Identity>();
  CHECK(score::fn::Softplus::f(1e4) == doctest::Approx(1e4));
  CHECK(score::fn::Softplus::f(-1e4) == 0.0);
  CHECK(score::fn::GELU::f(-1e4) == doctest::Approx(0.0));
  CHECK(std::isfinite(score::fn::GELU::df(-1e4f)));
}

TEST_CASE("policies: score weights agree on scalars and batches; gradients match finite differences") {
  const score::ClippedSoftmax clip{1.1, -0.2};
  check_batch_matches_scalar([&](auto p) { return clip.weight(p * decltype(p)(1e-4)); });
  check_batch_matches_scalar([&](auto p) { return clip.weight_grad(p * decltype(p)(1e-4)); });
  check_derivative([&](double p) { return clip.weight(p * 0.1); },
                   [&](double p) { return 0.1 * clip.weight_grad(p * 0.1); });
  CHECK(clip.weight(0.0) == 0.0);
  CHECK(clip.weight(1.0) == 1.0);
  CHECK(clip.weight_grad(0.01) == 0.0);
  CHECK(clip.weight_grad(0.5) == doctest::Approx(1.3));

  const score::Sigmoid sig{};
  const score::Polynomial poly{};
  const score::Pointwise<score::fn::GELU> gelu{{}, 0.5};
  check_batch_matches_scalar([&](auto s) {
    using V = decltype(s);
    return sig.weight(s, V(0.5), V(-1.0));
  });
  check_batch_matches_scalar([&](auto s) {
    using V = decltype(s);
    return poly.weight(s * V(1e-2), V(0.5), V(0.0));
  });
  check_batch_matches_scalar([&](auto s) {
    using V = decltype(s);
    return gelu.weight_grad(s, V(0.25), V(0.0));
  });
  check_derivative([&](double s) { return sig.weight(s, 0.5, -1.0); },
                   [&](double s) { return sig.weight_grad(s, 0.5, -1.0); });
  check_derivative([&](double s) { return poly.weight(s, 0.5, 0.0); },
                   [&](double s) { return poly.weight_grad(s, 0.5, 0.0); });

  // Row constants: n^-α over visible keys, −log(keys) for sigmoid, 1/√n for polynomial.
  CHECK(score::ReLU{}.row(4, 10).scale == doctest::Approx(0.25));
  CHECK(gelu.row(16, 20).scale == doctest::Approx(0.25));
  CHECK(sig.row(3, 8).bias == doctest::Approx(-std::log(8.0)));
  CHECK(score::Sigmoid::with_bias(0.7).row(3, 8).bias == doctest::Approx(0.7));
  CHECK(poly.row(9, 20).scale == doctest::Approx(1.0 / 3.0));
  CHECK(score::ClippedSoftmax::for_length(512).gamma == doctest::Approx(-12.0 / 512));
}

TEST_CASE("policies: parameters are declared through one visitor; kinds and traits") {
  auto sink = score::SoftmaxSink{}.make_params<float>(3);
  CHECK(sink.sink_logit.shape() == Shape{3});
  CHECK(sink.sink_logit(1) == 0.f);
  CHECK(policy::count_parameters(sink) == 1);
  CHECK(policy::count_parameters(score::Softmax{}.make_params<float>(3)) == 0);
  auto vs = value::VScale{}.make_params<double>(2);
  CHECK(vs.theta.shape() == Shape{2});
  std::vector<std::string> names;
  vs.parameters([&](const char* n, Tensor<double>&) { names.push_back(n); });
  CHECK(names == std::vector<std::string>{"theta"});
  auto z = policy::zeros_like(sink);
  CHECK_FALSE(z.sink_logit.shares_storage_with(sink.sink_logit));

  static_assert(score::is_policy_v<score::Softmax> && score::is_policy_v<score::Polynomial>);
  static_assert(!score::is_policy_v<gate::None> && !score::is_policy_v<mask::Causal>);
  static_assert(gate::is_policy_v<gate::None> && gate::is_policy_v<gate::FromValue<>>);
  static_assert(policy::check_attention_policies<score::SoftmaxSink, gate::FromValue<>, value::VScale, mask::Causal>());
  static_assert(gate::FromValue<>::placement == gate::Placement::OnValues);
  static_assert(gate::FromValue<>::granularity == gate::Granularity::PerHead);
  static_assert(gate::FromInput<>::placement == gate::Placement::OnOutput);
  static_assert(gate::FromAnchor<gate::per_head, gate::on_values>::channels(64) == 1);
  static_assert(gate::FromInput<gate::per_channel>::channels(64) == 64);
  CHECK(mask::Causal::key_end(2, 5, 5, 5) == 3);
  CHECK(mask::Causal::key_end(0, 3, 5, 5) == 3);  // T < S: aligned at the end
  CHECK(mask::Causal::key_end(4, 5, 5, 2) == 2);  // padding caps it
  CHECK(mask::Causal::key_end(0, 6, 3, 3) == 0);  // T > S: early rows see nothing
  CHECK(mask::Bidirectional::key_end(0, 5, 5, 0) == 0);
}

TEST_CASE("policies: gate initialisation presets") {
  CHECK(gate::Init::bondarenko().bias_value() == doctest::Approx(std::log(1.0 / 3.0)));
  CHECK(policy::math::sigmoid(gate::Init::bondarenko().bias_value()) == doctest::Approx(0.25));
  CHECK(gate::Init::nop().bias_value() == 2.0);
  CHECK_FALSE(gate::Init::g1().has_bias());
  Rng rng(5);
  auto w = Tensor<double>::full({64, 64}, 1.0);
  auto b = Tensor<double>::zeros({64});
  gate::Init::vga().initialise(rng, w, &b);
  CHECK(rel_error(w, Tensor<double>::zeros({64, 64})) == 0.0);
  gate::Init::bondarenko().initialise(rng, w, &b);
  double ss = 0;
  for (double x : w.to_vector()) ss += x * x;
  CHECK(std::sqrt(ss / 4096) == doctest::Approx(0.02).epsilon(0.1));
  CHECK(b(3) == doctest::Approx(std::log(1.0 / 3.0)));
  CHECK_THROWS_AS(gate::Init::g1().initialise(rng, w, &b), Error);
}

// Weights from direct loops over the paper formulas, compared with what the kernels record.
TEST_CASE("policies: recorded weights follow each paper's formula") {
  const int64_t T = 4, S = 4, d = 2;
  Rng rng(11);
  auto q = rng.normal<double>({1, 1, T, d}, 0.0, 1.0);
  auto k = rng.normal<double>({1, 1, S, d}, 0.0, 1.0);
  auto v = rng.normal<double>({1, 1, S, d}, 0.0, 1.0);
  auto logit = [&](int64_t i, int64_t j) {
    return (q(0, 0, i, 0) * k(0, 0, j, 0) + q(0, 0, i, 1) * k(0, 0, j, 1)) / std::sqrt(2.0);
  };
  auto record = [&](const auto& score, const auto& params, auto mask) {
    autodiff::AttentionRecorder<double> rec;
    auto fwd = recorded_forward(score, mask, q, k, v, params, {}, rec);
    CHECK(rec.calls == 1);
    // The recorded weights reproduce the output.
    for (int64_t i = 0; i < T; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j) o += rec.weights(0, 0, i, j) * v(0, 0, j, c);
        CHECK(fwd.out(0, 0, i, c) == doctest::Approx(o));
      }
    return rec;
  };
  SUBCASE("softmax with sink, causal") {
    score::SoftmaxSink sc;
    auto params = sc.make_params<double>(1);
    params.sink_logit(0) = 0.3;
    auto rec = record(sc, params, mask::Causal{});
    for (int64_t i = 0; i < T; ++i) {
      double den = std::exp(0.3);
      for (int64_t j = 0; j <= i; ++j) den += std::exp(logit(i, j));
      for (int64_t j = 0; j < S; ++j) {
        CHECK(rec.weights(0, 0, i, j) == doctest::Approx(j <= i ? std::exp(logit(i, j)) / den : 0.0));
        if (j <= i)
          CHECK(rec.logits(0, 0, i, j) == doctest::Approx(logit(i, j)));
        else
          CHECK(rec.logits(0, 0, i, j) == -std::numeric_limits<double>::infinity());
      }
      CHECK(rec.lse(0, 0, i) == doctest::Approx(std::log(den)));
    }
  }
  SUBCASE("clipped softmax, bidirectional") {
    score::ClippedSoftmax sc{1.2, -0.3};
    auto rec = record(sc, policy::NoParams<double>{}, mask::Bidirectional{});
    for (int64_t i = 0; i < T; ++i) {
      double den = 0;
      for (int64_t j = 0; j < S; ++j) den += std::exp(logit(i, j));
      for (int64_t j = 0; j < S; ++j)
        CHECK(rec.weights(0, 0, i, j) ==
              doctest::Approx(std::clamp(1.5 * std::exp(logit(i, j)) / den - 0.3, 0.0, 1.0)));
    }
  }
  SUBCASE("ReLU over visible keys, causal") {
    auto rec = record(score::ReLU{}, policy::NoParams<double>{}, mask::Causal{});
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j)
        CHECK(rec.weights(0, 0, i, j) == doctest::Approx(j <= i ? std::max(logit(i, j), 0.0) / double(i + 1) : 0.0));
  }
  SUBCASE("sigmoid with bias -log(keys), causal") {
    auto rec = record(score::Sigmoid{}, policy::NoParams<double>{}, mask::Causal{});
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j)
        CHECK(rec.weights(0, 0, i, j) ==
              doctest::Approx(j <= i ? 1.0 / (1.0 + std::exp(-(logit(i, j) - std::log(double(S))))) : 0.0));
  }
  SUBCASE("polynomial, bidirectional") {
    auto rec = record(score::Polynomial{}, policy::NoParams<double>{}, mask::Bidirectional{});
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j) CHECK(rec.weights(0, 0, i, j) == doctest::Approx(std::pow(logit(i, j), 3) / 2.0));
  }
  SUBCASE("softplus with alpha 0.5, causal") {
    auto rec = record(score::Pointwise<score::fn::Softplus>{{}, 0.5}, policy::NoParams<double>{}, mask::Causal{});
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j)
        CHECK(rec.weights(0, 0, i, j) == doctest::Approx(std::log1p(std::exp(logit(i, j))) / std::sqrt(double(i + 1))));
  }
}

TEST_CASE("policies: clipped softmax clips to exactly 0 and 1 and passes no gradient there") {
  Rng rng(3);
  auto q = rng.normal<double>({1, 2, 6, 4}, 0.0, 1.5);
  auto k = rng.normal<double>({1, 2, 6, 4}, 0.0, 1.5);
  auto v = rng.normal<double>({1, 2, 6, 4}, 0.0, 1.0);
  const score::ClippedSoftmax sc{1.05, -0.1};
  autodiff::AttentionRecorder<double> rec;
  recorded_forward(sc, mask::Causal{}, q, k, v, policy::NoParams<double>{}, {}, rec);
  int zeros = 0, ones = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        zeros += rec.weights(0, h, i, j) == 0.0;
        ones += rec.weights(0, h, i, j) == 1.0;
      }
  CHECK(zeros > 0);
  CHECK(ones >= 2);  // at least the first row of each head (one visible key)
}

TEST_CASE("transforms: V-scale and gates compute their formulas") {
  Rng rng(9);
  auto v = rng.normal<double>({1, 2, 3, 4}, 0.0, 1.0);
  value::VScale vs{0.5};
  auto params = vs.make_params<double>(2);
  params.theta(1) = 0.4;
  auto vh = value_transform_forward(vs, v, params);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 3; ++j) {
      double r = 0;
      for (int64_t c = 0; c < 4; ++c) r += v(0, h, j, c) * v(0, h, j, c);
      const double C = 4.0 * std::exp(h == 1 ? 0.4 : 0.0);  // (4·0.5)² e^θ
      for (int64_t c = 0; c < 4; ++c) CHECK(vh(0, h, j, c) == doctest::Approx(r / (r + C) * v(0, h, j, c)));
    }
  CHECK(value_transform_forward(value::Identity{}, v).shares_storage_with(v));

  auto lh = rng.normal<double>({1, 2, 3, 1}, 0.0, 1.0);
  auto lc = rng.normal<double>({1, 2, 3, 4}, 0.0, 1.0);
  auto yh = gate_forward(gate::FromValue<gate::per_head>{}, v, lh);
  auto yc = gate_forward(gate::FromInput<gate::per_channel>{}, v, lc);
  CHECK(yh(0, 1, 2, 3) == doctest::Approx(v(0, 1, 2, 3) / (1 + std::exp(-lh(0, 1, 2, 0)))));
  CHECK(yc(0, 1, 2, 3) == doctest::Approx(v(0, 1, 2, 3) / (1 + std::exp(-lc(0, 1, 2, 3)))));
}

TEST_CASE("autodiff::attention: fused without a recorder, materialised and recorded with one, equal results") {
  Rng rng(21);
  auto qt = rng.normal<float>({2, 4, 9, 8}, 0.f, 1.f);
  auto kt = rng.normal<float>({2, 2, 9, 8}, 0.f, 1.f);
  auto vt = rng.normal<float>({2, 2, 9, 8}, 0.f, 1.f);
  auto dout = rng.normal<float>({2, 4, 9, 8}, 0.f, 1.f);
  using Call = autodiff::AttentionCall<score::SoftmaxSink, gate::None, value::Identity, mask::Causal, float>;
  struct Run {
    Tensor<float> out, dq, dk, dv, dsink;
  };
  auto run = [&](autodiff::AttentionRecorder<float>* rec) {
    autodiff::Tape<float> tape;
    auto q = tape.leaf(qt), k = tape.leaf(kt), v = tape.leaf(vt), sink = tape.leaf(Tensor<float>::zeros({4}));
    Call c;
    c.score_params = c.score.make_params<float>(4);
    c.score_params.sink_logit = sink.value();
    c.score_vars = {sink};
    c.options.block_q = 4;
    c.options.block_k = 4;
    c.recorder = rec;
    auto y = autodiff::attention(c, q, k, v, autodiff::Var<float>{});
    tape.backward(autodiff::sum(y * tape.leaf(dout, false)));
    return Run{y.value(), q.grad(), k.grad(), v.grad(), sink.grad()};
  };
  autodiff::AttentionRecorder<float> rec;
  const Run f0 = run(nullptr), f1 = run(&rec);
  CHECK(rec.calls == 1);
  CHECK(rec.weights.shape() == Shape{2, 4, 9, 9});
  CHECK(rec.logits.shape() == Shape{2, 4, 9, 9});
  CHECK(rec.lse.shape() == Shape{2, 4, 9});
  CHECK(rec.value_norms.shape() == Shape{2, 2, 9});
  // The keys as the scores saw them, and their norms.
  CHECK(rel_error(rec.keys, kt) == 0.0);
  REQUIRE(rec.key_norms.shape() == Shape{2, 2, 9});
  double k0 = 0;
  for (int64_t d = 0; d < 8; ++d) k0 += double(kt(1, 1, 3, d)) * double(kt(1, 1, 3, d));
  CHECK(rec.key_norms(1, 1, 3) == doctest::Approx(std::sqrt(k0)).epsilon(1e-5));
  CHECK(rel_error(rec.grad_q, f1.dq) == 0.0);
  CHECK(rel_error(f0.out, f1.out) < 1e-5);
  CHECK(rel_error(f0.dq, f1.dq) < 1e-5);
  CHECK(rel_error(f0.dk, f1.dk) < 1e-5);
  CHECK(rel_error(f0.dv, f1.dv) < 1e-5);
  CHECK(rel_error(f0.dsink, f1.dsink) < 5e-5);
}

TEST_CASE("memory: the fused path allocates O(T·d), the materialised one O(T·S)") {
  auto bytes = [](bool fused, int64_t T) {
    Rng rng(1);
    auto q = rng.normal<float>({1, 2, T, 16}, 0.f, 1.f);
    auto k = rng.normal<float>({1, 2, T, 16}, 0.f, 1.f);
    AttentionMemory::reset();
    if (fused)
      attention_fused_forward(score::Softmax{}, mask::Causal{}, q, k, k, policy::NoParams<float>{});
    else
      attention_reference_forward(score::Softmax{}, mask::Causal{}, q, k, k, policy::NoParams<float>{});
    return AttentionMemory::peak_bytes();
  };
  const int64_t f1 = bytes(true, 256), f2 = bytes(true, 1024);
  const int64_t r1 = bytes(false, 256), r2 = bytes(false, 1024);
  CHECK(f2 < 5 * f1);   // ~linear in T
  CHECK(r2 > 12 * r1);  // ~quadratic in T
  CHECK(f2 < r2 / 10);
}
