// score:: — how attention turns scaled logits s_ij = (q_i·k_j)/√d_head into the weights a_ij
// that aggregate the values, o_i = Σ_j a_ij v_j (the 1/√d_head scale is applied to q·k before
// any score function, as in every paper here; kernels::AttentionOptions::scale overrides it).
//
// Two families, which the fused kernels stream differently:
//   Normalised (softmax family): p_ij = e^{s_ij} / (Σ_k e^{s_ik} [+ e^{S_h}]), a_ij = weight(p_ij).
//     The kernel keeps a running max and sum per row (online normaliser) and saves logsumexp.
//   Pointwise: a_ij = c_i · h(s_ij + b_i) with per-row constants {c_i, b_i} = row(visible, keys);
//     no normaliser, nothing saved.
// `visible` is the number of keys query i may see (causal: i+1 when T = S, capped by padding);
// `keys` the number of keys of its batch entry (S, or the padded length).
//
// Element math (weight, weight_grad) is SINKLAB_HD and templated over the value type, so the
// same code runs on float/double, xsimd batches and in CUDA kernels. Hyperparameters are plain
// members; learnable tensors follow policy/params.hpp.
//
// What a kernel asks of a score (the Policy concept at the end lists it):
//   family, has_sink, clipped, name; Params<T>, make_params<T>(heads), check_params(p, heads, where)
//   args(params) → Args<T>: the learnable tensors as raw pointers (what a kernel, CPU or CUDA, reads)
//   normalised:  start<V>(args, head) → OnlineRow<V> (policy/online_row.hpp), weight(p), weight_grad(p)
//                and, with learnable per-head logits, row_param_grad(args, head, lse_i, D_i) → ∂L/∂θ_h
//                from row i, add_param_grad(grads, head, g)
//   point-wise:  row(visible, keys) → RowConstants, weight(s, c, b), weight_grad(s, c, b)
//   optional:    logits(s) and logits_grad(s), a transform of the scaled logits before the score
//                function (e.g. tanh soft-capping); the kernels apply it when it is there.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/policy/activation.hpp"
#include "sinklab/policy/math.hpp"
#include "sinklab/policy/online_row.hpp"
#include "sinklab/policy/params.hpp"

namespace sinklab::score {

enum class Family { Normalised, Pointwise };

// Constants of one query row in the point-wise family: a_ij = scale · h(s_ij + bias).
struct RowConstants {
  double scale = 1.0;
  double bias = 0.0;
};

// ---------------------------------------------------------------- softmax family

struct Softmax {
  static constexpr Family family = Family::Normalised;
  static constexpr bool has_sink = false;
  static constexpr bool clipped = false;
  static constexpr const char* name = "softmax";

  template <class T>
  using Params = policy::NoParams<T>;
  template <class T>
  using Args = policy::NoArgs;
  template <class T>
  Params<T> make_params(int64_t /*heads*/) const {
    return {};
  }
  template <class T>
  Args<T> args(const Params<T>&) const {
    return {};
  }
  template <class T>
  void check_params(const Params<T>&, int64_t /*heads*/, const char* /*where*/) const {}
  void validate(const char* /*where*/) const {}

  // The row before any key.
  template <class V, class A>
  SINKLAB_HD OnlineRow<V> start(const A& /*args*/, int64_t /*head*/) const {
    return OnlineRow<V>::empty();
  }

  // a = weight(p) and da/dp, p the normalised probability.
  template <class V>
  SINKLAB_HD V weight(V p) const {
    return p;
  }
  template <class V>
  SINKLAB_HD V weight_grad(V /*p*/) const {
    return V(1);
  }
};

// gpt-oss learnable sink: A_ij = e^{s_ij} / (e^{S_h} + Σ_k e^{s_ik}), one logit S_h per query
// head and no value attached, so rows sum to 1 − e^{S_h − lse_i}. The papers publish no init
// (gpt-oss loads trained sinks); S_h = init_logit = 0 (a sink worth one key of logit 0) is ours.
struct SoftmaxSink : Softmax {
  static constexpr bool has_sink = true;
  static constexpr const char* name = "softmax_sink";
  double init_logit = 0.0;

  template <class T, class Device = cpu>
  struct Params {
    Tensor<T, Device> sink_logit;  // [H]
    template <class F>
    void parameters(F&& f) {
      f("sink_logit", sink_logit);
    }
    template <class F>
    void parameters(F&& f) const {
      f("sink_logit", sink_logit);
    }
  };
  template <class T>
  struct Args {
    const T* sink_logit = nullptr;  // [H]
  };
  template <class T, class Device = cpu>
  Params<T, Device> make_params(int64_t heads) const {
    return {Tensor<T, Device>::full({heads}, static_cast<T>(init_logit))};
  }
  template <class T, class Device>
  Args<T> args(const Params<T, Device>& p) const {
    return {p.sink_logit.data()};
  }
  template <class T, class Device>
  void check_params(const Params<T, Device>& p, int64_t heads, const char* where) const {
    SINKLAB_CHECK(p.sink_logit.defined() && p.sink_logit.rank() == 1 && p.sink_logit.size(0) == heads &&
                      p.sink_logit.is_contiguous(),
                  where, ": sink_logit of shape ", p.sink_logit.defined() ? p.sink_logit.shape() : Shape{},
                  " must be a contiguous [H] = [", heads, "]");
  }

  // The sink is a key of logit S_h with no value: the row starts having seen it.
  template <class V, class T>
  SINKLAB_HD OnlineRow<V> start(const Args<T>& a, int64_t head) const {
    return OnlineRow<V>::from_logit(V(a.sink_logit[head]));
  }
  // Row i's part of ∂L/∂S_h: the sink holds e^{S_h − lse_i} of the row's mass and no value, so
  // −e^{S_h − lse_i}·D_i with D_i = Σ_j P_ij w'(P_ij) dA_ij (0 for a row that saw nothing).
  template <class T>
  SINKLAB_HD T row_param_grad(const Args<T>& a, int64_t head, T lse, T D) const {
    using std::exp;
    return lse == T(-std::numeric_limits<double>::infinity()) ? T(0) : -exp(a.sink_logit[head] - lse) * D;
  }
  template <class T, HostDevice Device>
  void add_param_grad(Params<T, Device>& grads, int64_t head, double g) const {
    grads.sink_logit.data()[head] += static_cast<T>(g);
  }
};

// Bondarenko et al. 2023: a = clip((ζ − γ)·softmax(s) + γ, 0, 1), ζ ≥ 1, γ ≤ 0, so weights can
// reach exactly 0 or 1 and the clipped entries pass no gradient. Needs the final normaliser
// before clipping (two passes over the keys). Defaults ζ = 1, γ = −0.025; for_length(n) gives
// the paper's γ = −α/n (α = 12 by default).
struct ClippedSoftmax {
  static constexpr Family family = Family::Normalised;
  static constexpr bool has_sink = false;
  static constexpr bool clipped = true;
  static constexpr const char* name = "clipped_softmax";
  double zeta = 1.0;
  double gamma = -0.025;

  static ClippedSoftmax for_length(int64_t n, double alpha = 12.0) { return {1.0, -alpha / static_cast<double>(n)}; }
  template <class T>
  using Params = policy::NoParams<T>;
  template <class T>
  using Args = policy::NoArgs;
  template <class T>
  Params<T> make_params(int64_t) const {
    return {};
  }
  template <class T>
  Args<T> args(const Params<T>&) const {
    return {};
  }
  template <class T>
  void check_params(const Params<T>&, int64_t, const char*) const {}
  template <class V, class A>
  SINKLAB_HD OnlineRow<V> start(const A&, int64_t) const {
    return OnlineRow<V>::empty();
  }
  void validate(const char* where) const {
    SINKLAB_CHECK(zeta >= 1.0 && gamma <= 0.0, where,
                  ": ClippedSoftmax needs zeta >= 1 and gamma <= 0, got zeta = ", zeta, ", gamma = ", gamma);
  }

  template <class V>
  SINKLAB_HD V weight(V p) const {
    return policy::math::clamp01(V(zeta - gamma) * p + V(gamma));
  }
  // ζ − γ where the stretched value lies strictly inside (0, 1), else 0.
  template <class V>
  SINKLAB_HD V weight_grad(V p) const {
    using policy::math::select;
    const V x = V(zeta - gamma) * p + V(gamma);
    return select((x > V(0)) & (x < V(1)), V(zeta - gamma), V(0));
  }
};

// ---------------------------------------------------------------- point-wise family

// Activations h of the scaled point-wise family (Wortsman et al.; NOP-vs-broadcast App. C.3):
// the library's one activation vocabulary (policy/activation.hpp), e.g. fn::ReLU, fn::GELU.
namespace fn = ::sinklab::act;

// Shared members of the point-wise scores (no parameters, no sink, no clipping).
struct PointwiseBase {
  static constexpr Family family = Family::Pointwise;
  static constexpr bool has_sink = false;
  static constexpr bool clipped = false;
  template <class T>
  using Params = policy::NoParams<T>;
  template <class T>
  using Args = policy::NoArgs;
  template <class T>
  Params<T> make_params(int64_t) const {
    return {};
  }
  template <class T>
  Args<T> args(const Params<T>&) const {
    return {};
  }
  template <class T>
  void check_params(const Params<T>&, int64_t, const char*) const {}
  void validate(const char*) const {}
};

// a_ij = n^{-α} · h(s_ij), n = visible keys. α = 1 keeps entries O(1/n) like softmax.
template <act::Activation H>
struct Pointwise : PointwiseBase {
  static constexpr const char* name = H::name;
  double alpha = 1.0;

  SINKLAB_HD RowConstants row(int64_t visible, int64_t /*keys*/) const {
    using std::pow;
    return {visible > 0 ? pow(static_cast<double>(visible), -alpha) : 0.0, 0.0};
  }
  template <class V>
  SINKLAB_HD V weight(V s, V scale, V bias) const {
    return scale * H::f(s + bias);
  }
  template <class V>
  SINKLAB_HD V weight_grad(V s, V scale, V bias) const {
    return scale * H::df(s + bias);
  }
};

// ReLU attention over n (Shen et al. / Wortsman et al.): a_ij = ReLU(s_ij)/n, n = visible keys
// (i+1 under a causal mask).
using ReLU = Pointwise<fn::ReLU>;

// Sigmoid attention (Ramapuram et al. 2024): a_ij = σ(s_ij + b). b is a fixed hyperparameter;
// by default b = −log n with n the number of keys of the batch entry (the paper's init).
struct Sigmoid : PointwiseBase {
  static constexpr const char* name = "sigmoid";
  bool fixed_bias = false;
  double bias = 0.0;

  static Sigmoid with_bias(double b) { return {{}, true, b}; }
  SINKLAB_HD RowConstants row(int64_t /*visible*/, int64_t keys) const {
    using std::log;
    return {1.0, fixed_bias ? bias : (keys > 0 ? -log(static_cast<double>(keys)) : 0.0)};
  }
  template <class V>
  SINKLAB_HD V weight(V s, V scale, V bias_) const {
    return scale * policy::math::sigmoid(s + bias_);
  }
  template <class V>
  SINKLAB_HD V weight_grad(V s, V scale, V bias_) const {
    return scale * policy::math::sigmoid_grad(s + bias_);
  }
};

// Polynomial attention (Saratchandran et al. 2024): a_ij = s_ij^p / √n, n = visible keys, p ≥ 1
// an integer (default cubic, the paper's choice).
struct Polynomial : PointwiseBase {
  static constexpr const char* name = "polynomial";
  int degree = 3;

  void validate(const char* where) const {
    SINKLAB_CHECK(degree >= 1, where, ": Polynomial needs an integer degree >= 1, got ", degree);
  }
  SINKLAB_HD RowConstants row(int64_t visible, int64_t /*keys*/) const {
    using std::sqrt;
    return {visible > 0 ? 1.0 / sqrt(static_cast<double>(visible)) : 0.0, 0.0};
  }
  template <class V>
  SINKLAB_HD V weight(V s, V scale, V bias) const {
    return scale * policy::math::ipow(s + bias, degree);
  }
  template <class V>
  SINKLAB_HD V weight_grad(V s, V scale, V bias) const {
    return scale * V(static_cast<double>(degree)) * policy::math::ipow(s + bias, degree - 1);
  }
};

// ---------------------------------------------------------------- traits

// What every score provides (the kernels' interface above); a user's score is any struct that
// satisfies it, usually by deriving from Softmax or PointwiseBase and overriding what differs.
template <class S>
concept Policy = requires(const S& s, const typename S::template Params<double>& p, int64_t h) {
  { S::family } -> std::convertible_to<Family>;
  { S::has_sink } -> std::convertible_to<bool>;
  { S::clipped } -> std::convertible_to<bool>;
  { S::name } -> std::convertible_to<const char*>;
  { s.template make_params<double>(h) } -> std::same_as<typename S::template Params<double>>;
  s.args(p);
  s.check_params(p, h, "");
  s.validate("");
} && (S::family == Family::Normalised ? requires(const S& s, double x) {
  { s.weight(x) } -> std::convertible_to<double>;
  { s.weight_grad(x) } -> std::convertible_to<double>;
  s.template start<double>(s.args(typename S::template Params<double>{}), int64_t{0});
} : requires(const S& s, double x, int64_t n) {
  { s.row(n, n) } -> std::convertible_to<RowConstants>;
  { s.weight(x, x, x) } -> std::convertible_to<double>;
  { s.weight_grad(x, x, x) } -> std::convertible_to<double>;
});

template <class S>
inline constexpr bool is_policy_v = Policy<S>;

// Whether a score learns per-head parameters through the row statistics (a sink).
template <class S, class T>
concept HasRowParamGrad = requires(const S& s, const typename S::template Args<T>& a, T x) {
  { s.row_param_grad(a, int64_t{0}, x, x) } -> std::convertible_to<T>;
};

// Whether a score transforms the scaled logits before its score function.
template <class S>
concept HasLogitsTransform = requires(const S& s, double x) {
  { s.logits(x) } -> std::convertible_to<double>;
  { s.logits_grad(x) } -> std::convertible_to<double>;
};

template <class S, class T, class Device = cpu>
using params_t = policy::params_t<S, T, Device>;

}  // namespace sinklab::score
