// The reverse-mode core: a Tape records nodes (value, gradient, backward function) in
// creation order, which is a topological order, so backward() is one reverse sweep.
// Var<T, Device> is a cheap handle (tape, index); values and gradients live on Device (cpu by
// default), and the tape's own arithmetic (gradient sums) runs through kernels::backend<Device>.
// A tape is cleared and reused every step: clear() keeps the node array's capacity and tensors
// return to the storage pool.
//
// A tape also carries the precision of its float matrix products (kernels::Precision): fp32, or
// bf16 operands with fp32 accumulation (autocast's bf16). The ops that multiply matrices (matmul,
// glu_mlp) read it when they run forward and keep it for their backward; everything else —
// norms, softmax and attention, losses, the optimizer, gradient sums — stays fp32.
//
//   tape.set_precision(kernels::Precision::bf16);
//   { autodiff::PrecisionScope fp32(tape, kernels::Precision::fp32); y = matmul(x, w); }  // this one in fp32
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/profile.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/backend.hpp"

namespace sinklab::autodiff {

using kernels::backend;

namespace detail {
inline int& no_grad_depth() {
  thread_local int depth = 0;
  return depth;
}
}  // namespace detail

// While alive, operations on this thread record no backward functions.
class no_grad {
 public:
  no_grad() { ++detail::no_grad_depth(); }
  ~no_grad() { --detail::no_grad_depth(); }
  no_grad(const no_grad&) = delete;
  no_grad& operator=(const no_grad&) = delete;
};
inline bool grad_enabled() { return detail::no_grad_depth() == 0; }

template <class T, class Device = cpu>
class Tape;

template <class T, class Device = cpu>
struct Var {
  using device_type = Device;
  Tape<T, Device>* tape = nullptr;
  int32_t id = -1;

  bool defined() const { return tape != nullptr; }
  const Tensor<T, Device>& value() const { return tape->value(*this); }
  // The gradient after backward(); undefined when none reached this Var.
  const Tensor<T, Device>& grad() const { return tape->grad(*this); }
  const Shape& shape() const { return value().shape(); }
  int64_t size(int axis) const { return value().size(axis); }
  int rank() const { return value().rank(); }
  bool requires_grad() const { return tape->requires_grad(*this); }
  T item() const { return value().item(); }
  template <class F>
  void register_hook(F&& f) const {
    tape->register_hook(*this, std::forward<F>(f));
  }
};

template <class T, class Device>
class Tape {
  using K = kernels::backend<Device>;

 public:
  // Called with the complete gradient of the recorded output; accumulates into the inputs.
  using Backward = std::function<void(Tape&, const Tensor<T, Device>& grad_out)>;
  // A hook sees (and may modify) a Var's complete gradient before it flows further back.
  using Hook = std::function<void(Tensor<T, Device>& grad)>;

  Tape() { nodes_.reserve(256); }
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // A leaf holding `value`; its gradient is available after backward() when requires_grad.
  Var<T, Device> leaf(Tensor<T, Device> value, bool requires_grad = true) {
    if (profile::Profiler* p = profile::active()) p->recorded(static_cast<int32_t>(nodes_.size()), typeid(void));
    Node& n = push(value.contiguous());
    n.requires_grad = requires_grad;
    return last();
  }
  Var<T, Device> constant(Tensor<T, Device> value) { return leaf(std::move(value), false); }
  // A leaf bound to a parameter: shares its value and accumulates into parameter.grad.
  Var<T, Device> param(Parameter<T, Device>& p) {
    SINKLAB_CHECK(p.value.defined() && p.value.is_contiguous(), "Tape::param: parameter '", p.name,
                  "' must hold a defined, contiguous tensor");
    Node& n = push(p.value);
    n.requires_grad = p.requires_grad;
    if (p.requires_grad) {
      SINKLAB_CHECK(p.grad.defined() && p.grad.shape() == p.value.shape(), "Tape::param: parameter '", p.name,
                    "' has gradient buffer of shape ", p.grad.shape(), ", expected ", p.value.shape());
      n.grad = p.grad;
    }
    return last();
  }

  // Records the result of an operation. `backward` is kept only if grad is enabled and
  // some input requires grad.
  Var<T, Device> record(Tensor<T, Device> value, std::initializer_list<Var<T, Device>> inputs, Backward backward) {
    return record_from(std::move(value), inputs, std::move(backward));
  }
  // Same, for operations with a run-time number of inputs.
  Var<T, Device> record(Tensor<T, Device> value, const std::vector<Var<T, Device>>& inputs, Backward backward) {
    return record_from(std::move(value), inputs, std::move(backward));
  }

  const Tensor<T, Device>& value(Var<T, Device> v) const { return node(v).value; }
  const Tensor<T, Device>& grad(Var<T, Device> v) const { return node(v).grad; }
  bool requires_grad(Var<T, Device> v) const { return node(v).requires_grad; }

  // Adds `g` into v's gradient. A contiguous `g` is adopted without a copy: a uniquely owned one
  // outright, a shared one (an output's gradient passed on unchanged, as by add and views) as a
  // read-only alias that the first write replaces with a fresh tensor (copy-on-write), so a
  // residual branch costs no gradient copies.
  void accumulate(Var<T, Device> v, Tensor<T, Device> g) {
    Node& n = node(v);
    if (!n.requires_grad) return;
    SINKLAB_CHECK(g.shape() == n.value.shape(), "autodiff: gradient of shape ", g.shape(), " for a value of shape ",
                  n.value.shape(), " (node ", v.id, ")");
    n.reached = true;
    if (!n.grad.defined()) {
      n.grad_aliased = !g.unique_storage() && g.is_contiguous();
      n.grad = g.is_contiguous() ? std::move(g) : g.clone();
      return;
    }
    const Tensor<T, Device> gc = g.contiguous();
    if (n.grad_aliased) {  // sum into a new tensor: the alias belongs to someone else
      Tensor<T, Device> sum = Tensor<T, Device>::empty(n.value.shape());
      K::binary(n.grad.data(), gc.data(), sum.data(), gc.numel(), elem::Add{});
      n.grad = std::move(sum);
      n.grad_aliased = false;
      return;
    }
    K::add_inplace(n.grad.data(), gc.data(), gc.numel());
  }
  // v's gradient buffer for in-place accumulation (zero-filled on first use).
  Tensor<T, Device>& grad_buffer(Var<T, Device> v) {
    Node& n = writable(v);
    if (!n.grad.defined()) n.grad = Tensor<T, Device>::zeros(n.value.shape());
    return n.grad;
  }
  // Same, for a kernel that produces a whole gradient (e.g. a GEMM with beta = fresh ? 0 : 1):
  // on first use the buffer is left uninitialised and `fresh` is set, and the kernel must write
  // every element; otherwise it holds earlier contributions and the kernel must add to them.
  Tensor<T, Device>& grad_buffer(Var<T, Device> v, bool& fresh) {
    Node& n = writable(v);
    fresh = !n.grad.defined();
    if (fresh) n.grad = Tensor<T, Device>::empty(n.value.shape());
    return n.grad;
  }

  // Where a kernel writes v's gradient in one pass, out[i] = prior[i] + its contribution: prior is
  // null on first use (out is uninitialised then), out itself when v owns its gradient (in
  // place), or the aliased gradient (kept alive in `keep`) with out a fresh tensor. Saves the
  // separate read-add-write pass of accumulate().
  struct GradTarget {
    T* out;
    const T* prior;
    Tensor<T, Device> keep;
  };
  GradTarget grad_target(Var<T, Device> v) {
    Node& n = node(v);
    n.reached = true;
    if (!n.grad.defined()) {
      n.grad = Tensor<T, Device>::empty(n.value.shape());
      return {n.grad.data(), nullptr, {}};
    }
    if (n.grad_aliased) {
      Tensor<T, Device> prior = std::move(n.grad);
      n.grad = Tensor<T, Device>::empty(n.value.shape());
      n.grad_aliased = false;
      return {n.grad.data(), prior.data(), prior};
    }
    return {n.grad.data(), n.grad.data(), {}};
  }

  template <class F>
  void register_hook(Var<T, Device> v, F&& f) {
    Node& n = node(v);
    hooks_.push_back({Hook(std::forward<F>(f)), n.hook});
    n.hook = static_cast<int32_t>(hooks_.size() - 1);
  }

  // Back-propagates from a scalar root (seed 1).
  void backward(Var<T, Device> root) {
    SINKLAB_CHECK(node(root).value.numel() == 1, "Tape::backward: root has shape ", node(root).value.shape(),
                  "; pass a seed gradient for non-scalar roots");
    backward(root, Tensor<T, Device>::ones(node(root).value.shape()));
  }
  void backward(Var<T, Device> root, Tensor<T, Device> seed) {
    Node& r = node(root);
    SINKLAB_CHECK(r.requires_grad, "Tape::backward: the root does not depend on anything that requires grad");
    accumulate(root, std::move(seed));
    for (int32_t i = root.id; i >= 0; --i) {
      Node& n = nodes_[i];
      if (!n.reached) continue;
      if (n.hook >= 0) unalias(n);  // hooks may modify the gradient in place
      for (int32_t h = n.hook; h >= 0; h = hooks_[h].next) hooks_[h].fn(n.grad);
      if (n.backward) {
        // Each backward function runs once: it is released as it runs, with what it captured.
        Backward fn = std::move(n.backward);
        if (profile::Profiler* p = profile::active()) {
          const double t0 = profile::now_seconds();
          fn(*this, n.grad);
          p->backward_ran(i, profile::now_seconds() - t0);
        } else {
          fn(*this, n.grad);
        }
      }
    }
  }

  // Drops every node; capacity is kept for the next step.
  void clear() {
    nodes_.clear();
    hooks_.clear();
  }
  std::size_t size() const { return nodes_.size(); }
  std::size_t capacity() const { return nodes_.capacity(); }

  // The precision of the float matrix products recorded from now on (kept across clear()).
  kernels::Precision precision() const { return precision_; }
  void set_precision(kernels::Precision p) { precision_ = p; }

 private:
  struct Node {
    Tensor<T, Device> value;
    Tensor<T, Device> grad;
    Backward backward;
    bool requires_grad = false;
    bool reached = false;
    int32_t hook = -1;
    bool grad_aliased = false;  // grad shares another tensor's storage (see accumulate)
  };
  struct HookEntry {
    Hook fn;
    int32_t next;
  };

  static void unalias(Node& n) {
    if (!n.grad_aliased) return;
    n.grad = n.grad.clone();
    n.grad_aliased = false;
  }
  // v's node, reached, with a gradient (if any) that may be written in place.
  Node& writable(Var<T, Device> v) {
    Node& n = node(v);
    n.reached = true;
    unalias(n);
    return n;
  }

  template <class Inputs>
  Var<T, Device> record_from(Tensor<T, Device> value, const Inputs& inputs, Backward backward) {
    bool rg = false;
    if (grad_enabled())
      for (const Var<T, Device>& v : inputs) {
        check_same_tape(v);
        rg = rg || nodes_[v.id].requires_grad;
      }
    if (profile::Profiler* p = profile::active()) p->recorded(static_cast<int32_t>(nodes_.size()), backward.target_type());
    Node& n = push(std::move(value));
    n.requires_grad = rg;
    if (rg) n.backward = std::move(backward);
    return last();
  }

  Node& push(Tensor<T, Device> value) {
    SINKLAB_CHECK(value.defined(), "autodiff: recording an undefined tensor");
    nodes_.push_back(Node{std::move(value), {}, {}, false, false, -1});
    return nodes_.back();
  }
  Var<T, Device> last() { return Var<T, Device>{this, static_cast<int32_t>(nodes_.size() - 1)}; }
  void check_same_tape(Var<T, Device> v) const {
    SINKLAB_CHECK(v.tape == this, "autodiff: an operation mixes Vars from different tapes (or an undefined Var)");
  }
  Node& node(Var<T, Device> v) {
    check_same_tape(v);
    SINKLAB_CHECK(v.id >= 0 && v.id < static_cast<int32_t>(nodes_.size()), "autodiff: Var id ", v.id,
                  " is not on this tape (was the tape cleared?)");
    return nodes_[v.id];
  }
  const Node& node(Var<T, Device> v) const { return const_cast<Tape*>(this)->node(v); }

  std::vector<Node> nodes_;
  std::vector<HookEntry> hooks_;
  kernels::Precision precision_ = kernels::Precision::fp32;
};

// Sets a tape's precision for a scope (e.g. one product kept in fp32 inside a bf16 model), and
// restores the previous one when it ends.
template <class T, class Device>
class PrecisionScope {
 public:
  PrecisionScope(Tape<T, Device>& t, kernels::Precision p) : tape_(t), before_(t.precision()) { t.set_precision(p); }
  ~PrecisionScope() { tape_.set_precision(before_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Tape<T, Device>& tape_;
  kernels::Precision before_;
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class Tape<float>)

}  // namespace sinklab::autodiff
