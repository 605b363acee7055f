// A list of parameters that share one set of optimiser options, and the checks every
// optimiser runs on the groups it is given.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"

namespace sinklab::optim {

template <class T, class Options>
struct ParamGroup {
  std::vector<autodiff::Parameter<T>*> params;
  Options opts{};
};

namespace detail {

// Optimiser state is keyed by parameter name (so checkpoints can find it), hence names must
// be non-empty and unique across all groups, and every pointer must be set.
template <class T, class Options>
void check_groups(const char* who, const std::vector<ParamGroup<T, Options>>& groups) {
  std::set<std::string> seen;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t i = 0; i < groups[g].params.size(); ++i) {
      const autodiff::Parameter<T>* p = groups[g].params[i];
      SINKLAB_CHECK(p != nullptr, who, ": parameter ", i, " of group ", g, " is a null pointer");
      SINKLAB_CHECK(!p->name.empty(), who, ": parameter ", i, " of group ", g, " has an empty name");
      SINKLAB_CHECK(seen.insert(p->name).second, who, ": parameter name '", p->name,
                    "' appears more than once; optimiser state is keyed by name");
    }
  }
}

// The update loops run over raw contiguous buffers of matching size.
template <class T>
void check_trainable(const char* who, const autodiff::Parameter<T>& p) {
  SINKLAB_CHECK(p.value.defined() && p.grad.defined(), who, ": parameter '", p.name,
                "' has no value or gradient tensor");
  SINKLAB_CHECK(p.grad.shape() == p.value.shape(), who, ": parameter '", p.name, "' has value shape ",
                p.value.shape(), " but gradient shape ", p.grad.shape());
  SINKLAB_CHECK(p.value.is_contiguous() && p.grad.is_contiguous(), who, ": parameter '", p.name,
                "' must have contiguous value and gradient tensors");
}

}  // namespace detail
}  // namespace sinklab::optim
