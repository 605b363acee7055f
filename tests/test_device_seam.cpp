// The device seam: every differentiable op is written once for any Device and reaches its loops
// only through kernels::backend<Device> (and its buffers through memory<Device>). The test adds a
// second device whose memory is the host's and whose backend is the CPU's with every kernel
// wrapped in a counter, and checks that
//   - each op's forward and its backward call the test device's kernels (an op that ran the CPU
//     loops directly, or looped over the data itself, would not);
//   - one graph through every op family gives the cpu device's values and gradients bit for bit.
#include <doctest/doctest.h>

#include "counted_device.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/attention.hpp"
#include "sinklab/autodiff/ops/clip.hpp"
#include "sinklab/autodiff/ops/glu.hpp"
#include "sinklab/autodiff/ops/heads.hpp"
#include "sinklab/autodiff/ops/mix.hpp"
#include "sinklab/autodiff/ops/norm.hpp"
#include "sinklab/autodiff/ops/rope.hpp"
#include "sinklab/core/rng.hpp"

namespace {
using namespace sinklab;
using namespace sinklab::autodiff;

constexpr int64_t B = 2, L = 12, V = 17, Dm = 16, H = 2, Hkv = 1, dh = 8, F = 24;

struct Inputs {
  std::vector<int32_t> ids, targets;
  std::map<std::string, std::pair<Shape, std::vector<float>>> params;
};

Inputs make_inputs() {
  Rng rng(7);
  Inputs in;
  for (int64_t i = 0; i < B * L; ++i) {
    in.ids.push_back(static_cast<int32_t>(rng.randint(0, V)));
    in.targets.push_back(i % 5 == 4 ? -100 : static_cast<int32_t>(rng.randint(0, V)));
  }
  auto add = [&](const char* name, Shape s, float scale, float mean = 0.0f) {
    std::vector<float> v(static_cast<std::size_t>(s.numel()));
    for (float& x : v) x = mean + scale * static_cast<float>(rng.normal());
    in.params[name] = {s, v};
  };
  add("embed", {V, Dm}, 0.5f);
  add("norm", {Dm}, 0.1f, 1.0f);
  add("w_qkv", {Dm, (H + 2 * Hkv) * dh}, 0.3f);
  add("w_gate", {Dm, H * dh}, 0.3f);
  add("sink", {H}, 0.5f);
  add("theta", {Hkv}, 0.2f);
  add("w_o", {H * dh, Dm}, 0.3f);
  add("lambda1", {H}, 0.2f, 0.5f);
  add("lambda2", {H}, 0.2f, 0.5f);
  add("w_up", {Dm, 2 * F}, 0.3f);
  add("w_down", {F, Dm}, 0.3f);
  add("ln_gain", {Dm}, 0.1f, 1.0f);
  add("ln_bias", {Dm}, 0.1f);
  add("dyt_alpha", {1}, 0.1f, 0.5f);
  add("w_head", {Dm, V}, 0.3f);
  return in;
}

struct Result {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;
  std::vector<float> probe_weights;
};

// One graph through every op family, written once for any device.
template <class Dev>
Result run(const Inputs& in) {
  using Tv = Tensor<float, Dev>;
  Tape<float, Dev> tape;
  std::map<std::string, Parameter<float, Dev>> ps;
  for (const auto& [name, sv] : in.params) ps.emplace(name, Parameter<float, Dev>(name, Tv::from(sv.first, sv.second)));
  auto p = [&](const char* name) { return tape.param(ps.at(name)); };
  const Tensor<int32_t, Dev> ids = Tensor<int32_t, Dev>::from({B, L}, in.ids);
  const Tensor<int32_t, Dev> targets = Tensor<int32_t, Dev>::from({B, L}, in.targets);

  Var<float, Dev> x = embedding(p("embed"), ids);                  // [B, L, Dm]
  Var<float, Dev> h = rms_norm(x, p("norm"));
  Var<float, Dev> qkv = matmul(h, p("w_qkv"));                     // [B, L, (H + 2Hkv)·dh]
  RopeTable<float, Dev> rope_table;
  rope_table.ensure(L, dh, 10000.0);

  // The fused attention straight from the projection: a learnable sink, RoPE on the split.
  AttentionCall<score::SoftmaxSink, gate::None, value::Identity, mask::Causal, float, Dev> fused;
  fused.score_params.sink_logit = ps.at("sink").value;
  fused.score_vars.push_back(p("sink"));
  Var<float, Dev> a1 = attention_from_projection(fused, qkv, H, Hkv, dh, &rope_table);  // [B, L, H·dh]

  // The materialised path with a recorder: G1 gate on the output, V-scale on the values.
  using G1 = gate::FromInput<gate::per_channel, gate::on_output>;
  AttentionCall<score::Softmax, G1, value::VScale, mask::Causal, float, Dev> recorded;
  recorded.value_params.theta = ps.at("theta").value;
  recorded.value_vars.push_back(p("theta"));
  AttentionRecorder<float, Dev> rec;
  recorded.recorder = &rec;
  Var<float, Dev> q = rope_heads(qkv, 0, H, dh, rope_table);
  Var<float, Dev> k = rope(split_heads(qkv, H * dh, Hkv, dh), rope_table);
  Var<float, Dev> v = split_heads(qkv, (H + Hkv) * dh, Hkv, dh);
  Var<float, Dev> g = split_heads(matmul(h, p("w_gate")), 0, H, dh);
  Var<float, Dev> o2 = attention(recorded, q, k, v, g);          // [B, H, L, dh]

  // Anchor mixing of the two heads' outputs, per head.
  Var<float, Dev> a1h = split_heads(a1, 0, H, dh);
  Var<float, Dev> mixed = mix_pair(a1h, o2, p("lambda1"), p("lambda2"), MixGranularity::Head);
  Var<float, Dev> y = x + matmul(merge_heads(mixed), p("w_o"));

  // The feed-forward, the other norms, elementwise ops and reductions.
  Var<float, Dev> f = glu_mlp<act::SiLU>(layer_norm(y, p("ln_gain"), p("ln_bias")), p("w_up"), p("w_down"));
  y = clip(y + f, 100.0);
  Var<float, Dev> d = dyt(y, p("dyt_alpha"), p("norm"), p("ln_bias"));
  Var<float, Dev> extra = mean(square(tanh(d))) * 0.01 + mean(max(d, -1)) * 0.01;
  Var<float, Dev> logits = matmul(d, p("w_head"));
  Var<float, Dev> loss = cross_entropy(logits, targets) + extra + mean(softmax(logits)) +
                         sum(pow(sigmoid(exp(log_softmax(logits))), 2.0f)) * 1e-3;
  tape.backward(loss);

  Result r;
  r.loss = loss.item();
  for (auto& [name, param] : ps) r.grads[name] = param.grad.to_vector();
  r.probe_weights = rec.weights.to_vector();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("device seam: every op runs on a second device through kernels::backend<Device>") {
  const Inputs in = make_inputs();
  const Result on_cpu = run<cpu>(in);
  CHECK(kernel_calls().empty());  // the cpu device never touches the test device's kernels

  const Result on_test = run<test_device>(in);
  for (const char* k :
       {"add_inplace", "binary", "unary", "unary_grad", "broadcast_binary", "sum_to", "embedding_forward",
        "embedding_backward", "gemm_at", "glu_up", "glu_hidden_grad", "rms_forward", "rms_backward",
        "layer_norm_forward", "dyt_forward", "rope_gather", "rope_gather_grad", "rope_rotate", "split_heads",
        "split_heads_grad", "merge_heads", "merge_heads_grad", "mix_pair_forward", "mix_pair_backward",
        "attention_fused_forward", "attention_fused_backward", "attention_reference_forward",
        "attention_reference_backward", "gate_forward", "gate_backward", "value_transform_forward",
        "value_transform_backward", "heads_grad_to_projection", "softmax_rows", "log_softmax_rows",
        "cross_entropy_forward", "cross_entropy_backward", "sum_all", "sum_axis", "max_axis", "max_axis_backward",
        "pow_forward"}) {
    INFO("kernel ", std::string(k));
    CHECK(kernel_calls()[k] > 0);
  }

  CHECK(std::isfinite(on_cpu.loss));
  CHECK(std::memcmp(&on_cpu.loss, &on_test.loss, sizeof(float)) == 0);
  CHECK(!on_cpu.probe_weights.empty());
  CHECK(same_bits(on_cpu.probe_weights, on_test.probe_weights));
  for (const auto& [name, grad] : on_cpu.grads) {
    INFO("gradient of ", name);
    double norm = 0;
    for (float gv : grad) norm += static_cast<double>(gv) * gv;
    CHECK(norm > 0);  // every parameter is reached
    CHECK(same_bits(grad, on_test.grads.at(name)));
  }
}

namespace {
using Dv = test_device;
using Vt = Var<float, Dv>;
using Tt = Tensor<float, Dv>;

// Runs op on leaves of the given shapes (values mean + 0.5·N(0, 1)) and checks that its forward
// and its backward each call the device: inputs and the seed are made before counting starts.
void check_dispatch(const char* name, std::vector<Shape> shapes, const std::function<Vt(std::vector<Vt>&)>& op,
                    float mean = 0.0f) {
  static Rng rng(11);
  Tape<float, Dv> tape;
  std::vector<Vt> in;
  for (const Shape& s : shapes) {
    std::vector<float> v(static_cast<std::size_t>(s.numel()));
    for (float& x : v) x = mean + 0.5f * static_cast<float>(rng.normal());
    in.push_back(tape.leaf(Tt::from(s, v)));
  }
  kernel_calls().clear();
  const Vt y = op(in);
  const int forward = total_calls();
  const Tt seed = Tt::ones(y.shape());
  kernel_calls().clear();
  tape.backward(y, seed);
  const int backward = total_calls();
  INFO("op ", std::string(name));
  CHECK(forward > 0);
  CHECK(backward > 0);
  for (const Vt& v : in) CHECK(v.grad().defined());
}
}  // namespace

TEST_CASE("device seam: each op's forward and backward run on the device's kernels") {
  using V = std::vector<Vt>;
  const Shape x3{2, 3, 4}, row{4};
  check_dispatch("exp", {x3}, [](V& v) { return exp(v[0]); });
  check_dispatch("log", {x3}, [](V& v) { return log(v[0]); }, 3.0f);
  check_dispatch("tanh", {x3}, [](V& v) { return tanh(v[0]); });
  check_dispatch("sigmoid", {x3}, [](V& v) { return sigmoid(v[0]); });
  check_dispatch("silu", {x3}, [](V& v) { return silu(v[0]); });
  check_dispatch("gelu", {x3}, [](V& v) { return gelu(v[0]); });
  check_dispatch("relu", {x3}, [](V& v) { return relu(v[0]); });
  check_dispatch("square", {x3}, [](V& v) { return square(v[0]); });
  check_dispatch("sqrt", {x3}, [](V& v) { return sqrt(v[0]); }, 3.0f);
  check_dispatch("add", {x3, row}, [](V& v) { return v[0] + v[1]; });
  check_dispatch("sub", {x3, row}, [](V& v) { return v[0] - v[1]; });
  check_dispatch("mul", {x3, row}, [](V& v) { return v[0] * v[1]; });
  check_dispatch("div", {x3, row}, [](V& v) { return v[0] / v[1]; }, 3.0f);
  check_dispatch("affine", {x3}, [](V& v) { return v[0] * 2.0 + 1.0; });
  check_dispatch("pow", {x3}, [](V& v) { return pow(v[0], 3.0f); });
  check_dispatch("sum(axis)", {x3}, [](V& v) { return sum(v[0], 1); });
  check_dispatch("mean(axis)", {x3}, [](V& v) { return mean(v[0], 1); });
  check_dispatch("sum", {x3}, [](V& v) { return sum(v[0]); });
  check_dispatch("mean", {x3}, [](V& v) { return mean(v[0]); });
  check_dispatch("max", {x3}, [](V& v) { return max(v[0], 1); });
  check_dispatch("softmax", {x3}, [](V& v) { return softmax(v[0]); });
  check_dispatch("log_softmax", {x3}, [](V& v) { return log_softmax(v[0]); });
  const auto targets = Tensor<int32_t, Dv>::from({2, 3}, {0, 3, -100, 1, 2, 3});
  check_dispatch("cross_entropy", {x3}, [&](V& v) { return cross_entropy(v[0], targets); });
  check_dispatch("matmul", {x3, {4, 5}}, [](V& v) { return matmul(v[0], v[1]); });
  check_dispatch("matmul (batched)", {x3, {2, 4, 5}}, [](V& v) { return matmul(v[0], v[1]); });
  check_dispatch("transpose", {x3}, [](V& v) { return transpose(v[0], 0, 2); });
  check_dispatch("slice", {x3}, [](V& v) { return slice(v[0], 2, 1, 3); });
  check_dispatch("concat", {x3, {2, 1, 4}}, [](V& v) { return concat<float, Dv>({v[0], v[1]}, 1); });
  const auto ids = Tensor<int32_t, Dv>::from({2, 3}, {0, 6, 2, 2, 5, 1});
  check_dispatch("embedding", {{7, 4}}, [&](V& v) { return embedding(v[0], ids); });
  check_dispatch("repeat_batch", {{3, 4}}, [](V& v) { return repeat_batch(v[0], 2); });
  check_dispatch("split_heads", {{2, 5, 12}}, [](V& v) { return split_heads(v[0], 4, 2, 4); });
  check_dispatch("merge_heads", {{2, 2, 5, 4}}, [](V& v) { return merge_heads(v[0]); });
  RopeTable<float, Dv> table;
  table.ensure(6, 4, 10000.0);
  check_dispatch("rope", {{2, 2, 6, 4}}, [&](V& v) { return rope(v[0], table); });
  check_dispatch("rope_heads", {{2, 6, 12}}, [&](V& v) { return rope_heads(v[0], 0, 2, 4, table); });
  check_dispatch("rms_norm", {x3, row}, [](V& v) { return rms_norm(v[0], v[1]); }, 1.0f);
  check_dispatch("pre_affine_rms_norm", {x3, row, row}, [](V& v) { return pre_affine_rms_norm(v[0], v[1], v[2]); },
                 1.0f);
  check_dispatch("layer_norm", {x3, row, row}, [](V& v) { return layer_norm(v[0], v[1], v[2]); }, 1.0f);
  check_dispatch("dyt", {x3, {1}, row, row}, [](V& v) { return dyt(v[0], v[1], v[2], v[3]); }, 1.0f);
  check_dispatch("act_mul", {x3, x3}, [](V& v) { return act_mul<act::SiLU>(v[0], v[1]); });
  check_dispatch("act_mul_halves", {x3}, [](V& v) { return act_mul_halves<act::SiLU>(v[0]); });
  check_dispatch("glu_mlp", {x3, {4, 6}, {3, 4}}, [](V& v) { return glu_mlp<act::SiLU>(v[0], v[1], v[2]); });
  check_dispatch("clip", {x3}, [](V& v) { return clip(v[0], 0.5); });
  check_dispatch("mix_pair", {{2, 2, 3, 4}, {2, 2, 3, 4}, {2}, {2}},
                 [](V& v) { return mix_pair(v[0], v[1], v[2], v[3], MixGranularity::Head); });
  const Shape q{2, 2, 5, 4}, kv{2, 1, 5, 4};
  check_dispatch("attention (fused, learnable sink)", {q, kv, kv, {2}}, [](V& v) {
    AttentionCall<score::SoftmaxSink, gate::None, value::Identity, mask::Causal, float, Dv> c;
    c.score_params.sink_logit = v[3].value();
    c.score_vars.push_back(v[3]);
    return attention(c, v[0], v[1], v[2], Vt{});
  });
  AttentionRecorder<float, Dv> rec;
  check_dispatch("attention (recorded, G1 gate, V-scale)", {q, kv, kv, q, {1}}, [&](V& v) {
    AttentionCall<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>, value::VScale, mask::Causal,
                  float, Dv>
        c;
    c.value_params.theta = v[4].value();
    c.value_vars.push_back(v[4]);
    c.recorder = &rec;
    return attention(c, v[0], v[1], v[2], v[3]);
  });
  CHECK(rec.weights.defined());
  check_dispatch("attention_from_projection", {{2, 5, 16}}, [&](V& v) {
    AttentionCall<score::Softmax, gate::None, value::Identity, mask::Causal, float, Dv> c;
    return attention_from_projection(c, v[0], 2, 1, 4, &table);
  });
}

TEST_CASE("device seam: Tensor allocates, copies and views through memory<Device>") {
  using Tt = Tensor<float, test_device>;
  const Tt a = Tt::arange({3, 4});
  const Tt t = a.transpose(0, 1).contiguous();
  CHECK(t.to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tt z = Tt::zeros({4, 3});
  z.transpose(0, 1).copy_from(a);
  CHECK(z.to_vector() == t.to_vector());
  z.slice(0, 1, 3).fill(-1.0f);
  CHECK(z.to_vector() == std::vector<float>{0, 4, 8, -1, -1, -1, -1, -1, -1, 3, 7, 11});
  CHECK(a.slice(1, 2, 3).clone().to_vector() == std::vector<float>{2, 6, 10});
  CHECK(Tt::scalar(2.5f).item() == 2.5f);
  // to_device: a dense copy on the other device (a view's elements in order), the tensor itself
  // (shared storage) when it is already there
  kernel_calls().clear();
  const Tt moved = Tensor<float>::arange({3, 4}).transpose(0, 1).to_device<test_device>();
  CHECK(moved.is_contiguous());
  CHECK(moved.to_vector() == t.to_vector());
  CHECK(kernel_calls()["memory::from_host"] == 1);
  const Tensor<float> back = moved.to_device<cpu>();
  CHECK(back.to_vector() == t.to_vector());
  CHECK(moved.to_device<test_device>().shares_storage_with(moved));
}

// The non-finite guard scans on the device's kernel (a GPU's values and gradients are checked on
// the GPU) and brings only the element it found to the host for its message.
TEST_CASE("device seam: the non-finite guard scans values and gradients with the device's kernel") {
  using Tt = Tensor<float, test_device>;
  Parameter<float, test_device> w("layer.w", Tt::from({3}, {4.0f, 0.0f, 1.0f}));
  auto finite_graph = [&](bool guard) {
    CheckFinite scope(guard);
    Tape<float, test_device> t;
    kernel_calls().clear();
    auto y = sum(square(t.param(w)));
    t.backward(y);
    return std::pair{kernel_calls()["first_non_finite"], kernel_calls()["memory::to_host"]};
  };
  const auto off = finite_graph(false), on_ = finite_graph(true);
  CHECK(off.first == 0);
  CHECK(on_.first >= 6);            // 3 values and the gradients reaching them
  CHECK(on_.second == off.second);  // nothing found, nothing more copied to the host
  CheckFinite on;
  Tape<float, test_device> t;
  auto x = t.param(w);
  kernel_calls().clear();
  CHECK_THROWS_WITH_AS(log(x - 5.0f), doctest::Contains("holds NaN at element 0"), NonFinite);
  CHECK(kernel_calls()["first_non_finite"] >= 1);
  CHECK(kernel_calls()["memory::to_host"] == 1);  // the one element named
  Tape<float, test_device> t2;
  auto y = sum(sqrt(t2.param(w)));  // sqrt'(0) = +Inf
  CHECK_THROWS_WITH_AS(t2.backward(y), doctest::Contains("+Inf at element 1"), NonFinite);
}
