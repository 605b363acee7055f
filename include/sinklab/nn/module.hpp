// The module convention: a module is a plain struct that owns Parameters and lists them
// through one visitor, `parameters(visit)`, calling visit(Parameter<T>&) for each (names
// are dotted paths fixed at construction, e.g. "layers.1.attn.q_proj.weight"). Optimisers,
// checkpoints, probes and gradcheck all see parameters through this one mechanism.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/rng.hpp"

namespace sinklab::nn {

using autodiff::Parameter;

// "prefix.name", or "name" when the prefix is empty.
inline std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// All parameters of a module, as pointers (stable as long as the module is not moved).
template <class T, class M>
std::vector<Parameter<T>*> parameter_list(M& module) {
  std::vector<Parameter<T>*> out;
  module.parameters([&](Parameter<T>& p) { out.push_back(&p); });
  return out;
}

template <class T, class M>
int64_t parameter_count(M& module) {
  int64_t n = 0;
  module.parameters([&](Parameter<T>& p) { n += p.numel(); });
  return n;
}

template <class T, class M>
void zero_grad(M& module) {
  module.parameters([](Parameter<T>& p) { p.zero_grad(); });
}

// A policy whose module maps x [..., dim] to [..., dim] (a norm, a feed-forward): a name and, per
// value type T, a Module<T> built from (prefix, dim, rng, Options), called as module(tape, x)
// and listing its parameters. norm::Policy and ffn::Policy are this with their Options.
template <class P, class Options>
concept BranchPolicy =
    requires { { P::name } -> std::convertible_to<const char*>; } &&
    std::constructible_from<typename P::template Module<float>, std::string, int64_t, Rng&, const Options&> &&
    requires(typename P::template Module<float>& m, autodiff::Tape<float>& t, autodiff::Var<float> x) {
      { m(t, x) } -> std::same_as<autodiff::Var<float>>;
      m.parameters([](Parameter<float>&) {});
    };

}  // namespace sinklab::nn
