// Interventions on the probe path (nn/intervention.hpp): an attention layer with edits at every
// site equals a naive loop implementation of the same layer with the same edits done by hand,
// gradients through the edited layer pass gradcheck, whole-model edits equal the same change
// made in the weights, and bad requests are refused with the layer and the reason.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sinklab/autodiff/gradcheck.hpp"
#include "sinklab/nn/transformer.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using nn::Intervention;
using nn::Site;

namespace {

template <class M>
void randomise(M& m, uint64_t seed) {
  Rng rng(seed);
  m.parameters([&](Parameter<double>& p) {
    Tensor<double> r = rng.normal<double>(p.shape(), 0.0, 0.5);
    if (p.name.find("norm") != std::string::npos)
      for (int64_t i = 0; i < r.numel(); ++i) r.data()[i] += 1.0;
    p.value.copy_from(r);
  });
}

// The edits of one site as the naive reference applies them: x[0..n) of (b, head, token).
void edit_by_hand(const std::vector<Intervention>& ivs, Site site, int64_t b, int64_t head, int64_t token, double* x,
                  int64_t n) {
  for (const Intervention& iv : ivs)
    if (iv.site == site && iv.head == head && iv.token == token && (iv.batch < 0 || iv.batch == b))
      for (int64_t c = 0; c < n; ++c) x[c] = iv.scale * x[c] + (iv.shift.empty() ? 0.0 : iv.shift[c]);
}

// One attention layer (no RoPE, no QK-norm) in loops, with the edits applied by hand.
template <class Gate, class M>
Tensor<double> naive_layer(M& m, const Tensor<double>& x, const std::vector<Intervention>& ivs) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = m.H, Hkv = m.Hkv, dh = m.dh, group = H / Hkv;
  const int64_t N = (H + 2 * Hkv) * dh;
  const double* W = m.w_qkv.value.data();
  std::vector<double> qkv(static_cast<std::size_t>(B * T * N), 0.0);
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < D; ++i) qkv[bt * N + n] += x.data()[bt * D + i] * W[i * N + n];
  auto q = [&](int64_t b, int64_t h, int64_t t) { return &qkv[(b * T + t) * N + h * dh]; };
  auto k = [&](int64_t b, int64_t hk, int64_t t) { return &qkv[(b * T + t) * N + (H + hk) * dh]; };
  auto v = [&](int64_t b, int64_t hk, int64_t t) { return &qkv[(b * T + t) * N + (H + Hkv + hk) * dh]; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hk = 0; hk < Hkv; ++hk)
      for (int64_t t = 0; t < T; ++t) edit_by_hand(ivs, Site::Value, b, hk, t, v(b, hk, t), dh);

  constexpr bool on_values = Gate::placement == gate::Placement::OnValues;
  const int64_t gh = on_values ? Hkv : H, G = Gate::channels(dh);
  // gate values [B, gh, T, G] from the input or from the (edited) values
  std::vector<double> gv(static_cast<std::size_t>(B * gh * T * G));
  const int64_t rows = Gate::source == gate::Source::FromInput ? D : Hkv * dh;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t col = 0; col < gh * G; ++col) {
        double l = m.b_gate.value.defined() ? m.b_gate.value.data()[col] : 0.0;
        for (int64_t i = 0; i < rows; ++i) {
          const double src = Gate::source == gate::Source::FromInput ? x.data()[(b * T + t) * D + i]
                                                                      : v(b, i / dh, t)[i % dh];
          l += src * m.w_gate.value.data()[i * gh * G + col];
        }
        gv[((b * gh + col / G) * T + t) * G + col % G] = 1.0 / (1.0 + std::exp(-l));
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < gh; ++h)
      for (int64_t t = 0; t < T; ++t) edit_by_hand(ivs, Site::Gate, b, h, t, &gv[((b * gh + h) * T + t) * G], G);
  auto gate_of = [&](int64_t b, int64_t h, int64_t t, int64_t c) { return gv[((b * gh + h) * T + t) * G + (G == 1 ? 0 : c)]; };

  std::vector<double> o(static_cast<std::size_t>(B * T * H * dh), 0.0);  // token-major, merged heads
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> a(static_cast<std::size_t>(T), 0.0);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t c = 0; c < dh; ++c) s += q(b, h, i)[c] * k(b, hk, j)[c];
          a[j] = s / std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, a[j]);
        }
        for (int64_t j = 0; j <= i; ++j) z += (a[j] = std::exp(a[j] - mx));
        for (int64_t j = 0; j <= i; ++j) a[j] /= z;
        edit_by_hand(ivs, Site::AttentionRow, b, h, i, a.data(), T);
        double* out = &o[(b * T + i) * H * dh + h * dh];
        for (int64_t j = 0; j < T; ++j)
          for (int64_t c = 0; c < dh; ++c)
            out[c] += a[j] * v(b, hk, j)[c] * (on_values ? gate_of(b, hk, j, c) : 1.0);
        if (!on_values)
          for (int64_t c = 0; c < dh; ++c) out[c] *= gate_of(b, h, i, c);
        edit_by_hand(ivs, Site::HeadOutput, b, h, i, out, dh);
      }
    }
  Tensor<double> y = Tensor<double>::zeros({B, T, D});
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t n = 0; n < H * dh; ++n) y.data()[bt * D + d] += o[bt * H * dh + n] * m.w_o.value.data()[n * D + d];
  return y;
}

template <class A>
void check_layer_against_loops(uint64_t seed) {
  using Gate = typename A::gate_type;
  const attn::Config cfg{.d_model = 8, .heads = 4, .kv_heads = 2, .head_dim = 3};
  Rng rng(seed);
  typename A::template Module<double> layer("layers.0.attn", cfg, rng);
  randomise(layer, seed + 1);
  const Tensor<double> x = Rng(seed + 2).normal<double>({2, 5, 8});
  const int64_t G = Gate::channels(3);
  const std::vector<Intervention> ivs = {
      Intervention::scaled(Site::HeadOutput, 0, 1, 3, 0.5),
      Intervention::replace(Site::HeadOutput, 0, 3, 2, {0.3, -0.2, 1.0}).in_batch_row(1),
      Intervention::replace(Site::Value, 0, 0, 1, {1.5, -0.5, 0.25}),
      Intervention::zero(Site::Value, 0, 1, 0).in_batch_row(0),
      Intervention::zero(Site::Gate, 0, 1, 2),
      Intervention::replace(Site::Gate, 0, 0, 4, std::vector<double>(static_cast<std::size_t>(G), 0.9)),
      Intervention::replace(Site::AttentionRow, 0, 2, 4, {1.0, 0.0, 0.0, 0.0, 0.0}),  // all on key 0
      Intervention::scaled(Site::AttentionRow, 0, 0, 3, 2.0),
      Intervention::zero(Site::AttentionRow, 0, 1, 1).in_batch_row(1),
  };
  AttentionRecorder<double> rec;
  attn::Extras<double> ex;
  ex.probe = &rec;
  ex.interventions = &ivs;
  Tape<double> tape;
  const Tensor<double> got = layer.forward(tape, tape.constant(x), ex).value();
  const Tensor<double> want = naive_layer<Gate>(layer, x, ivs);
  const Tensor<double> plain = naive_layer<Gate>(layer, x, {});
  double diff = 0, changed = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.data()[i] - want.data()[i]));
    changed = std::max(changed, std::abs(plain.data()[i] - want.data()[i]));
  }
  CHECK(changed > 0.05);  // the edits matter
  CHECK(diff < 1e-12);
  // The recorder holds the edited weights and gate values.
  auto at = [](const Tensor<double>& t, int64_t b, int64_t h, int64_t i, int64_t j) {
    return t.contiguous().data()[((b * t.size(1) + h) * t.size(2) + i) * t.size(3) + j];
  };
  CHECK(at(rec.weights, 0, 2, 4, 0) == 1.0);
  CHECK(at(rec.weights, 1, 1, 1, 0) == 0.0);
  CHECK(at(rec.gate_values, 0, 1, 2, 0) == 0.0);

  // Gradients through every edit: input and all parameters.
  auto in = make_inputs({x});
  auto params = nn::parameter_list<double>(layer);
  params.push_back(&in[0]);
  // The recorder outlives each tape: the backward writes the recorded gradients into it.
  AttentionRecorder<double> rc;
  attn::Extras<double> e;
  e.probe = &rc;
  e.interventions = &ivs;
  const auto r = gradcheck([&](Tape<double>& t) { return layer.forward(t, t.param(in[0]), e); }, params);
  INFO(r);
  CHECK(r.ok);
}

using RMS = nn::PreNorm<norm::RMS>;
using Vanilla = nn::Transformer<RMS, attn::Attention<>, ffn::SwiGLU>;

nn::ModelConfig small() {
  nn::ModelConfig c;
  c.vocab = 11;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  return c;
}

const Tensor<int32_t> kIds = Tensor<int32_t>::from({2, 6}, {1, 4, 9, 2, 0, 3, 3, 10, 7, 5, 6, 8});
const Tensor<int32_t> kTargets = Tensor<int32_t>::from({2, 6}, {4, 9, 2, 0, 3, 5, 10, 7, 5, 6, 8, 1});

template <class M>
double loss_of(M& m, nn::ModelProbe<double>* probe = nullptr) {
  Tape<double> tape;
  return m.loss(tape, kIds, kTargets, probe).value().data()[0];
}

}  // namespace

TEST_CASE("an attention layer with edits at every site equals the same edits made by hand in loops") {
  SUBCASE("G1: gate from the input, per channel, on the output") {
    check_layer_against_loops<attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>>(1);
  }
  SUBCASE("VGA: gate from the values, per head, on the values (the gate reads the edited value)") {
    check_layer_against_loops<attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>>>(2);
  }
}

TEST_CASE("whole-model interventions equal the same change made in the weights") {
  Rng rng(3);
  Vanilla::Module<double> m("", small(), rng);
  randomise(m, 4);
  const double base = loss_of(m);
  const int64_t dh = 4, layer = 1, head = 2, kv_head = 1;
  auto& attn = m.layers[layer].attn;

  SUBCASE("a head's output zeroed at every token = its rows of W_O zeroed") {
    for (bool attention : {true, false}) {  // the probe's materialised path and the fused one
      nn::ModelProbe<double> pr;
      pr.attention = attention;
      for (int64_t t = 0; t < 6; ++t) pr.interventions.push_back(Intervention::zero(Site::HeadOutput, layer, head, t));
      const double edited = loss_of(m, &pr);
      const Tensor<double> saved = attn.w_o.value.clone();
      attn.w_o.value.slice(0, head * dh, (head + 1) * dh).copy_from(Tensor<double>::zeros({dh, 16}));
      const double by_hand = loss_of(m);
      attn.w_o.value.copy_from(saved);
      CHECK(std::abs(edited - base) > 1e-4);
      CHECK(edited == doctest::Approx(by_hand).epsilon(1e-12));
    }
  }
  SUBCASE("a key/value head's values scaled at every token = its columns of W_qkv scaled") {
    nn::ModelProbe<double> pr;
    for (int64_t t = 0; t < 6; ++t) pr.interventions.push_back(Intervention::scaled(Site::Value, layer, kv_head, t, 0.25));
    const double edited = loss_of(m, &pr);
    const Tensor<double> saved = attn.w_qkv.value.clone();
    const int64_t c0 = (4 + 2 + kv_head) * dh;
    Tensor<double> cols = attn.w_qkv.value.slice(1, c0, c0 + dh).contiguous();
    for (int64_t i = 0; i < cols.numel(); ++i) cols.data()[i] *= 0.25;
    attn.w_qkv.value.slice(1, c0, c0 + dh).copy_from(cols);
    const double by_hand = loss_of(m);
    attn.w_qkv.value.copy_from(saved);
    CHECK(edited == doctest::Approx(by_hand).epsilon(1e-12));
  }
  SUBCASE("attention rows replaced by themselves change nothing; the probe records the pass") {
    nn::ModelProbe<double> pr;
    const double plain = loss_of(m, &pr);
    const Tensor<double> row = pr.layers[0].attn.weights.slice(0, 0, 1).slice(1, 1, 2).slice(2, 3, 4).contiguous();
    nn::ModelProbe<double> pr2;
    pr2.interventions = {Intervention::replace(Site::AttentionRow, 0, 1, 3, row.to_vector()).in_batch_row(0)};
    CHECK(loss_of(m, &pr2) == doctest::Approx(plain).epsilon(1e-12));
    CHECK(plain == doctest::Approx(base).epsilon(1e-12));
  }
}

TEST_CASE("interventions that cannot apply are refused with the layer and the reason") {
  Rng rng(5);
  Vanilla::Module<double> m("", small(), rng);
  nn::ModelProbe<double> pr;
  auto refused = [&](Intervention iv, const char* what) {
    pr.interventions = {iv};
    CHECK_THROWS_WITH_AS(loss_of(m, &pr), doctest::Contains(what), Error);
  };
  refused(Intervention::zero(Site::HeadOutput, 2, 0, 0), "the model has 2 layers");
  refused(Intervention::zero(Site::HeadOutput, 1, 4, 0), "layers.1.attn: intervention layer 1 head_output head 4");
  refused(Intervention::zero(Site::HeadOutput, 1, 4, 0), "head 4 out of range (4 query heads)");
  refused(Intervention::zero(Site::Value, 0, 2, 0), "head 2 out of range (2 key/value heads)");
  refused(Intervention::zero(Site::Value, 0, 0, 6), "token 6 out of range (6 tokens)");
  refused(Intervention::zero(Site::Value, 0, 0, 0).in_batch_row(2), "batch row 2 out of range (2 rows)");
  refused(Intervention::replace(Site::Value, 0, 0, 0, {1.0, 2.0}), "2 replacement values, expected 4");
  refused(Intervention::zero(Site::Gate, 0, 0, 0), "this attention has no gate");
  pr.attention = false;
  refused(Intervention::zero(Site::AttentionRow, 0, 0, 0), "ModelProbe::attention = true");
}
