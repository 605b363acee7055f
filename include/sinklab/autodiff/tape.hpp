// The reverse-mode core: a Tape records nodes (value, gradient, backward function) in
// creation order, which is a topological order, so backward() is one reverse sweep.
// Var<T, Device> is a cheap handle (tape, index); values and gradients live on Device (cpu by
// default), and the tape's own arithmetic (gradient sums) runs through kernels::backend<Device>.
// A tape is cleared and reused every step: clear() keeps the node array's capacity and tensors
// return to the storage pool.
//
// A tape also carries the precision of its float matrix products (kernels::Precision): fp32, or
// bf16 operands with fp32 accumulation (autocast's bf16). The ops that multiply matrices (matmul,
// glu_mlp, the fused attention's Q·Kᵀ and P·V) read it when they run forward and keep it for their
// backward; everything else — norms, softmax and its statistics, losses, the optimizer, gradient
// sums — stays fp32.
//
//   tape.set_precision(kernels::Precision::bf16);
//   { autodiff::PrecisionScope fp32(tape, kernels::Precision::fp32); y = matmul(x, w); }  // this one in fp32
//
// A new tape starts at the process's default precision, fp32 unless set_default_precision or a
// DefaultPrecision scope says otherwise: the experiments' --precision flag sets it for every tape
// their runs create, as torch.autocast covers the ops run inside it.
//
// The non-finite guard (off by default; on in the examples, --no-check-finite turns it off):
// while autodiff::CheckFinite is alive (or after set_check_finite(true)), every value a tape
// records and every gradient it sums is scanned, and the first NaN or Inf stops the step with a
// NonFinite error naming the op (the function that recorded the node, as the profiler names
// it), the node, the shape and, for a gradient, the node it reached (an op's output or a
// parameter) and the op whose backward last wrote it. It costs one read of every value and of
// every complete gradient (checked when backward() reaches its node).
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
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

namespace detail {
inline std::atomic<bool>& check_finite_flag() {
  static std::atomic<bool> on{false};
  return on;
}
}  // namespace detail

// The non-finite guard for every tape of the process (see the top of this file).
inline void set_check_finite(bool on) { detail::check_finite_flag().store(on, std::memory_order_relaxed); }
inline bool check_finite() { return detail::check_finite_flag().load(std::memory_order_relaxed); }
// The precision new tapes start with (see the top of this file).
namespace detail {
inline std::atomic<int>& default_precision_value() {
  static std::atomic<int> p{static_cast<int>(kernels::Precision::fp32)};
  return p;
}
}  // namespace detail
inline void set_default_precision(kernels::Precision p) {
  detail::default_precision_value().store(static_cast<int>(p), std::memory_order_relaxed);
}
inline kernels::Precision default_precision() {
  return static_cast<kernels::Precision>(detail::default_precision_value().load(std::memory_order_relaxed));
}
// Sets the default precision of new tapes for a scope and restores the previous one.
class DefaultPrecision {
 public:
  explicit DefaultPrecision(kernels::Precision p) : before_(default_precision()) { set_default_precision(p); }
  ~DefaultPrecision() { set_default_precision(before_); }
  DefaultPrecision(const DefaultPrecision&) = delete;
  DefaultPrecision& operator=(const DefaultPrecision&) = delete;

 private:
  kernels::Precision before_;
};

// Turns the guard on (or off) for a scope and restores the previous setting.
class CheckFinite {
 public:
  explicit CheckFinite(bool on = true) : before_(check_finite()) { set_check_finite(on); }
  ~CheckFinite() { set_check_finite(before_); }
  CheckFinite(const CheckFinite&) = delete;
  CheckFinite& operator=(const CheckFinite&) = delete;

 private:
  bool before_;
};

// Thrown by the guard; what() names the op, the node and the parameter where it is known.
struct NonFinite : Error {
  using Error::Error;
};

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
    if (check_finite()) guard_value(static_cast<int32_t>(nodes_.size() - 1));
    return last();
  }
  Var<T, Device> constant(Tensor<T, Device> value) { return leaf(std::move(value), false); }
  // A leaf bound to a parameter: shares its value and accumulates into parameter.grad.
  Var<T, Device> param(Parameter<T, Device>& p) {
    SINKLAB_CHECK(p.value.defined() && p.value.is_contiguous(), "Tape::param: parameter '", p.name,
                  "' must hold a defined, contiguous tensor");
    Node& n = push(p.value);
    n.param = &p;
    n.requires_grad = p.requires_grad;
    if (p.requires_grad) {
      SINKLAB_CHECK(p.grad.defined() && p.grad.shape() == p.value.shape(), "Tape::param: parameter '", p.name,
                    "' has gradient buffer of shape ", p.grad.shape(), ", expected ", p.value.shape());
      n.grad = p.grad;
    }
    if (check_finite()) guard_value(static_cast<int32_t>(nodes_.size() - 1));
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
  // The parameter a param() leaf is bound to (null for every other node). A parameter's gradient
  // is complete once backward() has visited the first leaf recorded for it, which is how
  // data-parallel training starts reducing it while the backward pass goes on (dist/).
  const Parameter<T, Device>* bound_parameter(Var<T, Device> v) const { return node(v).param; }

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
    n.grad_from = running_;
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
    n.grad_from = running_;
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
    running_ = -1;
    accumulate(root, std::move(seed));
    const bool guard = check_finite();
    struct Done {  // gradients written outside backward() are nobody's backward
      int32_t& r;
      ~Done() { r = -1; }
    } done{running_};
    for (int32_t i = root.id; i >= 0; --i) {
      Node& n = nodes_[i];
      if (!n.reached) continue;
      if (n.hook >= 0) unalias(n);  // hooks may modify the gradient in place
      for (int32_t h = n.hook; h >= 0; h = hooks_[h].next) hooks_[h].fn(n.grad);
      // Its gradient is complete: every consumer's backward has run.
      if (guard && n.grad.defined()) guard_gradient(i, n.grad, n.grad_from);
      running_ = i;
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
    int32_t grad_from = -1;     // the node whose backward last wrote grad (-1: backward's seed)
    const std::type_info* op = &typeid(void);  // the recording function's closure type (leaves: void)
    const Parameter<T, Device>* param = nullptr;  // the parameter a param() leaf is bound to
  };

  // What a node is, for the guard's messages: "parameter 'layers.0.attn.qkv'" or "op 'matmul'".
  std::string describe(int32_t i) const {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    if (n.param) return "parameter '" + n.param->name + "' (node " + std::to_string(i) + ")";
    return "op '" + profile::op_name(*n.op) + "' (node " + std::to_string(i) + ", shape " +
           shape_text(n.value.shape()) + ")";
  }
  static std::string shape_text(const Shape& s) {
    std::ostringstream os;
    os << s;
    return os.str();
  }
  // The first NaN or Inf of t (its index in t's elements, row-major) and its text; an index < 0:
  // none. The scan is the device's kernel (a GPU's tensors are scanned on the GPU, which returns
  // its blocks' first indices); of the values, only the element found comes to the host.
  static std::pair<int64_t, std::string> non_finite_at(const Tensor<T, Device>& t) {
    if constexpr (std::is_floating_point_v<T>) {
      const Tensor<T, Device> c = t.contiguous();
      const int64_t at = kernels::backend<Device>::first_non_finite(c.data(), c.numel());
      if (at < 0) return {at, {}};
      T x{};
      memory<Device>::to_host(&x, c.data() + at, 1);
      return {at, std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf"};
    } else {
      return {-1, {}};
    }
  }
  void guard_value(int32_t i) const {
    const auto [at, text] = non_finite_at(nodes_[static_cast<std::size_t>(i)].value);
    if (at < 0) return;
    throw NonFinite("autodiff: the forward value of " + describe(i) + " holds " + text + " at element " +
                    std::to_string(at) + " (the first non-finite value recorded on this tape)");
  }
  void guard_gradient(int32_t i, const Tensor<T, Device>& g, int32_t from) const {
    const auto [at, text] = non_finite_at(g);
    if (at < 0) return;
    throw NonFinite("autodiff: a gradient holding " + text + " at element " + std::to_string(at) + " reached " +
                    describe(i) +
                    (from >= 0 ? ", written by the backward of " + describe(from) : std::string(", from the seed")) +
                    " (the first non-finite gradient of this backward pass)");
  }
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
    n.grad_from = running_;
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
    n.op = &backward.target_type();
    if (rg) n.backward = std::move(backward);
    if (check_finite()) guard_value(static_cast<int32_t>(nodes_.size() - 1));
    return last();
  }

  Node& push(Tensor<T, Device> value) {
    SINKLAB_CHECK(value.defined(), "autodiff: recording an undefined tensor");
    nodes_.push_back(Node{std::move(value), {}, {}, false, false, -1, false, -1, &typeid(void), nullptr});
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
  kernels::Precision precision_ = default_precision();
  int32_t running_ = -1;  // the node whose backward function is running (-1: none)
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
