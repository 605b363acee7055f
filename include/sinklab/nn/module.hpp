// The module convention: a module is a plain struct that owns Parameters and lists them
// through one visitor, `parameters(visit)`, calling visit(Parameter<T, Device>&) for each (names
// are dotted paths fixed at construction, e.g. "layers.1.attn.q_proj.weight"). Optimisers,
// checkpoints, probes and gradcheck all see parameters through this one mechanism.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"

namespace sinklab::nn {

using autodiff::Parameter;

namespace detail {
// P::Module<T, Device>, or P::Module<T> for a policy written for the CPU only (a Module with no
// Device parameter, as a user's may be): it runs on cpu and is refused on another device.
template <class P, class T, class Device>
struct policy_module {
  static_assert(std::is_same_v<Device, cpu>,
                "this policy's Module<T> has no Device parameter; declare it as "
                "template <class T, class Device = cpu> struct Module to run it on another device");
  using type = typename P::template Module<T>;
};
template <class P, class T, class Device>
  requires requires { typename P::template Module<T, Device>; }
struct policy_module<P, T, Device> {
  using type = typename P::template Module<T, Device>;
};
}  // namespace detail

// A policy's module for value type T on Device (norm::, ffn::, pos::, tokens::, mix:: policies,
// attention layers, layer stacks).
template <class P, class T, class Device = cpu>
using module_t = typename detail::policy_module<P, T, Device>::type;

// "prefix.name", or "name" when the prefix is empty.
inline std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// All parameters of a module, as pointers (stable as long as the module is not moved).
template <class T, class Device = cpu, class M>
std::vector<Parameter<T, Device>*> parameter_list(M& m) {
  std::vector<Parameter<T, Device>*> out;
  m.parameters([&](Parameter<T, Device>& p) { out.push_back(&p); });
  return out;
}

template <class T, class Device = cpu, class M>
int64_t parameter_count(M& m) {
  int64_t n = 0;
  m.parameters([&](Parameter<T, Device>& p) { n += p.numel(); });
  return n;
}

template <class T, class Device = cpu, class M>
void zero_grad(M& m) {
  m.parameters([](Parameter<T, Device>& p) { p.zero_grad(); });
}

// Copies every parameter value of `src` into `dst`, two modules of the same architecture on any
// devices (through host memory): a model trained on a GPU into a CPU copy for probes,
// checkpoints or the materialised attention, or back. The parameters are matched in visiting
// order and must agree in name and shape; dst keeps its buffers (optimisers holding them stay valid).
template <class T, class Dst, class Src>
void copy_parameters(Dst& dst, Src& src) {
  struct Entry {
    std::string name;
    Shape shape;
    std::vector<T> values;
  };
  std::vector<Entry> from;
  src.parameters([&](auto& p) { from.push_back({p.name, p.shape(), p.value.to_vector()}); });
  std::size_t i = 0;
  dst.parameters([&](auto& p) {
    SINKLAB_CHECK(i < from.size(), "nn::copy_parameters: the destination has more parameters than the source's ",
                  from.size(), " (first extra: '", p.name, "')");
    const Entry& e = from[i++];
    SINKLAB_CHECK(e.name == p.name && e.shape == p.shape(), "nn::copy_parameters: parameter ", i - 1, " is '", p.name,
                  "' of shape ", p.shape(), " in the destination but '", e.name, "' of shape ", e.shape,
                  " in the source");
    p.value.copy_from(std::decay_t<decltype(p.value)>::from(e.shape, e.values));
  });
  SINKLAB_CHECK(i == from.size(), "nn::copy_parameters: the source has ", from.size(), " parameters, the destination ",
                i);
}

namespace detail {
// A parameter visitor for the policy concepts below (a named type, not a lambda: nvcc's front end
// rejects a lambda in a concept's requires-expression, so every policy would fail its concept).
struct VisitParameter {
  template <class T, class Device>
  void operator()(autodiff::Parameter<T, Device>&) const {}
};
}  // namespace detail

// A policy whose module maps x [..., dim] to [..., dim] (a norm, a feed-forward): a name and, per
// value type T, a Module<T, Device> built from (prefix, dim, rng, Options), called as module(tape, x)
// and listing its parameters. norm::Policy and ffn::Policy are this with their Options.
template <class P, class Options>
concept BranchPolicy =
    requires { { P::name } -> std::convertible_to<const char*>; } &&
    std::constructible_from<typename P::template Module<float>, std::string, int64_t, Rng&, const Options&> &&
    requires(typename P::template Module<float>& m, autodiff::Tape<float>& t, autodiff::Var<float> x) {
      { m(t, x) } -> std::same_as<autodiff::Var<float>>;
      m.parameters(detail::VisitParameter{});
    };

}  // namespace sinklab::nn
