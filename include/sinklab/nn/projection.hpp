// The seam at the input of every weight projection y = x·W: nn::Linear, the attention's fused
// QKV, gate and output projections, and a tied LM head all pass their input through
// projection_input(tape, x, weight) before the matmul. With no hook installed (the normal
// case) it returns x unchanged after one thread-local pointer test; a ProjectionInputScope
// installs a hook for the forward passes run on this thread while it lives, e.g. the
// activation fake-quantizers and calibration observers of quant/model.hpp. A hook sees which
// weight the input is about to meet (so it can keep per-site state keyed by the weight's
// name) and returns the Var the matmul should use instead.
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

template <class T>
struct ProjectionSite {
  autodiff::Parameter<T>& weight;  // the projection's weight
  bool transposed = false;         // false: y = x·W with W [in, out]; true: y = x·Wᵀ (tied LM head)
};

template <class T>
using ProjectionInputHook = std::function<autodiff::Var<T>(autodiff::Tape<T>&, autodiff::Var<T> x, const ProjectionSite<T>&)>;

namespace detail {
template <class T>
const ProjectionInputHook<T>*& projection_input_hook() {
  thread_local const ProjectionInputHook<T>* hook = nullptr;
  return hook;
}
}  // namespace detail

// Installs `hook` on this thread until destroyed; scopes nest (the previous hook comes back).
// The hook must outlive the scope.
template <class T>
class ProjectionInputScope {
 public:
  explicit ProjectionInputScope(const ProjectionInputHook<T>& hook) : previous_(detail::projection_input_hook<T>()) {
    detail::projection_input_hook<T>() = &hook;
  }
  ~ProjectionInputScope() { detail::projection_input_hook<T>() = previous_; }
  ProjectionInputScope(const ProjectionInputScope&) = delete;
  ProjectionInputScope& operator=(const ProjectionInputScope&) = delete;

 private:
  const ProjectionInputHook<T>* previous_;
};

// Whether a hook is installed on this thread: a fused layer that would hide a projection's input
// from it (autodiff::glu_mlp's hidden activations) takes its composed form instead.
template <class T>
bool projection_input_hooked() {
  return detail::projection_input_hook<T>() != nullptr;
}

// x as the projection with `weight` should see it.
template <class T>
autodiff::Var<T> projection_input(autodiff::Tape<T>& tape, autodiff::Var<T> x, autodiff::Parameter<T>& weight,
                                  bool transposed = false) {
  const ProjectionInputHook<T>* hook = detail::projection_input_hook<T>();
  if (!hook) return x;
  return (*hook)(tape, x, ProjectionSite<T>{weight, transposed});
}

// ---------------------------------------------------------------------------------------------
// Residual-stream points

template <class T>
using StreamHook = std::function<autodiff::Var<T>(autodiff::Tape<T>&, autodiff::Var<T> h, const std::string& point)>;

namespace detail {
template <class T>
const StreamHook<T>*& stream_hook() {
  thread_local const StreamHook<T>* hook = nullptr;
  return hook;
}
}  // namespace detail

// Installs `hook` at every residual-stream point on this thread until destroyed; scopes nest.
template <class T>
class StreamScope {
 public:
  explicit StreamScope(const StreamHook<T>& hook) : previous_(detail::stream_hook<T>()) { detail::stream_hook<T>() = &hook; }
  ~StreamScope() { detail::stream_hook<T>() = previous_; }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  const StreamHook<T>* previous_;
};

// h as the rest of the model should see it at the residual-stream point `point`.
template <class T>
autodiff::Var<T> stream_point(autodiff::Tape<T>& tape, autodiff::Var<T> h, const std::string& point) {
  const StreamHook<T>* hook = detail::stream_hook<T>();
  if (!hook) return h;
  return (*hook)(tape, h, point);
}

}  // namespace sinklab::nn
