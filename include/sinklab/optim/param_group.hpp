// A list of parameters that share one set of optimiser options, and the checks every
// optimiser runs on the groups it is given.
#pragma once
#include <cmath>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <string>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"

namespace sinklab::optim {

template <class T, class Options, class Device = cpu>
struct ParamGroup {
  std::vector<autodiff::Parameter<T, Device>*> params;
  Options opts{};
};

namespace detail {

// Optimiser state is keyed by parameter name (so checkpoints can find it), hence names must
// be non-empty and unique across all groups, and every pointer must be set.
template <class T, class Options, class Device>
void check_groups(const char* who, const std::vector<ParamGroup<T, Options, Device>>& groups) {
  std::set<std::string> seen;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t i = 0; i < groups[g].params.size(); ++i) {
      const autodiff::Parameter<T, Device>* p = groups[g].params[i];
      SINKLAB_CHECK(p != nullptr, who, ": parameter ", i, " of group ", g, " is a null pointer");
      SINKLAB_CHECK(!p->name.empty(), who, ": parameter ", i, " of group ", g, " has an empty name");
      SINKLAB_CHECK(seen.insert(p->name).second, who, ": parameter name '", p->name,
                    "' appears more than once; optimiser state is keyed by name");
    }
  }
}

// The update loops run over raw contiguous buffers of matching size.
template <class T, class Device>
void check_trainable(const char* who, const autodiff::Parameter<T, Device>& p) {
  SINKLAB_CHECK(p.value.defined() && p.grad.defined(), who, ": parameter '", p.name,
                "' has no value or gradient tensor");
  SINKLAB_CHECK(p.grad.shape() == p.value.shape(), who, ": parameter '", p.name, "' has value shape ",
                p.value.shape(), " but gradient shape ", p.grad.shape());
  SINKLAB_CHECK(p.value.is_contiguous() && p.grad.is_contiguous(), who, ": parameter '", p.name,
                "' must have contiguous value and gradient tensors");
}

}  // namespace detail
// The bookkeeping every optimiser shares: parameter groups, one state per parameter (kept in
// group order and found by parameter name, so checkpoints can save and restore it), a
// learning-rate multiplier for schedules and the step count.
template <class T, class Options, class State, class Device = cpu>
class OptimizerBase {
 public:
  using Group = ParamGroup<T, Options, Device>;

  // Frozen parameters may have no gradient tensor; they are skipped.
  void zero_grad() {
    for (auto& g : groups_)
      for (auto* p : g.params)
        if (p->grad.defined()) p->zero_grad();
  }

  // Multiplies every group's lr (a schedule's output).
  void set_lr_scale(double s) {
    SINKLAB_CHECK(std::isfinite(s) && s >= 0, name_, "::set_lr_scale: scale ", s, ", expected a finite value >= 0");
    lr_scale_ = s;
  }
  double lr_scale() const { return lr_scale_; }

  // Calls to step() so far (restored from checkpoints with set_step_count).
  const char* name() const { return name_; }
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n) {
    SINKLAB_CHECK(n >= 0, name_, "::set_step_count: ", n, ", expected >= 0");
    step_count_ = n;
  }

  std::vector<Group>& groups() { return groups_; }
  const std::vector<Group>& groups() const { return groups_; }

  bool has_state(const std::string& name) const { return index_.count(name) != 0; }
  State& state(const std::string& name) { return states_[index_of(name)]; }
  const State& state(const std::string& name) const { return states_[index_of(name)]; }
  // Visits (parameter name, state) in group order.
  template <class F>
  void for_each_state(F&& f) {
    std::size_t k = 0;
    for (auto& g : groups_)
      for (auto* p : g.params) f(p->name, states_[k++]);
  }

 protected:
  explicit OptimizerBase(const char* name) : name_(name) {}

  // Checks the group against those already added and creates each parameter's state with
  // make_state(parameter) — at once, so a checkpoint can be restored before the first step.
  template <class MakeState>
  void append_group(Group g, MakeState&& make_state) {
    std::vector<Group> all = groups_;
    all.push_back(g);
    detail::check_groups(name_, all);
    for (auto* p : g.params) {
      index_.emplace(p->name, states_.size());
      states_.push_back(make_state(*p));
    }
    groups_.push_back(std::move(g));
  }

  const char* name_;
  std::vector<Group> groups_;
  std::vector<State> states_;  // in the order of groups_ and their params
  double lr_scale_ = 1.0;
  int64_t step_count_ = 0;

 private:
  std::size_t index_of(const std::string& name) const {
    auto it = index_.find(name);
    SINKLAB_CHECK(it != index_.end(), name_, "::state: no parameter named '", name, "'");
    return it->second;
  }
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace sinklab::optim
