// The seam of every weight projection y = x·W: nn::Linear, the attention's fused QKV, gate and
// output projections, and a tied LM head all compute their product through
// project(tape, x, weight). With no hook installed (the normal case) that is matmul(x, W) after
// one thread-local pointer test; a ProjectionScope (an nn::HookScope) installs a hook for the forward passes run on
// this thread while it lives. A hook sees which weight the input is about to meet (so it can keep
// per-site state keyed by the weight's name) and returns the product: the calibration observers
// and fake quantizers of quant/model.hpp transform x and then call site.product(tape, x'), the
// integer W8A8 inference there replaces the product with an int8 GEMM.
//
// The residual stream has the same kind of seam, stream_point(tape, h, name), at the points
// where a model forms it: the sum after each branch of every nn::Layer ("<layer>.residual.attn",
// "<layer>.residual.ffn") and, in nn::Transformer, the embeddings entering the first layer
// ("<model>.embeddings"). Bondarenko et
// al.'s W8A8 quantizes those sums too, and they carry the massive activations.
#pragma once
#include <functional>
#include <string>

#include "sinklab/autodiff/autodiff.hpp"

namespace sinklab::nn {

template <class T, class Device = cpu>
struct ProjectionSite {
  autodiff::Parameter<T, Device>& weight;  // the projection's weight
  bool transposed = false;         // false: y = x·W with W [in, out]; true: y = x·Wᵀ (tied LM head)

  // What the projection computes without a hook.
  autodiff::Var<T, Device> product(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> x) const {
    const autodiff::Var<T, Device> w = tape.param(weight);
    return autodiff::matmul(x, transposed ? autodiff::transpose(w, 0, 1) : w);
  }
};

// Returns y for the input x of the projection `site`.
template <class T, class Device = cpu>
using ProjectionHook = std::function<autodiff::Var<T, Device>(autodiff::Tape<T, Device>&, autodiff::Var<T, Device> x,
                                                              const ProjectionSite<T, Device>&)>;

namespace detail {
// The hook of kind Hook installed on this thread (null: none).
template <class Hook>
const Hook*& installed_hook() {
  thread_local const Hook* hook = nullptr;
  return hook;
}
}  // namespace detail

// Installs a hook of kind Hook (a ProjectionHook or a StreamHook) on this thread until destroyed;
// scopes nest (the previous hook comes back). The hook must outlive the scope.
template <class Hook>
class HookScope {
 public:
  explicit HookScope(const Hook& hook) : previous_(detail::installed_hook<Hook>()) {
    detail::installed_hook<Hook>() = &hook;
  }
  ~HookScope() { detail::installed_hook<Hook>() = previous_; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  const Hook* previous_;
};

template <class T, class Device = cpu>
using ProjectionScope = HookScope<ProjectionHook<T, Device>>;

// Whether a hook is installed on this thread: a fused layer that would hide a projection from it
// (autodiff::glu_mlp's two products) takes its composed form instead.
template <class T, class Device = cpu>
bool projection_hooked() {
  return detail::installed_hook<ProjectionHook<T, Device>>() != nullptr;
}

// x·W (transposed: x·Wᵀ), or what the installed hook makes of it.
template <class T, class Device = cpu>
autodiff::Var<T, Device> project(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> x,
                                 autodiff::Parameter<T, Device>& weight, bool transposed = false) {
  const ProjectionSite<T, Device> site{weight, transposed};
  const ProjectionHook<T, Device>* hook = detail::installed_hook<ProjectionHook<T, Device>>();
  return hook ? (*hook)(tape, x, site) : site.product(tape, x);
}

// ---------------------------------------------------------------------------------------------
// Residual-stream points

template <class T, class Device = cpu>
using StreamHook = std::function<autodiff::Var<T, Device>(autodiff::Tape<T, Device>&, autodiff::Var<T, Device> h,
                                                          const std::string& point)>;

// Installs `hook` at every residual-stream point on this thread until destroyed; scopes nest.
template <class T, class Device = cpu>
using StreamScope = HookScope<StreamHook<T, Device>>;

// h as the rest of the model should see it at the residual-stream point `point`.
template <class T, class Device = cpu>
autodiff::Var<T, Device> stream_point(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> h,
                                      const std::string& point) {
  const StreamHook<T, Device>* hook = detail::installed_hook<StreamHook<T, Device>>();
  if (!hook) return h;
  return (*hook)(tape, h, point);
}

}  // namespace sinklab::nn
