// The attention kernels' contract, the same on every device: the layout, what a forward keeps
// for its backward and what a backward returns, the dimensions a call is checked into, and the
// shape checks behind every error message. kernels/cpu and the CUDA backend both check with these
// and return these, so a call that fails on one device fails on the other with the same words.
//
// Layout: q [B, H, T, d]; k, v [B, H_kv, S, d]; out [B, H, T, d]; H a multiple of H_kv
// (grouped-query attention: query head h reads kv head h / (H / H_kv)). Gate logits are
// [B, heads, tokens, G] with G = 1 (per head) or d (per channel).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <utility>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/score.hpp"
#include "sinklab/policy/value.hpp"

namespace sinklab::kernels {

// What the forward keeps for the backward: the output and, for the softmax family, the row
// logsumexp (including the sink; −inf on a fully masked row). Point-wise scores save no stats.
template <class T, class Dev = sinklab::cpu>
struct AttentionForward {
  Tensor<T, Dev> out;  // [B, H, T, d]
  Tensor<T, Dev> lse;  // [B, H, T] (softmax family), undefined otherwise
};

template <class T, class Score, class Dev = sinklab::cpu>
struct AttentionGrads {
  Tensor<T, Dev> dq, dk, dv;
  score::params_t<Score, T, Dev> dscore;  // same shapes as the score's parameters
};

template <class T, class ValuePolicy, class Dev = sinklab::cpu>
struct ValueTransformGrads {
  Tensor<T, Dev> dv;
  value::params_t<ValuePolicy, T, Dev> dparams;
};

template <class T, class Dev = sinklab::cpu>
struct GateGrads {
  Tensor<T, Dev> dx;      // gradient at the gated tensor's input
  Tensor<T, Dev> dlogit;  // gradient at the gate logits
};

struct AttentionDims {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, d = 0;
  int64_t group() const { return H / Hkv; }
};

namespace contract {

inline const char* shape_str_hint() { return "q [B, H, T, d], k and v [B, H_kv, S, d]"; }

// q, k, v and the options against the layout; the call's dimensions.
template <class T, class Dev>
AttentionDims check_shapes(const char* kernel, const Tensor<T, Dev>& q, const Tensor<T, Dev>& k, const Tensor<T, Dev>& v,
                           const AttentionOptions& opt) {
  SINKLAB_CHECK(q.defined() && k.defined() && v.defined(), kernel, ": q, k and v must all be defined tensors");
  SINKLAB_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, kernel, ": expected ", shape_str_hint(), ", got q ",
                q.shape(), ", k ", k.shape(), ", v ", v.shape());
  AttentionDims dm{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  SINKLAB_CHECK(k.shape() == v.shape(), kernel, ": k ", k.shape(), " and v ", v.shape(),
                " must have the same shape [B, H_kv, S, d]");
  SINKLAB_CHECK(k.size(0) == dm.B, kernel, ": batch of q ", q.shape(), " and k ", k.shape(), " differ");
  SINKLAB_CHECK(k.size(3) == dm.d, kernel, ": head dimension of q ", q.shape(), " and k ", k.shape(), " differ");
  SINKLAB_CHECK(dm.d > 0, kernel, ": head dimension must be positive, got q ", q.shape());
  SINKLAB_CHECK(dm.Hkv > 0 && dm.H % dm.Hkv == 0, kernel, ": query heads of q ", q.shape(),
                " must be a multiple of the key/value heads of k ", k.shape());
  SINKLAB_CHECK(opt.block_q > 0 && opt.block_k > 0, kernel,
                ": block sizes must be positive, got block_q = ", opt.block_q, ", block_k = ", opt.block_k);
  if (opt.kv_lengths.defined()) {
    SINKLAB_CHECK(opt.kv_lengths.rank() == 1 && opt.kv_lengths.size(0) == dm.B, kernel, ": kv_lengths of shape ",
                  opt.kv_lengths.shape(), " must be [B] = [", dm.B, "] for q ", q.shape());
    for (int64_t b = 0; b < dm.B; ++b) {
      const int64_t n = opt.kv_lengths(b);
      SINKLAB_CHECK(0 <= n && n <= dm.S, kernel, ": kv_lengths[", b, "] = ", n, " is outside [0, S = ", dm.S,
                    "] for k ", k.shape());
    }
  }
  return dm;
}

// The backward's dO and the forward's saved output (and, for the softmax family, lse) against q.
template <class T, class Dev>
void check_saved(const char* kernel, const Tensor<T, Dev>& q, const Tensor<T, Dev>& dout,
                 const AttentionForward<T, Dev>& fwd, const AttentionDims& dm, bool normalised) {
  SINKLAB_CHECK(dout.shape() == q.shape(), kernel, ": dout ", dout.shape(), " must have the shape of q ", q.shape());
  SINKLAB_CHECK(fwd.out.defined() && fwd.out.shape() == q.shape(), kernel, ": saved output ",
                fwd.out.defined() ? fwd.out.shape() : Shape{}, " must have the shape of q ", q.shape());
  if (normalised)
    SINKLAB_CHECK(fwd.lse.defined() && fwd.lse.shape() == (Shape{dm.B, dm.H, dm.T}), kernel, ": saved lse ",
                  fwd.lse.defined() ? fwd.lse.shape() : Shape{}, " must be [B, H, T] = ", Shape{dm.B, dm.H, dm.T},
                  " (pass the AttentionForward of the same call)");
}

template <class T, class Score, class Dev>
void check_score_params(const char* kernel, const Score& score, const score::params_t<Score, T, Dev>& params,
                        const AttentionDims& dm) {
  score.validate(kernel);
  score.check_params(params, dm.H, kernel);
}

// A caller's output view [B, heads, L, d]: the expected shape, unit stride along d, rows and
// heads that do not overlap (tasks write them in parallel), and not in the inputs' storage.
template <class T, class Dev>
void check_output_view(const char* kernel, const char* what, const Tensor<T, Dev>& t, const Shape& want,
                       std::initializer_list<const Tensor<T, Dev>*> inputs) {
  SINKLAB_CHECK(t.shape() == want, kernel, ": ", what, " of shape ", t.shape(), ", expected ", want);
  // Non-overlapping: axes taken by increasing stride, each steps past the whole extent of the
  // ones before it (the first past a row of d).
  bool ok = t.size(3) == 1 || t.stride(3) == 1;
  std::pair<int64_t, int64_t> axes[3] = {{t.stride(0), t.size(0)}, {t.stride(1), t.size(1)}, {t.stride(2), t.size(2)}};
  std::sort(std::begin(axes), std::end(axes));
  int64_t extent = t.size(3);
  for (const auto& [stride, size] : axes) {
    if (size == 1) continue;
    ok = ok && stride >= extent;
    extent = stride * size;
  }
  SINKLAB_CHECK(ok, kernel, ": ", what, " of shape ", t.shape(), " has strides [", t.stride(0), ", ", t.stride(1), ", ",
                t.stride(2), ", ", t.stride(3), "]; it needs unit stride along d and rows that do not overlap");
  for (const Tensor<T, Dev>* in : inputs)
    SINKLAB_CHECK(!t.shares_storage_with(*in), kernel, ": ", what, " must not share storage with q, k or v");
}

// The gated tensor [B, heads, tokens, d] and its logits [B, heads, tokens, G]; returns G.
template <class Gate, class T, class Dev>
int64_t check_gate(const char* fn, const Tensor<T, Dev>& x, const Tensor<T, Dev>& logit) {
  static_assert(gate::is_policy_v<Gate>,
                "gate_forward/gate_backward: the first argument must be a sinklab::gate policy");
  static_assert(Gate::enabled, "gate_forward/gate_backward: gate::None has no gate to apply");
  SINKLAB_CHECK(x.defined() && x.rank() == 4, fn, ": gated tensor must be [B, heads, tokens, d], got ",
                x.defined() ? x.shape() : Shape{});
  const int64_t G = Gate::channels(x.size(3));
  const Shape want{x.size(0), x.size(1), x.size(2), G};
  SINKLAB_CHECK(logit.defined() && logit.shape() == want, fn, ": gate logits of shape ",
                logit.defined() ? logit.shape() : Shape{}, " must be ", want, " for the tensor ", x.shape(), " (",
                Gate::granularity == gate::Granularity::PerHead ? "per head" : "per channel", ")");
  return G;
}

// Keys of batch entry b (kv_lengths, or all S) and the scale applied to q·k.
inline int64_t kv_length(const AttentionOptions& opt, int64_t b, int64_t S) {
  return opt.kv_lengths.defined() ? opt.kv_lengths(b) : S;
}
inline double score_scale(const AttentionOptions& opt, int64_t d) {
  return opt.scale != 0.0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(d));
}

}  // namespace contract
}  // namespace sinklab::kernels
