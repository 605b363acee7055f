// SGD with momentum, PyTorch's update rule (torch.optim.SGD):
//   g ← g + wd·p
//   b ← g on the first step, else b ← μ·b + (1−dampening)·g
//   g ← g + μ·b (nesterov) or g ← b
//   p ← p − lr·g
// lr is the group's lr times a global scale set by a schedule. The momentum buffer is kept
// per parameter and looked up by parameter name.
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
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/optim/param_group.hpp"

namespace sinklab::optim {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

template <class T>
struct SGDState {
  Tensor<T> momentum;  // the buffer b; meaningful once step > 0
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

template <class T>
class SGD : public OptimizerBase<T, SGDOptions, SGDState<T>> {
  using Base = OptimizerBase<T, SGDOptions, SGDState<T>>;

 public:
  using Options = SGDOptions;
  using Group = ParamGroup<T, SGDOptions>;
  using State = SGDState<T>;

  explicit SGD(std::vector<Group> groups) : Base("SGD") {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit SGD(std::vector<autodiff::Parameter<T>*> params, Options opts = {})
      : SGD(std::vector<Group>{Group{std::move(params), opts}}) {}
  // Lets SGD<T>({&a, &b}) pick the single-group form (a two-pointer list would otherwise
  // also match vector<Group>'s iterator-pair constructor).
  explicit SGD(std::initializer_list<autodiff::Parameter<T>*> params, Options opts = {})
      : SGD(std::vector<autodiff::Parameter<T>*>(params), opts) {}

  void add_param_group(Group g) {
    detail::check_sgd_options(g.opts, this->groups_.size());
    this->append_group(std::move(g), [](const autodiff::Parameter<T>& p) { return State{Tensor<T>::zeros(p.shape()), 0}; });
  }

  void step() {
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < this->groups_.size(); ++gi) {
      const Group& g = this->groups_[gi];
      detail::check_sgd_options(g.opts, gi);
      const T lr = static_cast<T>(g.opts.lr * this->lr_scale_);
      const T wd = static_cast<T>(g.opts.weight_decay);
      const T mu = static_cast<T>(g.opts.momentum);
      const T keep = static_cast<T>(1.0 - g.opts.dampening);
      const bool use_momentum = g.opts.momentum != 0;
      const bool nesterov = g.opts.nesterov;
      for (auto* p : g.params) {
        State& st = this->states_[k++];
        if (!p->requires_grad) continue;
        detail::check_trainable("SGD::step", *p);
        SINKLAB_CHECK(st.momentum.shape() == p->shape() && st.momentum.is_contiguous(), "SGD::step: momentum of '",
                      p->name, "' has shape ", st.momentum.shape(), " but the parameter has shape ", p->shape(),
                      " (it must also be contiguous)");
        const bool first = st.step == 0;
        ++st.step;
        T* pv = p->value.data();
        const T* gv = p->grad.data();
        T* bv = st.momentum.data();
        parallel_for(0, p->numel(), kGrain, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) {
            T d = gv[i] + wd * pv[i];
            if (use_momentum) {
              const T b = first ? d : mu * bv[i] + keep * d;
              bv[i] = b;
              d = nesterov ? d + mu * b : b;
            }
            pv[i] -= lr * d;
          }
        });
      }
    }
    ++this->step_count_;
  }

 private:
  static constexpr int64_t kGrain = int64_t{1} << 15;
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class OptimizerBase<float, SGDOptions, SGDState<float>>)
SINKLAB_EXTERN_TEMPLATE(class SGD<float>)

}  // namespace sinklab::optim
