// pos:: (RoPE, learned positions) and tokens:: (registers, learnable sink): gradchecks, the
// rotate-half convention, norm preservation and relative-position dot products, layouts.
#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/autodiff/ops/heads.hpp"
#include "sinklab/nn/pos.hpp"
#include "sinklab/nn/tokens.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

Tensor<double> randn(const Shape& s, uint64_t seed, double scale = 1.0) { return Rng(seed).normal<double>(s, 0.0, scale); }

template <class F>
void check_grad(F&& f, std::vector<Parameter<double>*> ps) {
  auto r = gradcheck(std::forward<F>(f), ps);
  INFO(r);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("pos::RoPE: gradcheck, rotate-half values, identity at position 0") {
  Rng rng(1);
  pos::RoPE::Module<double> rope("rope", 20, rng);
  auto x = make_inputs({randn({2, 3, 5, 20}, 2)});
  check_grad([&](Tape<double>& t) { return rope(t, t.param(x[0])); }, pointers(x));
  check_grad([&](Tape<double>& t) { return rope(t, t.param(x[0]), 7); }, pointers(x));

  // Against the formula, θ = 500 and offset 3.
  autodiff::RopeTable<double> table;
  table.ensure(16, 20, 500.0);
  Tape<double> tape;
  const Tensor<double>& xv = x[0].value;
  auto y = autodiff::rope(tape.constant(xv), table, 3).value();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t i = 0; i < 10; ++i) {
          const double a = (t + 3) * std::pow(500.0, -2.0 * i / 20.0);
          const double x1 = xv(b, h, t, i), x2 = xv(b, h, t, i + 10);
          CHECK(y(b, h, t, i) == doctest::Approx(x1 * std::cos(a) - x2 * std::sin(a)).epsilon(1e-12));
          CHECK(y(b, h, t, i + 10) == doctest::Approx(x2 * std::cos(a) + x1 * std::sin(a)).epsilon(1e-12));
        }
  // Position 0 is the identity.
  auto y0 = rope(tape, tape.constant(xv.slice(2, 0, 1).contiguous())).value();
  for (int64_t i = 0; i < y0.numel(); ++i) CHECK(y0.data()[i] == doctest::Approx(xv.slice(2, 0, 1).contiguous().data()[i]));
}

TEST_CASE("pos::RoPE: preserves norms; ⟨RoPE(q, m), RoPE(k, n)⟩ depends only on m − n") {
  Rng rng(3);
  const int64_t d = 32, T = 12;
  pos::RoPE::Module<double> rope("rope", d, rng);
  Tape<double> tape;
  const Tensor<double> xs = randn({1, 2, T, d}, 4, 3.0);
  auto y = rope(tape, tape.constant(xs)).value();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < T; ++t) {
      double nx = 0, ny = 0;
      for (int64_t i = 0; i < d; ++i) {
        nx += xs(0, h, t, i) * xs(0, h, t, i);
        ny += y(0, h, t, i) * y(0, h, t, i);
      }
      CHECK(ny == doctest::Approx(nx).epsilon(1e-12));
    }
  // The same q and k at every position: D[m][n] = ⟨q_m, k_n⟩ is constant along diagonals.
  const Tensor<double> q = randn({d}, 5), k = randn({d}, 6);
  Tensor<double> Q = Tensor<double>::empty({1, 1, T, d}), K = Tensor<double>::empty({1, 1, T, d});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d; ++i) {
      Q(0, 0, t, i) = q(i);
      K(0, 0, t, i) = k(i);
    }
  auto rq = rope(tape, tape.constant(Q), 5).value();
  auto rk = rope(tape, tape.constant(K), 5).value();
  auto dot = [&](int64_t m, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += rq(0, 0, m, i) * rk(0, 0, n, i);
    return s;
  };
  for (int64_t m = 1; m < T; ++m)
    for (int64_t n = 1; n < T; ++n) CHECK(dot(m, n) == doctest::Approx(dot(m - 1, n - 1)).epsilon(1e-10));
  // ... and does vary with the offset m − n (the rotation is not trivial).
  CHECK(std::abs(dot(0, 0) - dot(3, 0)) > 1e-3);
}

TEST_CASE("pos::RoPE: table cache grows and is shared; float vs double; errors") {
  Rng rng(7);
  pos::RoPE::Module<float> rf("blocks.0.attn.rope", 16, rng);
  pos::RoPE::Module<double> rd("rope", 16, rng);
  Tape<float> tf;
  Tape<double> td;
  const Tensor<double> xs = randn({2, 2, 9, 16}, 8);
  auto xf = tf.leaf(xs.to<float>());
  auto xd = td.leaf(xs);
  auto yf = rf(tf, xf, 100);
  auto yd = rd(td, xd, 100);
  CHECK(rf.table.length() >= 109);
  const Tensor<float> cached = rf.table.cos;
  rf(tf, xf, 0);
  CHECK(rf.table.cos.shares_storage_with(cached));  // no recompute for shorter sequences
  tf.backward(sum(mul(yf, tf.constant(randn({2, 2, 9, 16}, 9).to<float>()))));
  td.backward(sum(mul(yd, td.constant(randn({2, 2, 9, 16}, 9)))));
  for (int64_t i = 0; i < xs.numel(); ++i) {
    CHECK(yf.value().data()[i] == doctest::Approx(yd.value().data()[i]).epsilon(1e-5).scale(1.0));
    CHECK(xf.grad().data()[i] == doctest::Approx(xd.grad().data()[i]).epsilon(1e-5).scale(1.0));
  }
  CHECK_THROWS_WITH_AS(rf(tf, tf.leaf(Tensor<float>::zeros({2, 9, 12}))),
                       doctest::Contains("RoPE 'blocks.0.attn.rope': input of shape [2, 9, 12], expected [..., T, 16]"),
                       Error);
  CHECK_THROWS_WITH_AS(pos::RoPE::Module<float>("r", 7), doctest::Contains("RoPE 'r': head size must be positive and even, got 7"), Error);
  autodiff::RopeTable<float> small;
  small.ensure(4, 16, 10000.0);
  CHECK_THROWS_WITH_AS(autodiff::rope(xf, small, 0), doctest::Contains("rope: positions [0, 9) exceed the table's 4"), Error);
}

TEST_CASE("pos::rope_heads: equals RoPE of split heads, values and gradients; gradcheck; errors") {
  // x [2, 5, 40]: columns 4..27 hold 3 heads of 8; the rest must get no gradient from it.
  autodiff::RopeTable<double> table;
  table.ensure(12, 8, 10000.0);
  auto x = make_inputs({randn({2, 5, 40}, 11)});
  const Tensor<double> w = randn({2, 3, 5, 8}, 12);
  Tape<double> fused, split;
  auto xf = fused.param(x[0]);
  auto yf = autodiff::rope_heads(xf, 4, 3, 8, table, 2);
  fused.backward(sum(mul(yf, fused.constant(w))));
  const Tensor<double> gf = x[0].grad.clone();
  x[0].zero_grad();
  auto xs = split.param(x[0]);
  auto ys = autodiff::rope(autodiff::split_heads(xs, 4, 3, 8), table, 2);
  split.backward(sum(mul(ys, split.constant(w))));
  REQUIRE(yf.shape() == ys.shape());
  for (int64_t i = 0; i < ys.value().numel(); ++i) CHECK(yf.value().data()[i] == doctest::Approx(ys.value().data()[i]));
  for (int64_t i = 0; i < gf.numel(); ++i) CHECK(gf.data()[i] == doctest::Approx(x[0].grad.data()[i]));
  CHECK(gf(0, 0, 0) == 0.0);   // column 0 is outside the heads
  CHECK(gf(1, 4, 39) == 0.0);  // so is column 39
  check_grad([&](Tape<double>& t) { return autodiff::rope_heads(t.param(x[0]), 4, 3, 8, table, 2); }, pointers(x));
  CHECK_THROWS_WITH_AS(autodiff::rope_heads(xf, 20, 3, 8, table), doctest::Contains("rope_heads: input [2, 5, 40] has no columns [20, 44)"), Error);
  CHECK_THROWS_WITH_AS(autodiff::rope_heads(xf, 0, 2, 8, table, 10), doctest::Contains("rope: positions [10, 15) exceed the table's 12"), Error);
}

TEST_CASE("pos::Learned: adds table rows at an offset; gradcheck; errors") {
  Rng rng(10);
  pos::LearnedOptions o;
  o.max_len = 8;
  pos::Learned::Module<double> lp("pos", 5, rng, o);
  CHECK(lp.weight.name == "pos.weight");
  CHECK(lp.weight.shape() == Shape{8, 5});
  auto x = make_inputs({randn({2, 3, 5}, 11)});
  std::vector<Parameter<double>*> ps{&x[0], &lp.weight};
  check_grad([&](Tape<double>& t) { return square(lp(t, t.param(x[0]), 4)); }, ps);
  check_grad([&](Tape<double>& t) { return square(lp(t, t.param(x[0]))); }, ps);
  Tape<double> t;
  auto y = lp(t, t.constant(x[0].value), 4).value();
  CHECK(y(1, 2, 3) == doctest::Approx(x[0].value(1, 2, 3) + lp.weight.value(6, 3)));
  CHECK_THROWS_WITH_AS(lp(t, t.constant(x[0].value), 6),
                       doctest::Contains("learned positions 'pos': positions [6, 9) exceed max_len 8"), Error);
  pos::None::Module<double> none("none", 5, rng);
  auto xv = t.constant(x[0].value);
  CHECK(none(t, xv).id == xv.id);
  static_assert(pos::is_policy_v<pos::RoPE> && pos::is_policy_v<pos::Learned> && !pos::is_policy_v<int>);
}

TEST_CASE("tokens::Registers and Sink: layout, discard, gradcheck through insert/discard") {
  Rng rng(12);
  tokens::Options o;
  o.count = 3;
  tokens::Registers::Module<double> reg("vit.registers", 4, rng, o);
  CHECK(reg.weight.name == "vit.registers.registers");
  CHECK(reg.weight.shape() == Shape{3, 4});
  CHECK(reg.extra() == 3);
  CHECK(reg.offset() == 0);
  const Tensor<double> xs = randn({2, 5, 4}, 13);
  Tape<double> t;
  auto y = reg.insert(t, t.constant(xs));
  REQUIRE(y.shape() == Shape{2, 8, 4});
  CHECK(y.value()(1, 4, 2) == xs(1, 4, 2));
  CHECK(y.value()(1, 6, 2) == reg.weight.value(1, 2));
  CHECK(y.value()(0, 5, 0) == reg.weight.value(0, 0));
  auto back = reg.discard(t, y);
  CHECK(back.shape() == Shape{2, 5, 4});
  CHECK(back.value()(1, 4, 3) == xs(1, 4, 3));

  tokens::Options pre = o;
  pre.placement = tokens::Placement::Prepend;
  tokens::Registers::Module<double> reg_p("r", 4, rng, pre);
  CHECK(reg_p.offset() == 3);
  auto yp = reg_p.insert(t, t.constant(xs));
  CHECK(yp.value()(0, 2, 1) == reg_p.weight.value(2, 1));
  CHECK(yp.value()(0, 3, 1) == xs(0, 0, 1));

  tokens::Sink::Module<double> sink("sink", 4, rng);
  CHECK(sink.weight.name == "sink.sink_token");
  CHECK(sink.extra() == 1);
  CHECK(sink.offset() == 1);
  auto ys = sink.insert(t, t.constant(xs));
  CHECK(ys.shape() == Shape{2, 6, 4});
  CHECK(ys.value()(1, 0, 3) == sink.weight.value(0, 3));
  CHECK(sink.discard(t, ys).value()(1, 0, 3) == xs(1, 0, 3));

  // Gradients reach the tokens through a mixing step (so the discarded outputs still depend on
  // them): mean over the sequence axis added back, then discard.
  auto x = make_inputs({xs});
  for (auto* m : {&reg, &reg_p}) {
    std::vector<Parameter<double>*> ps{&x[0], &m->weight};
    check_grad([&](Tape<double>& tp) {
      auto z = m->insert(tp, tp.param(x[0]));
      z = tanh(z + mean(z, 1, true) * 2.0);
      return m->discard(tp, z);
    }, ps);
  }
  std::vector<Parameter<double>*> ps{&x[0], &sink.weight};
  check_grad([&](Tape<double>& tp) {
    auto z = sink.insert(tp, tp.param(x[0]));
    z = tanh(z + mean(z, 1, true) * 2.0);
    return sink.discard(tp, z);
  }, ps);

  CHECK_THROWS_WITH_AS(reg.insert(t, t.constant(Tensor<double>::zeros({2, 5, 3}))),
                       doctest::Contains("registers 'vit.registers': input of shape [2, 5, 3], expected [B, T, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(reg.discard(t, t.constant(Tensor<double>::zeros({2, 3, 4}))),
                       doctest::Contains("registers 'vit.registers': output of shape [2, 3, 4] has no room"), Error);
  tokens::None::Module<double> none("none", 4, rng);
  auto xc = t.constant(xs);
  CHECK(none.insert(t, xc).id == xc.id);
  static_assert(tokens::is_policy_v<tokens::Sink> && !tokens::is_policy_v<int>);
}
