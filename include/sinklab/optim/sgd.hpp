// SGD with momentum, PyTorch's update rule (torch.optim.SGD):
//   g ← g + wd·p
//   b ← g on the first step, else b ← μ·b + (1−dampening)·g
//   g ← g + μ·b (nesterov) or g ← b
//   p ← p − lr·g
// lr is the group's lr times a global scale set by a schedule. The momentum buffer is kept
// per parameter and looked up by parameter name. The parameters' device (a template argument, cpu
// by default) runs the update, policy::SGDUpdate (policy/update.hpp), through its backend.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/backend.hpp"
#include "sinklab/optim/param_group.hpp"
#include "sinklab/policy/update.hpp"

namespace sinklab::optim {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

template <class T, class Device = cpu>
struct SGDState {
  Tensor<T, Device> momentum;  // the buffer b; meaningful once step > 0
  int64_t step = 0;

  template <class F>
  void tensors(F&& f) {
    f("momentum_buffer", momentum);
  }
};

namespace detail {

inline void check_sgd_options(const SGDOptions& o, std::size_t group) {
  SINKLAB_CHECK(std::isfinite(o.lr) && o.lr >= 0, "SGD: group ", group, " has lr ", o.lr, ", expected >= 0");
  SINKLAB_CHECK(std::isfinite(o.momentum) && o.momentum >= 0, "SGD: group ", group, " has momentum ", o.momentum,
                ", expected >= 0");
  SINKLAB_CHECK(std::isfinite(o.dampening), "SGD: group ", group, " has dampening ", o.dampening,
                ", expected a finite value");
  SINKLAB_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "SGD: group ", group, " has weight_decay ",
                o.weight_decay, ", expected >= 0");
  SINKLAB_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD: group ", group,
                " uses nesterov, which needs momentum > 0 and dampening 0 (got momentum ", o.momentum,
                ", dampening ", o.dampening, ")");
}

}  // namespace detail

template <class T, class Device = cpu>
class SGD : public OptimizerBase<T, SGDOptions, SGDState<T, Device>, Device> {
  using Base = OptimizerBase<T, SGDOptions, SGDState<T, Device>, Device>;

 public:
  using Options = SGDOptions;
  using Group = ParamGroup<T, SGDOptions, Device>;
  using State = SGDState<T, Device>;

  explicit SGD(std::vector<Group> groups) : Base("SGD") {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit SGD(std::vector<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : SGD(std::vector<Group>{Group{std::move(params), opts}}) {}
  // Lets SGD<T>({&a, &b}) pick the single-group form (a two-pointer list would otherwise
  // also match vector<Group>'s iterator-pair constructor).
  explicit SGD(std::initializer_list<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : SGD(std::vector<autodiff::Parameter<T, Device>*>(params), opts) {}

  void add_param_group(Group g) {
    detail::check_sgd_options(g.opts, this->groups_.size());
    this->append_group(std::move(g), [](const autodiff::Parameter<T, Device>& p) {
      return State{Tensor<T, Device>::zeros(p.shape()), 0};
    });
  }

  void step() {
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < this->groups_.size(); ++gi) {
      const Group& g = this->groups_[gi];
      detail::check_sgd_options(g.opts, gi);
      policy::SGDUpdate<T> u{static_cast<T>(g.opts.lr * this->lr_scale_),
                             static_cast<T>(g.opts.weight_decay),
                             static_cast<T>(g.opts.momentum),
                             static_cast<T>(1.0 - g.opts.dampening),
                             g.opts.momentum != 0,
                             false,
                             g.opts.nesterov};
      for (auto* p : g.params) {
        State& st = this->states_[k++];
        if (!p->requires_grad) continue;
        detail::check_trainable("SGD::step", *p);
        SINKLAB_CHECK(st.momentum.shape() == p->shape() && st.momentum.is_contiguous(), "SGD::step: momentum of '",
                      p->name, "' has shape ", st.momentum.shape(), " but the parameter has shape ", p->shape(),
                      " (it must also be contiguous)");
        u.first = st.step == 0;
        ++st.step;
        kernels::backend<Device>::apply_update(p->numel(), u, p->value.data(), static_cast<const T*>(p->grad.data()),
                                               st.momentum.data());
      }
    }
    ++this->step_count_;
  }
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class OptimizerBase<float, SGDOptions, SGDState<float>>)
SINKLAB_EXTERN_TEMPLATE(class SGD<float>)

}  // namespace sinklab::optim
