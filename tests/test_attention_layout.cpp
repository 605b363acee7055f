// Heads read in place: the fused kernels take q, k, v and dout as strided views (a projection's
// token-major [B, T, heads·d] layout) and write the output into a caller's view, with the results
// of contiguous head-major inputs; attn::Attention reads q, k, v straight out of its projection
// when nothing sits in between, with the composed path's values and gradients.
#include <doctest/doctest.h>

#include "sinklab/nn/attention.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using namespace sinklab::kernels::cpu;

namespace {

// Heads [h0, h0 + n) of a token-major [B, L, heads·d] tensor as a [B, n, L, d] view.
template <class T>
Tensor<T> heads_of(const Tensor<T>& t, int64_t d, int64_t h0, int64_t n) {
  return t.view({t.size(0), t.size(1), t.size(2) / d, d}).slice(2, h0, h0 + n).transpose(1, 2);
}

template <class T>
void check_equal(const Tensor<T>& a, const Tensor<T>& b, const char* what) {
  INFO(what);
  REQUIRE(a.shape() == b.shape());
  const Tensor<T> ca = a.contiguous(), cb = b.contiguous();
  int64_t bad = 0;
  for (int64_t i = 0; i < ca.numel(); ++i) bad += ca.data()[i] != cb.data()[i];
  CHECK(bad == 0);
}

// The same problem with heads in a projection [B, T, (H + 2·Hkv)·d] and as contiguous copies:
// identical outputs and gradients (the kernels do the same arithmetic in the same order).
template <class T, class Score, class Mask>
void check_strided(const Score& score, Mask mask, int64_t H, int64_t Hkv, int64_t d, int64_t L, uint64_t seed,
                   int64_t kv_len1 = -1) {
  const int64_t B = 2, N = (H + 2 * Hkv) * d;
  Rng rng(seed);
  const Tensor<T> qkv = rng.normal<T>({B, L, N}, 0.0, 1.0);
  const Tensor<T> dout_tok = rng.normal<T>({B, L, H * d}, 0.0, 1.0);
  const Tensor<T> q = heads_of(qkv, d, 0, H), k = heads_of(qkv, d, H, Hkv), v = heads_of(qkv, d, H + Hkv, Hkv);
  const Tensor<T> dout = heads_of(dout_tok, d, 0, H);
  REQUIRE_FALSE(q.is_contiguous());
  score::params_t<Score, T> params;
  if constexpr (Score::has_sink) params.sink_logit = rng.normal<T>({H}, 0.0, 1.0);
  AttentionOptions opt;
  opt.kv_lengths = Tensor<int64_t>::from({B}, {L, kv_len1 >= 0 ? kv_len1 : L - 3});

  const auto ref = attention_fused_forward(score, mask, q.contiguous(), k.contiguous(), v.contiguous(), params, opt);
  Tensor<T> out_tok = Tensor<T>::full({B, L, H * d}, T(7));  // every element must be written
  const auto fwd = attention_fused_forward(score, mask, q, k, v, params, opt, heads_of(out_tok, d, 0, H));
  check_equal(fwd.out, ref.out, "out");
  check_equal(out_tok, ref.out.transpose(1, 2).contiguous().view({B, L, H * d}), "out in the caller's view");
  if (ref.lse.defined()) check_equal(fwd.lse, ref.lse, "lse");

  const auto gref = attention_fused_backward(score, mask, q.contiguous(), k.contiguous(), v.contiguous(), params, ref,
                                             dout.contiguous(), opt);
  const auto g = attention_fused_backward(score, mask, q, k, v, params, fwd, dout, opt);
  check_equal(g.dq, gref.dq, "dq");
  check_equal(g.dk, gref.dk, "dk");
  check_equal(g.dv, gref.dv, "dv");
  if constexpr (Score::has_sink) check_equal(g.dscore.sink_logit, gref.dscore.sink_logit, "d sink");
}

}  // namespace

TEST_CASE("fused attention: heads read in place and written into a view equal contiguous heads") {
  SUBCASE("softmax, d a whole number of vectors (transposed forward), GQA, causal") {
    check_strided<float>(score::Softmax{}, mask::Causal{}, 4, 2, 32, 70, 1);
    check_strided<double>(score::Softmax{}, mask::Causal{}, 4, 2, 16, 70, 2);
  }
  SUBCASE("softmax with a sink, bidirectional, d not a whole number of vectors") {
    check_strided<float>(score::SoftmaxSink{}, mask::Bidirectional{}, 2, 2, 12, 40, 3);
  }
  SUBCASE("clipped softmax and sigmoid scores (row-wise forward)") {
    check_strided<float>(score::ClippedSoftmax{1.05, -0.1}, mask::Causal{}, 2, 1, 32, 50, 4);
    check_strided<float>(score::Sigmoid{}, mask::Causal{}, 2, 2, 32, 50, 5);
    check_strided<double>(score::Sigmoid{}, mask::Bidirectional{}, 2, 1, 8, 30, 10);
  }
  SUBCASE("one head; a batch entry with no valid key") {
    check_strided<float>(score::Softmax{}, mask::Causal{}, 1, 1, 32, 45, 11, 0);
    check_strided<float>(score::ClippedSoftmax{1.05, -0.1}, mask::Bidirectional{}, 1, 1, 16, 45, 12, 0);
  }
}

TEST_CASE("fused attention: an output view of the wrong shape or layout is refused") {
  Rng rng(6);
  const Tensor<float> q = rng.normal<float>({1, 2, 8, 16}, 0.0, 1.0);
  Tensor<float> wrong = Tensor<float>::zeros({1, 2, 9, 16});
  CHECK_THROWS_WITH_AS(attention_fused_forward(score::Softmax{}, mask::Causal{}, q, q, q, policy::NoParams<float>{}, {},
                                               wrong),
                       doctest::Contains("out of shape"), sinklab::Error);
  Tensor<float> cols = Tensor<float>::zeros({1, 2, 16, 8}).transpose(2, 3);  // d not unit-stride
  CHECK_THROWS_WITH_AS(attention_fused_forward(score::Softmax{}, mask::Causal{}, q, q, q, policy::NoParams<float>{}, {},
                                               cols),
                       doctest::Contains("unit stride"), sinklab::Error);
  Tensor<float> in_q = q.slice(3, 0, 16);  // the output may not overwrite an input
  CHECK_THROWS_WITH_AS(attention_fused_forward(score::Softmax{}, mask::Causal{}, q, q, q, policy::NoParams<float>{}, {},
                                               in_q),
                       doctest::Contains("must not share storage"), sinklab::Error);
}

namespace {

// y and every gradient of the layer with q, k, v read from the projection (no extras) and on the
// composed path (attn::Path::Composed: split_heads, RoPE and merge_heads).
template <class A>
void check_layer_paths(const attn::Config& cfg, uint64_t seed, bool padded = false) {
  Rng rng(seed);
  typename A::template Module<float> layer("attn", cfg, rng);
  Rng init(seed + 1);
  layer.parameters([&](Parameter<float>& p) { p.value.copy_from(init.normal<float>(p.shape(), 0.0, 0.3)); });
  const Tensor<float> x0 = Rng(seed + 2).normal<float>({2, 37, cfg.d_model}, 0.0, 1.0);
  auto run = [&](bool composed) {
    nn::zero_grad<float>(layer);
    Tape<float> t;
    auto x = t.leaf(x0);
    attn::Extras<float> ex;
    const Tensor<int64_t> lengths = Tensor<int64_t>::from({2}, {37, 20});
    if (padded) ex.kv_lengths = &lengths;
    auto y = composed ? layer.attend(t, x, layer.project(t, x, ex, attn::Path::Composed), ex, attn::Path::Composed)
                      : layer.forward(t, x, ex);
    t.backward(sum(square(y)));
    std::vector<Tensor<float>> out{y.value().clone(), x.grad().clone()};
    layer.parameters([&](Parameter<float>& p) { out.push_back(p.grad.clone()); });
    return out;
  };
  const auto fused = run(false), composed = run(true);
  REQUIRE(fused.size() == composed.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    INFO("tensor " << i << " (0: y, 1: dx, then parameter gradients in visiting order)");
    double num = 0, den = 0;
    for (int64_t j = 0; j < fused[i].numel(); ++j) {
      const double a = fused[i].data()[j], b = composed[i].data()[j];
      num += (a - b) * (a - b);
      den += b * b;
    }
    CHECK(std::sqrt(num / std::max(den, 1e-30)) < 1e-5);
  }
}

}  // namespace

TEST_CASE("attention layer: q, k, v read in place from the projection match the composed path") {
  SUBCASE("RoPE, GQA, sink") {
    check_layer_paths<attn::Attention<score::SoftmaxSink>>(
        attn::Config{.d_model = 64, .heads = 4, .kv_heads = 2, .head_dim = 32, .rope = true}, 7);
  }
  SUBCASE("no RoPE: q and k read in place too; padded keys") {
    check_layer_paths<attn::Attention<>>(attn::Config{.d_model = 64, .heads = 2}, 8);
    check_layer_paths<attn::Attention<>>(attn::Config{.d_model = 64, .heads = 2, .rope = true}, 10, true);
  }
  SUBCASE("bidirectional, clipped softmax, odd head size") {
    check_layer_paths<attn::Attention<score::ClippedSoftmax, gate::None, value::Identity, mask::Bidirectional>>(
        attn::Config{.d_model = 30, .heads = 3, .rope = true}, 9);
  }
}
