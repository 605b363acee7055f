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
class SGD {
 public:
  using Options = SGDOptions;
  using Group = ParamGroup<T, SGDOptions>;
  using State = SGDState<T>;

  explicit SGD(std::vector<Group> groups) {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit SGD(std::vector<autodiff::Parameter<T>*> params, Options opts = {})
      : SGD(std::vector<Group>{Group{std::move(params), opts}}) {}
  // Lets SGD<T>({&a, &b}) pick the single-group form (a two-pointer list would otherwise
  // also match vector<Group>'s iterator-pair constructor).
  explicit SGD(std::initializer_list<autodiff::Parameter<T>*> params, Options opts = {})
      : SGD(std::vector<autodiff::Parameter<T>*>(params), opts) {}

  void add_param_group(Group g) {
    detail::check_sgd_options(g.opts, groups_.size());
    std::vector<Group> all = groups_;
    all.push_back(g);
    detail::check_groups("SGD", all);
    for (auto* p : g.params) {
      index_.emplace(p->name, states_.size());
      states_.push_back(State{Tensor<T>::zeros(p->shape()), 0});
    }
    groups_.push_back(std::move(g));
  }

  void step() {
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& g = groups_[gi];
      detail::check_sgd_options(g.opts, gi);
      const T lr = static_cast<T>(g.opts.lr * lr_scale_);
      const T wd = static_cast<T>(g.opts.weight_decay);
      const T mu = static_cast<T>(g.opts.momentum);
      const T keep = static_cast<T>(1.0 - g.opts.dampening);
      const bool use_momentum = g.opts.momentum != 0;
      const bool nesterov = g.opts.nesterov;
      for (auto* p : g.params) {
        State& st = states_[k++];
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
    ++step_count_;
  }

  void zero_grad() {
    for (auto& g : groups_)
      for (auto* p : g.params)
        if (p->grad.defined()) p->zero_grad();
  }

  void set_lr_scale(double s) {
    SINKLAB_CHECK(std::isfinite(s) && s >= 0, "SGD::set_lr_scale: scale ", s, ", expected a finite value >= 0");
    lr_scale_ = s;
  }
  double lr_scale() const { return lr_scale_; }

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n) {
    SINKLAB_CHECK(n >= 0, "SGD::set_step_count: ", n, ", expected >= 0");
    step_count_ = n;
  }

  std::vector<Group>& groups() { return groups_; }
  const std::vector<Group>& groups() const { return groups_; }

  bool has_state(const std::string& name) const { return index_.count(name) != 0; }
  State& state(const std::string& name) { return states_[index_of(name)]; }
  const State& state(const std::string& name) const { return states_[index_of(name)]; }
  template <class F>
  void for_each_state(F&& f) {
    std::size_t k = 0;
    for (auto& g : groups_)
      for (auto* p : g.params) f(p->name, states_[k++]);
  }

 private:
  static constexpr int64_t kGrain = int64_t{1} << 15;

  std::size_t index_of(const std::string& name) const {
    auto it = index_.find(name);
    SINKLAB_CHECK(it != index_.end(), "SGD::state: no parameter named '", name, "'");
    return it->second;
  }

  std::vector<Group> groups_;
  std::vector<State> states_;
  std::unordered_map<std::string, std::size_t> index_;
  double lr_scale_ = 1.0;
  int64_t step_count_ = 0;
};

}  // namespace sinklab::optim
