// The cases of test_cuda_backend: every autodiff op, and the attention for every score family,
// gate and value transform, each run on a Tape<T, Dev> with the same inputs (make_leaves) and
// seed. The GPU test runs them for cuda (nvcc) and compares with the cpu's results, which
// backend_cases_cpu.cpp computes — built by the host compiler, as the CPU's SIMD kernels are
// not for nvcc.
#pragma once
#include <cmath>
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
#include "sinklab/optim/adamw.hpp"

namespace backend_cases {

using namespace sinklab;
using namespace sinklab::autodiff;

template <class T>
struct Leaves {
  std::vector<Shape> shapes;
  std::vector<std::vector<T>> values;
};

template <class T>
Leaves<T> make_leaves(const std::vector<Shape>& shapes, double mean, uint64_t seed) {
  Rng rng(seed);
  Leaves<T> l{shapes, {}};
  for (const Shape& s : shapes) {
    std::vector<T> v(static_cast<std::size_t>(s.numel()));
    for (T& x : v) x = static_cast<T>(mean + 0.5 * rng.normal());
    l.values.push_back(v);
  }
  return l;
}

// The op's output and its inputs' gradients under a seed of cos(i) (every element weighted
// differently, so a permuted gradient cannot pass).
template <class T, class Dev, class Op>
std::vector<std::vector<T>> run_op(const Leaves<T>& l, Op&& op) {
  Tape<T, Dev> tape;
  std::vector<Var<T, Dev>> in;
  for (std::size_t i = 0; i < l.shapes.size(); ++i) in.push_back(tape.leaf(Tensor<T, Dev>::from(l.shapes[i], l.values[i])));
  const Var<T, Dev> y = op(in);
  std::vector<T> seed(static_cast<std::size_t>(y.shape().numel()));
  for (std::size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<T>(std::cos(0.37 * static_cast<double>(i)));
  tape.backward(y, Tensor<T, Dev>::from(y.shape(), seed));
  std::vector<std::vector<T>> out{y.value().to_vector()};
  for (const auto& v : in) out.push_back(v.grad().defined() ? v.grad().to_vector() : std::vector<T>{});
  return out;
}

// Every case's name and outputs, in the order they ran.
template <class T>
using Results = std::vector<std::pair<std::string, std::vector<std::vector<T>>>>;

template <class T, class Dev, class Op>
void record(Results<T>& out, const char* name, const std::vector<Shape>& shapes, Op&& op, double mean = 0.0) {
  out.emplace_back(name, run_op<T, Dev>(make_leaves<T>(shapes, mean, 5), op));
}

template <class T, class Dev>
Results<T> every_op() {
  Results<T> r;
  const Shape x3{2, 5, 36}, row{36};
  record<T, Dev>(r, "exp", {x3}, [](auto& v) { return exp(v[0]); });
  record<T, Dev>(r, "log", {x3}, [](auto& v) { return log(v[0]); }, 3.0);
  record<T, Dev>(r, "tanh", {x3}, [](auto& v) { return tanh(v[0]); });
  record<T, Dev>(r, "sigmoid", {x3}, [](auto& v) { return sigmoid(v[0]); });
  record<T, Dev>(r, "silu", {x3}, [](auto& v) { return silu(v[0]); });
  record<T, Dev>(r, "gelu", {x3}, [](auto& v) { return gelu(v[0]); });
  record<T, Dev>(r, "relu", {x3}, [](auto& v) { return relu(v[0]); });
  record<T, Dev>(r, "square", {x3}, [](auto& v) { return square(v[0]); });
  record<T, Dev>(r, "sqrt", {x3}, [](auto& v) { return sqrt(v[0]); }, 3.0);
  record<T, Dev>(r, "add (bias)", {x3, row}, [](auto& v) { return v[0] + v[1]; });
  record<T, Dev>(r, "add (both broadcast)", {{2, 1, 36}, {5, 1}}, [](auto& v) { return v[0] + v[1]; });
  record<T, Dev>(r, "sub", {x3, {2, 5, 1}}, [](auto& v) { return v[0] - v[1]; });
  record<T, Dev>(r, "mul", {x3, row}, [](auto& v) { return v[0] * v[1]; });
  record<T, Dev>(r, "mul (scalar tensor)", {x3, {1}}, [](auto& v) { return v[0] * v[1]; });
  record<T, Dev>(r, "div", {x3, row}, [](auto& v) { return v[0] / v[1]; }, 3.0);
  record<T, Dev>(r, "affine", {x3}, [](auto& v) { return v[0] * 2.0 + 1.0; });
  record<T, Dev>(r, "pow", {x3}, [](auto& v) { return pow(v[0], T(3)); });
  record<T, Dev>(r, "clip", {x3}, [](auto& v) { return clip(v[0], 0.4); });
  record<T, Dev>(r, "sum(axis)", {x3}, [](auto& v) { return sum(v[0], 1); });
  record<T, Dev>(r, "mean(axis -1)", {x3}, [](auto& v) { return mean(v[0], -1); });
  record<T, Dev>(r, "sum", {x3}, [](auto& v) { return sum(v[0]); });
  record<T, Dev>(r, "mean", {x3}, [](auto& v) { return mean(v[0]); });
  record<T, Dev>(r, "max", {x3}, [](auto& v) { return max(v[0], 1); });
  record<T, Dev>(r, "softmax", {x3}, [](auto& v) { return softmax(v[0]); });
  record<T, Dev>(r, "log_softmax", {{3, 300}}, [](auto& v) { return log_softmax(v[0]); });
  record<T, Dev>(r, "cross_entropy", {{2, 5, 36}}, [](auto& v) {
    const auto targets = Tensor<int32_t, Dev>::from({2, 5}, {0, 3, -100, 1, 35, 3, 7, -100, 9, 2});
    return cross_entropy(v[0], targets);
  });
  record<T, Dev>(r, "matmul", {x3, {36, 20}}, [](auto& v) { return matmul(v[0], v[1]); });
  record<T, Dev>(r, "matmul (batched)", {x3, {2, 36, 7}}, [](auto& v) { return matmul(v[0], v[1]); });
  record<T, Dev>(r, "transpose", {x3}, [](auto& v) { return transpose(v[0], 0, 2); });
  record<T, Dev>(r, "slice", {x3}, [](auto& v) { return slice(v[0], 2, 1, 30); });
  record<T, Dev>(r, "concat", {x3, {2, 1, 36}}, [](auto& v) { return concat(std::vector{v[0], v[1]}, 1); });
  record<T, Dev>(r, "embedding", {{7, 36}}, [](auto& v) {
    const auto ids = Tensor<int32_t, Dev>::from({2, 4}, {0, 6, 2, 2, 5, 1, 6, 6});
    return embedding(v[0], ids);
  });
  record<T, Dev>(r, "repeat_batch", {{3, 36}}, [](auto& v) { return repeat_batch(v[0], 3); });
  record<T, Dev>(r, "split_heads", {{2, 5, 24}}, [](auto& v) { return split_heads(v[0], 8, 2, 4); });
  record<T, Dev>(r, "merge_heads", {{2, 3, 5, 4}}, [](auto& v) { return merge_heads(v[0]); });
  record<T, Dev>(r, "rms_norm", {x3, row}, [](auto& v) { return rms_norm(v[0], v[1]); }, 1.0);
  record<T, Dev>(r, "pre_affine_rms_norm", {x3, row, row}, [](auto& v) { return pre_affine_rms_norm(v[0], v[1], v[2]); }, 1.0);
  record<T, Dev>(r, "layer_norm", {x3, row, row}, [](auto& v) { return layer_norm(v[0], v[1], v[2]); }, 1.0);
  record<T, Dev>(r, "dyt", {x3, {1}, row, row}, [](auto& v) { return dyt(v[0], v[1], v[2], v[3]); }, 1.0);
  record<T, Dev>(r, "act_mul", {x3, x3}, [](auto& v) { return act_mul<act::SiLU>(v[0], v[1]); });
  record<T, Dev>(r, "act_mul_halves", {x3}, [](auto& v) { return act_mul_halves<act::GELU>(v[0]); });
  record<T, Dev>(r, "glu_mlp", {x3, {36, 40}, {20, 36}}, [](auto& v) { return glu_mlp<act::SiLU>(v[0], v[1], v[2]); });
  record<T, Dev>(r, "mix_pair (per head)", {{2, 2, 3, 4}, {2, 2, 3, 4}, {2}, {2}},
             [](auto& v) { return mix_pair(v[0], v[1], v[2], v[3], MixGranularity::Head); });
  record<T, Dev>(r, "mix_pair (per channel)", {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 4}, {2, 4}},
             [](auto& v) { return mix_pair(v[0], v[1], v[2], v[3], MixGranularity::Element); });
  record<T, Dev>(r, "rope", {{2, 2, 6, 8}}, [](auto& v) {
    RopeTable<T, Dev> table;
    table.ensure(6, 8, 10000.0);
    return rope(v[0], table);
  });
  record<T, Dev>(r, "rope_heads", {{2, 6, 24}}, [](auto& v) {
    RopeTable<T, Dev> table;
    table.ensure(6, 8, 10000.0);
    return rope_heads(v[0], 8, 2, 8, table);
  });
  return r;
}

template <class T, class Dev>
Results<T> every_attention() {
  Results<T> r;
  const Shape q{2, 4, 37, 16}, kv{2, 2, 37, 16};
  auto core = [&]<class Score, class Mask>(const char* name, Score score, Mask, std::vector<Shape> extra = {}) {
    std::vector<Shape> shapes{q, kv, kv};
    shapes.insert(shapes.end(), extra.begin(), extra.end());
    record<T, Dev>(r, name, shapes, [score](auto& v) {
        AttentionCall<Score, gate::None, value::Identity, Mask, T, Dev> c;
      c.score = score;
      if constexpr (Score::has_sink) {
        c.score_params.sink_logit = v[3].value();
        c.score_vars.push_back(v[3]);
      }
      return attention(c, v[0], v[1], v[2], Var<T, Dev>{});
    });
  };
  core("softmax, causal", score::Softmax{}, mask::Causal{});
  core("softmax, bidirectional", score::Softmax{}, mask::Bidirectional{});
  core("learnable sink", score::SoftmaxSink{}, mask::Causal{}, {{4}});
  core("clipped softmax", score::ClippedSoftmax{}, mask::Causal{});
  core("sigmoid", score::Sigmoid{}, mask::Causal{});
  core("relu / n", score::ReLU{}, mask::Causal{});
  {  // a head size whose tiles need a smaller block than the default on some devices
    const int64_t big = std::is_same_v<T, double> ? 96 : 128;
    record<T, Dev>(r, "softmax, large head size", {{1, 2, 45, big}, {1, 1, 45, big}, {1, 1, 45, big}}, [](auto& v) {
      AttentionCall<score::Softmax, gate::None, value::Identity, mask::Causal, T, Dev> c;
      return attention(c, v[0], v[1], v[2], Var<T, Dev>{});
    });
  }

  // The G1 gate on the output and V-scale on the values around the fused core.
  record<T, Dev>(r, "G1 gate, V-scale", {q, kv, kv, q, {2}}, [](auto& v) {
    AttentionCall<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>, value::VScale, mask::Causal, T, Dev> c;
    c.value_params.theta = v[4].value();
    c.value_vars.push_back(v[4]);
    return attention(c, v[0], v[1], v[2], v[3]);
  });
  record<T, Dev>(r, "per-head gate on the values", {q, kv, kv, {2, 2, 37, 1}}, [](auto& v) {
    AttentionCall<score::Softmax, gate::FromInput<gate::per_head, gate::on_values>, value::Identity, mask::Causal, T, Dev> c;
    return attention(c, v[0], v[1], v[2], v[3]);
  });
  // Read in place from a projection [B, T, (H + 2·H_kv)·d], with RoPE and a sink.
  record<T, Dev>(r, "attention_from_projection", {{2, 21, 64}, {4}}, [](auto& v) {
    RopeTable<T, Dev> table;
    table.ensure(21, 8, 10000.0);
    AttentionCall<score::SoftmaxSink, gate::None, value::Identity, mask::Causal, T, Dev> c;
    c.score_params.sink_logit = v[1].value();
    c.score_vars.push_back(v[1]);
    return attention_from_projection(c, v[0], 4, 2, 8, &table);
  });
  return r;
}


// A decoder block trained by AdamW for `steps` steps on one fixed batch — embedding, RMSNorm,
// learnable-sink attention read from the QKV projection with RoPE, output projection and
// residual, a SwiGLU feed-forward after LayerNorm, LM head, cross-entropy — and its loss at
// every step; the optimizer's state and update live on the device.
template <class T, class Dev>
std::vector<T> train_block(int steps) {
  constexpr int64_t B = 2, L = 16, V = 29, D = 32, H = 4, Hkv = 2, dh = 8, F = 48;
  Rng rng(3);
  auto init = [&](const char* name, Shape s, double scale, double mean = 0.0) {
    std::vector<T> v(static_cast<std::size_t>(s.numel()));
    for (T& x : v) x = static_cast<T>(mean + scale * rng.normal());
    return Parameter<T, Dev>(name, Tensor<T, Dev>::from(s, v));
  };
  std::vector<Parameter<T, Dev>> ps;
  ps.push_back(init("embed", {V, D}, 0.5));
  ps.push_back(init("norm", {D}, 0.0, 1.0));
  ps.push_back(init("w_qkv", {D, (H + 2 * Hkv) * dh}, 0.2));
  ps.push_back(init("sink", {H}, 0.0));
  ps.push_back(init("w_o", {H * dh, D}, 0.2));
  ps.push_back(init("ln_gain", {D}, 0.0, 1.0));
  ps.push_back(init("ln_bias", {D}, 0.0));
  ps.push_back(init("w_up", {D, 2 * F}, 0.2));
  ps.push_back(init("w_down", {F, D}, 0.15));
  ps.push_back(init("w_head", {D, V}, 0.2));
  std::vector<int32_t> ids, targets;
  for (int64_t i = 0; i < B * L; ++i) ids.push_back(static_cast<int32_t>(rng.randint(0, V)));
  for (int64_t i = 0; i < B * L; ++i) targets.push_back(ids[static_cast<std::size_t>((i / L) * L + (i % L + 1) % L)]);
  const auto id_t = Tensor<int32_t, Dev>::from({B, L}, ids), target_t = Tensor<int32_t, Dev>::from({B, L}, targets);
  RopeTable<T, Dev> rope_table;
  rope_table.ensure(L, dh, 10000.0);
  std::vector<Parameter<T, Dev>*> trained;
  for (auto& q : ps) trained.push_back(&q);
  optim::AdamW<T, Dev> opt(trained, {.lr = 3e-3, .weight_decay = 0.1});
  std::vector<T> losses;
  for (int step = 0; step < steps; ++step) {
    Tape<T, Dev> tape;
    auto p = [&](int i) { return tape.param(ps[static_cast<std::size_t>(i)]); };
    Var<T, Dev> x = embedding(p(0), id_t);
    AttentionCall<score::SoftmaxSink, gate::None, value::Identity, mask::Causal, T, Dev> c;
    c.score_params.sink_logit = ps[3].value;
    c.score_vars.push_back(p(3));
    Var<T, Dev> a = attention_from_projection(c, matmul(rms_norm(x, p(1)), p(2)), H, Hkv, dh, &rope_table);
    x = x + matmul(a, p(4));
    x = x + glu_mlp<act::SiLU>(layer_norm(x, p(5), p(6)), p(7), p(8));
    Var<T, Dev> loss = cross_entropy(matmul(x, p(9)), target_t);
    opt.zero_grad();
    tape.backward(loss);
    losses.push_back(loss.item());
    opt.step();
  }
  return losses;
}

}  // namespace backend_cases
