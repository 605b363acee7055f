// AdamW with decoupled weight decay and PyTorch's update rule (torch.optim.AdamW, amsgrad off;
// the update is policy/update.hpp's, on whichever device the parameters live). lr is the group's
// lr times a global scale set by a schedule. State (m, v, step) is kept per parameter and looked
// up by parameter name, so checkpoints can save and restore it.
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

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

template <class T, class Device = cpu>
struct AdamWState {
  Tensor<T, Device> m;  // first moment (exp_avg)
  Tensor<T, Device> v;  // second moment (exp_avg_sq)
  int64_t step = 0;  // updates applied to this parameter; drives the bias correction

  // The state's tensors by name (checkpoints go through this; PyTorch's names).
  template <class F>
  void tensors(F&& f) {
    f("exp_avg", m);
    f("exp_avg_sq", v);
  }
};

namespace detail {

inline void check_adamw_options(const AdamWOptions& o, std::size_t group) {
  SINKLAB_CHECK(std::isfinite(o.lr) && o.lr >= 0, "AdamW: group ", group, " has lr ", o.lr, ", expected >= 0");
  SINKLAB_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "AdamW: group ", group, " has betas (",
                o.beta1, ", ", o.beta2, "), expected each in [0, 1)");
  SINKLAB_CHECK(std::isfinite(o.eps) && o.eps >= 0, "AdamW: group ", group, " has eps ", o.eps, ", expected >= 0");
  SINKLAB_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "AdamW: group ", group, " has weight_decay ",
                o.weight_decay, ", expected >= 0");
}

}  // namespace detail

// The parameters' device (a template argument, cpu by default) runs the update: its backend's
// apply_update (kernels/cpu/update.hpp; the CUDA backend's on a GPU), the math policy::adamw_update.
template <class T, class Device = cpu>
class AdamW : public OptimizerBase<T, AdamWOptions, AdamWState<T, Device>, Device> {
  using Base = OptimizerBase<T, AdamWOptions, AdamWState<T, Device>, Device>;

 public:
  using Options = AdamWOptions;
  using Group = ParamGroup<T, AdamWOptions, Device>;
  using State = AdamWState<T, Device>;

  explicit AdamW(std::vector<Group> groups) : Base("AdamW") {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit AdamW(std::vector<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : AdamW(std::vector<Group>{Group{std::move(params), opts}}) {}
  // Lets AdamW<T>({&a, &b}) pick the single-group form (a two-pointer list would otherwise
  // also match vector<Group>'s iterator-pair constructor).
  explicit AdamW(std::initializer_list<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : AdamW(std::vector<autodiff::Parameter<T, Device>*>(params), opts) {}

  // State tensors are created (zero, step 0) when a group is added, so a checkpoint can be
  // restored into them before the first step.
  void add_param_group(Group g) {
    detail::check_adamw_options(g.opts, this->groups_.size());
    this->append_group(std::move(g), [](const autodiff::Parameter<T, Device>& p) {
      return State{Tensor<T, Device>::zeros(p.shape()), Tensor<T, Device>::zeros(p.shape()), 0};
    });
  }

  void step() {
    std::size_t k = 0;  // this->states_ follows the order of this->groups_ and their params
    for (std::size_t gi = 0; gi < this->groups_.size(); ++gi) {
      const Group& g = this->groups_[gi];
      detail::check_adamw_options(g.opts, gi);
      const double lr = g.opts.lr * this->lr_scale_;
      for (auto* p : g.params) {
        State& st = this->states_[k++];
        if (!p->requires_grad) continue;
        detail::check_trainable("AdamW::step", *p);
        SINKLAB_CHECK(st.m.shape() == p->shape() && st.v.shape() == p->shape(), "AdamW::step: state of '", p->name,
                      "' has shapes m ", st.m.shape(), ", v ", st.v.shape(), " but the parameter has shape ",
                      p->shape());
        SINKLAB_CHECK(st.m.is_contiguous() && st.v.is_contiguous(), "AdamW::step: state of '", p->name,
                      "' must be contiguous");
        ++st.step;
        const double t = static_cast<double>(st.step);
        const double bc1 = 1.0 - std::pow(g.opts.beta1, t);
        const double bc2 = 1.0 - std::pow(g.opts.beta2, t);
        const policy::AdamWCoefs<T> c{static_cast<T>(1.0 - lr * g.opts.weight_decay),
                                      static_cast<T>(g.opts.beta1),
                                      static_cast<T>(1.0 - g.opts.beta1),
                                      static_cast<T>(g.opts.beta2),
                                      static_cast<T>(1.0 - g.opts.beta2),
                                      static_cast<T>(lr / bc1),
                                      static_cast<T>(1.0 / std::sqrt(bc2)),
                                      static_cast<T>(g.opts.eps)};
        kernels::backend<Device>::apply_update(p->numel(), policy::AdamWUpdate<T>{c}, p->value.data(),
                                               static_cast<const T*>(p->grad.data()), st.m.data(), st.v.data());
      }
    }
    ++this->step_count_;
  }
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class OptimizerBase<float, AdamWOptions, AdamWState<float>>)
SINKLAB_EXTERN_TEMPLATE(class AdamW<float>)

}  // namespace sinklab::optim
