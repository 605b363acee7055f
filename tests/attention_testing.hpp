// Test helpers for the attention kernels: a central-difference gradient, a relative error, and
// a small "pipeline" (value transform → gate on values → attention core → gate on output →
// loss Σ w ⊙ y) whose analytic gradients are checked against finite differences and whose
// fused and materialised paths are checked against each other.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/autodiff/ops/attention.hpp"
#include "sinklab/kernels/cpu/attention.hpp"

namespace attn_test {

using namespace sinklab;
using namespace sinklab::kernels::cpu;

// ‖a − b‖∞ / max(‖a‖∞, ‖b‖∞), 0 when both are 0; NaN anywhere gives infinity.
template <class A, class B>
double rel_error(const Tensor<A>& a, const Tensor<B>& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector();
  const auto y = b.to_vector();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = static_cast<double>(x[i]), yi = static_cast<double>(y[i]);
    if (!std::isfinite(xi) || !std::isfinite(yi)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(xi - yi));
    scale = std::max({scale, std::abs(xi), std::abs(yi)});
  }
  return scale == 0 ? 0.0 : diff / scale;
}

// The materialised forward with the maps a recorder receives (as autodiff::attention fills them).
template <class Score, class Mask, class T>
AttentionForward<T> recorded_forward(const Score& score, const Mask& mask, const Tensor<T>& q, const Tensor<T>& k,
                                     const Tensor<T>& v, const score::params_t<Score, T>& params,
                                     const AttentionOptions& opt, autodiff::AttentionRecorder<T>& rec) {
  AttentionForward<T> f = attention_reference_forward(score, mask, q, k, v, params, opt, &rec.weights, &rec.logits);
  rec.lse = f.lse;
  ++rec.calls;
  return f;
}

template <class T>
bool all_finite(const Tensor<T>& t) {
  for (T x : t.to_vector())
    if (!std::isfinite(static_cast<double>(x))) return false;
  return true;
}

// d loss / d x by central differences, perturbing x (contiguous) in place and restoring it.
template <class F>
Tensor<double> central_difference(Tensor<double>& x, F&& loss, double eps = 1e-6) {
  REQUIRE(x.is_contiguous());
  Tensor<double> g = Tensor<double>::zeros(x.shape());
  double* p = x.data();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double keep = p[i];
    p[i] = keep + eps;
    const double lp = loss();
    p[i] = keep - eps;
    const double lm = loss();
    p[i] = keep;
    g.data()[i] = (lp - lm) / (2 * eps);
  }
  return g;
}

enum class GateCfg { None, ValuesHead, ValuesChannel, OutputHead, OutputChannel };
inline const GateCfg kAllGates[] = {GateCfg::None, GateCfg::ValuesHead, GateCfg::ValuesChannel, GateCfg::OutputHead,
                                    GateCfg::OutputChannel};
inline const char* gate_name(GateCfg g) {
  switch (g) {
    case GateCfg::None:
      return "no gate";
    case GateCfg::ValuesHead:
      return "gate on values per head";
    case GateCfg::ValuesChannel:
      return "gate on values per channel";
    case GateCfg::OutputHead:
      return "gate on output per head";
    case GateCfg::OutputChannel:
      return "gate on output per channel";
  }
  return "?";
}
inline bool on_values(GateCfg g) { return g == GateCfg::ValuesHead || g == GateCfg::ValuesChannel; }
inline bool on_output(GateCfg g) { return g == GateCfg::OutputHead || g == GateCfg::OutputChannel; }
inline bool per_channel(GateCfg g) { return g == GateCfg::ValuesChannel || g == GateCfg::OutputChannel; }

// The gate source does not matter at tensor level; these types fix placement and granularity.
using GValuesHead = gate::FromValue<gate::per_head, gate::on_values>;
using GValuesChannel = gate::FromValue<gate::per_channel, gate::on_values>;
using GOutputHead = gate::FromInput<gate::per_head, gate::on_output>;
using GOutputChannel = gate::FromInput<gate::per_channel, gate::on_output>;

struct Dims {
  int64_t B, H, Hkv, T, S, d;
  std::vector<int64_t> kv_lengths;  // empty: no padding
  int64_t block_q = 64, block_k = 64;
};

template <class T, class Score, class Value>
struct Problem {
  Score score;
  Value value;
  GateCfg gate = GateCfg::None;
  Tensor<T> q, k, v, gate_logit, w;
  score::params_t<Score, T> sp;
  typename Value::template Params<T> vp;
  AttentionOptions opt;
};

template <class U, class T, class Score, class Value>
Problem<U, Score, Value> cast(const Problem<T, Score, Value>& p) {
  Problem<U, Score, Value> r;
  r.score = p.score;
  r.value = p.value;
  r.gate = p.gate;
  r.q = p.q.template to<U>();
  r.k = p.k.template to<U>();
  r.v = p.v.template to<U>();
  if (p.gate_logit.defined()) r.gate_logit = p.gate_logit.template to<U>();
  r.w = p.w.template to<U>();
  r.sp = p.score.template make_params<U>(p.q.size(1));
  r.vp = p.value.template make_params<U>(p.k.size(1));
  // Copy the parameter values in declaration order.
  std::vector<Tensor<T>> src;
  p.sp.parameters([&](const char*, const Tensor<T>& t) { src.push_back(t); });
  std::size_t i = 0;
  r.sp.parameters([&](const char*, Tensor<U>& t) { t = src[i++].template to<U>(); });
  src.clear();
  p.vp.parameters([&](const char*, const Tensor<T>& t) { src.push_back(t); });
  i = 0;
  r.vp.parameters([&](const char*, Tensor<U>& t) { t = src[i++].template to<U>(); });
  r.opt = p.opt;
  return r;
}

// Random problem in double; parameters get non-trivial values so their gradients are exercised.
template <class Score, class Value>
Problem<double, Score, Value> make_problem(const Score& score, const Value& value, GateCfg gate, const Dims& dm,
                                           uint64_t seed, double qk_std = 1.0) {
  Rng rng(seed);
  Problem<double, Score, Value> p;
  p.score = score;
  p.value = value;
  p.gate = gate;
  p.q = rng.normal<double>({dm.B, dm.H, dm.T, dm.d}, 0.0, qk_std);
  p.k = rng.normal<double>({dm.B, dm.Hkv, dm.S, dm.d}, 0.0, qk_std);
  p.v = rng.normal<double>({dm.B, dm.Hkv, dm.S, dm.d}, 0.0, 1.0);
  p.w = rng.normal<double>({dm.B, dm.H, dm.T, dm.d}, 0.0, 1.0);
  const int64_t G = per_channel(gate) ? dm.d : 1;
  if (on_values(gate)) p.gate_logit = rng.normal<double>({dm.B, dm.Hkv, dm.S, G}, 0.0, 1.0);
  if (on_output(gate)) p.gate_logit = rng.normal<double>({dm.B, dm.H, dm.T, G}, 0.0, 1.0);
  p.sp = score.template make_params<double>(dm.H);
  p.sp.parameters([&](const char*, Tensor<double>& t) { t = rng.normal<double>(t.shape(), 0.0, 1.0); });
  p.vp = value.template make_params<double>(dm.Hkv);
  p.vp.parameters([&](const char*, Tensor<double>& t) { t = rng.normal<double>(t.shape(), 0.0, 0.5); });
  if (!dm.kv_lengths.empty()) p.opt.kv_lengths = Tensor<int64_t>::from({dm.B}, dm.kv_lengths);
  p.opt.block_q = dm.block_q;
  p.opt.block_k = dm.block_k;
  return p;
}

template <class T>
Tensor<T> apply_gate(GateCfg g, const Tensor<T>& x, const Tensor<T>& logit) {
  switch (g) {
    case GateCfg::ValuesHead:
      return gate_forward(GValuesHead{}, x, logit);
    case GateCfg::ValuesChannel:
      return gate_forward(GValuesChannel{}, x, logit);
    case GateCfg::OutputHead:
      return gate_forward(GOutputHead{}, x, logit);
    case GateCfg::OutputChannel:
      return gate_forward(GOutputChannel{}, x, logit);
    default:
      return x;
  }
}
template <class T>
GateGrads<T> apply_gate_backward(GateCfg g, const Tensor<T>& x, const Tensor<T>& logit, const Tensor<T>& dy) {
  switch (g) {
    case GateCfg::ValuesHead:
      return gate_backward(GValuesHead{}, x, logit, dy);
    case GateCfg::ValuesChannel:
      return gate_backward(GValuesChannel{}, x, logit, dy);
    case GateCfg::OutputHead:
      return gate_backward(GOutputHead{}, x, logit, dy);
    case GateCfg::OutputChannel:
      return gate_backward(GOutputChannel{}, x, logit, dy);
    default:
      return {dy, Tensor<T>()};
  }
}

template <class T, class Score, class Value>
struct PipelineGrads {
  Tensor<T> y, dq, dk, dv, dgate;
  score::params_t<Score, T> dscore;
  typename Value::template Params<T> dvalue;
};

// Forward (and backward when `grads`) through the whole pipeline, fused or materialised core.
template <bool Fused, class Mask, class T, class Score, class Value>
PipelineGrads<T, Score, Value> run(const Problem<T, Score, Value>& p, bool grads) {
  PipelineGrads<T, Score, Value> r;
  const Mask mask{};
  const Tensor<T> vhat = value_transform_forward(p.value, p.v, p.vp);
  const Tensor<T> vt = on_values(p.gate) ? apply_gate(p.gate, vhat, p.gate_logit) : vhat;
  AttentionForward<T> fwd = Fused ? attention_fused_forward(p.score, mask, p.q, p.k, vt, p.sp, p.opt)
                                  : attention_reference_forward(p.score, mask, p.q, p.k, vt, p.sp, p.opt);
  r.y = on_output(p.gate) ? apply_gate(p.gate, fwd.out, p.gate_logit) : fwd.out;
  if (!grads) return r;
  Tensor<T> dout = p.w;
  if (on_output(p.gate)) {
    GateGrads<T> gg = apply_gate_backward(p.gate, fwd.out, p.gate_logit, p.w);
    dout = gg.dx;
    r.dgate = gg.dlogit;
  }
  AttentionGrads<T, Score> cg = Fused ? attention_fused_backward(p.score, mask, p.q, p.k, vt, p.sp, fwd, dout, p.opt)
                                      : attention_reference_backward(p.score, mask, p.q, p.k, vt, p.sp, dout, p.opt);
  Tensor<T> dvhat = cg.dv;
  if (on_values(p.gate)) {
    GateGrads<T> gg = apply_gate_backward(p.gate, vhat, p.gate_logit, cg.dv);
    dvhat = gg.dx;
    r.dgate = gg.dlogit;
  }
  auto vg = value_transform_backward(p.value, p.v, p.vp, dvhat);
  r.dq = cg.dq;
  r.dk = cg.dk;
  r.dv = vg.dv;
  r.dscore = cg.dscore;
  r.dvalue = vg.dparams;
  return r;
}

template <class T>
double weighted_sum(const Tensor<T>& y, const Tensor<T>& w) {
  const T* a = y.data();
  const T* b = w.data();
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

// Pairs of (name, analytic, other) gradients of a pipeline, in a fixed order.
template <class T, class U, class Score, class Value, class F>
void for_each_grad(const PipelineGrads<T, Score, Value>& a, const PipelineGrads<U, Score, Value>& b, F&& f) {
  f("out", a.y, b.y);
  f("dq", a.dq, b.dq);
  f("dk", a.dk, b.dk);
  f("dv", a.dv, b.dv);
  if (a.dgate.defined()) f("dgate", a.dgate, b.dgate);
  std::vector<std::pair<std::string, Tensor<T>>> pa;
  std::vector<Tensor<U>> pb;
  a.dscore.parameters([&](const char* n, const Tensor<T>& t) { pa.emplace_back(std::string("dscore.") + n, t); });
  b.dscore.parameters([&](const char*, const Tensor<U>& t) { pb.push_back(t); });
  a.dvalue.parameters([&](const char* n, const Tensor<T>& t) { pa.emplace_back(std::string("dvalue.") + n, t); });
  b.dvalue.parameters([&](const char*, const Tensor<U>& t) { pb.push_back(t); });
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) f(pa[i].first.c_str(), pa[i].second, pb[i]);
}

// fp32: fused forward and backward equal the materialised reference within `tol`. Parameter
// gradients (sink logits, θ) are single numbers summed over B·T or B·S terms of both signs, so
// float cancellation in them is larger: each fp32 side is held to the fp64 pipeline's within
// `param_tol` (V-scale's θ under GELU scores is 1e-4 off on the fused side; comparing the two
// fp32 sides with each other would pass errors they share), and to 1e-6 in the fp64 gradcheck.
template <class Mask, class Score, class Value>
void check_fused_matches_reference(const Problem<double, Score, Value>& pd, double tol = 1e-5,
                                   double param_tol = 2e-4) {
  const auto pf = cast<float>(pd);
  const auto fused = run<true, Mask>(pf, true);
  const auto ref = run<false, Mask>(pf, true);
  auto is_param = [](const char* name) {
    return std::string(name).rfind("dscore.", 0) == 0 || std::string(name).rfind("dvalue.", 0) == 0;
  };
  for_each_grad(fused, ref, [&](const char* name, const Tensor<float>& a, const Tensor<float>& b) {
    INFO(std::string(name));
    CHECK(all_finite(a));
    if (!is_param(name)) CHECK(rel_error(a, b) <= tol);
  });
  const auto exact = run<true, Mask>(pd, true);
  for (const auto* side : {&fused, &ref}) {
    const std::string which = side == &fused ? " (fused fp32 vs fp64)" : " (reference fp32 vs fp64)";
    for_each_grad(*side, exact, [&](const char* name, const Tensor<float>& a, const Tensor<double>& b) {
      INFO((std::string(name) + which));
      if (is_param(name)) CHECK(rel_error(a, b) <= param_tol);
    });
  }
}

// fp64: analytic gradients of the fused pipeline equal central differences.
template <class Mask, class Score, class Value>
void check_gradients(Problem<double, Score, Value> p, double tol = 1e-6) {
  const auto an = run<true, Mask>(p, true);
  auto loss = [&] { return weighted_sum(run<true, Mask>(p, false).y, p.w); };
  auto check = [&](const char* name, Tensor<double>& x, const Tensor<double>& g) {
    INFO(std::string(name));
    REQUIRE(g.defined());
    CHECK(rel_error(g, central_difference(x, loss)) <= tol);
  };
  check("q", p.q, an.dq);
  check("k", p.k, an.dk);
  check("v", p.v, an.dv);
  if (p.gate != GateCfg::None) check("gate logits", p.gate_logit, an.dgate);
  std::vector<Tensor<double>> gs;
  an.dscore.parameters([&](const char*, const Tensor<double>& t) { gs.push_back(t); });
  std::size_t i = 0;
  p.sp.parameters([&](const char* n, Tensor<double>& t) { check(n, t, gs[i++]); });
  gs.clear();
  an.dvalue.parameters([&](const char*, const Tensor<double>& t) { gs.push_back(t); });
  i = 0;
  p.vp.parameters([&](const char* n, Tensor<double>& t) { check(n, t, gs[i++]); });
}

// Shapes exercised for each mask: GQA/MQA, T ≠ S, padding and fully masked rows, and small
// blocks so that several (and partial) query and key blocks occur.
inline std::vector<Dims> gradcheck_dims(bool causal) {
  if (causal) return {{2, 4, 2, 6, 6, 4, {}, 4, 3}, {2, 2, 1, 5, 7, 4, {7, 4}, 2, 4}};
  return {{2, 2, 2, 5, 6, 4, {6, 0}, 3, 4}, {1, 4, 1, 6, 6, 4, {}, 64, 64}};
}
inline std::vector<Dims> fp32_dims(bool causal) {
  if (causal)
    return {{2, 4, 2, 13, 13, 8, {}, 4, 3}, {2, 2, 1, 11, 17, 8, {17, 9}, 5, 4}, {1, 2, 2, 70, 70, 16, {}, 64, 64}};
  return {{2, 2, 2, 13, 11, 8, {11, 0}, 4, 3}, {1, 4, 1, 9, 9, 8, {}, 2, 5}, {1, 2, 1, 70, 66, 16, {}, 64, 64}};
}

// Every value transform × gate placement/granularity × mask for one score policy.
template <class Score>
void check_score_policy(const Score& score, uint64_t seed) {
  auto for_values = [&](auto value) {
    for (GateCfg g : kAllGates) {
      for (int causal = 0; causal < 2; ++causal) {
        auto body = [&](auto mask) {
          using Mask = decltype(mask);
          for (const Dims& dm : fp32_dims(causal)) {
            INFO(std::string(Score::name), " / ", std::string(decltype(value)::name), " / ", std::string(gate_name(g)),
                 " / ", std::string(Mask::name), " T=", dm.T, " S=", dm.S, " H=", dm.H, " Hkv=", dm.Hkv,
                 " [fp32 fused vs reference]");
            check_fused_matches_reference<Mask>(make_problem(score, value, g, dm, seed++));
          }
          for (const Dims& dm : gradcheck_dims(causal)) {
            INFO(std::string(Score::name), " / ", std::string(decltype(value)::name), " / ", std::string(gate_name(g)),
                 " / ", std::string(Mask::name), " T=", dm.T, " S=", dm.S, " H=", dm.H, " Hkv=", dm.Hkv,
                 " [fp64 gradcheck]");
            check_gradients<Mask>(make_problem(score, value, g, dm, seed++));
          }
        };
        if (causal)
          body(mask::Causal{});
        else
          body(mask::Bidirectional{});
      }
    }
  };
  for_values(value::Identity{});
  // C = (d·c_scale)² is comparable to |v|² ≈ d here, so φ is far from 1 and its Jacobian matters.
  for_values(value::VScale{0.5});
}

}  // namespace attn_test
