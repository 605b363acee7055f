// tokens:: — learnable tokens added to a [B, T, d] sequence.
//
//   Registers  r learnable tokens (Darcet et al.; VGA §, NOP-vs-broadcast ViT probes), appended
//              after the sequence by default (Options::placement = Prepend puts them first);
//              discard() drops them from the block stack's output.
//   Sink       one learnable token prepended at position 0 (a learnable attention-sink /
//              BOS-like token); discard() drops it.
//   None       adds nothing.
//
// A policy's module is `P::Module<T, Device>(prefix, dim, rng, tokens::Options)`. insert(tape, x)
// returns [B, T + extra(), d]; discard(tape, y) returns [B, T, d]. offset() is the number of
// tokens placed before the sequence (what position-dependent code must skip). The same r × d
// tokens are shared by every batch row; their gradient is summed over the batch.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/module.hpp"

namespace sinklab::tokens {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

enum class Placement { Prepend, Append };

struct Options {
  int64_t count = 4;                          // Registers only (Sink always has one token)
  Placement placement = Placement::Append;    // Registers only (Sink is always prepended)
  nn::Init init = nn::Init::normal(0.02);     // a table: nn::Init::pytorch() gives N(0, 1) (for_embedding)
};

namespace detail {
template <class T, class Device = cpu>
struct TokenModule {
  Parameter<T, Device> weight;  // [count, dim]
  int64_t count = 0, dim = 0;
  Placement placement = Placement::Append;
  std::string name;
  const char* kind = "tokens";

  TokenModule() = default;
  TokenModule(const char* k, std::string prefix, const char* param, int64_t n, int64_t d, Placement p, Rng& rng,
              const nn::Init& init)
      : count(n), dim(d), placement(p), name(std::move(prefix)), kind(k) {
    SINKLAB_CHECK(n > 0 && d > 0, kind, " '", name, "': count and dim must be positive, got count=", n, " dim=", d);
    weight =
        Parameter<T, Device>(nn::join_name(name, param), nn::make_tensor<T, Device>({n, d}, init.for_embedding(), rng));
  }

  int64_t extra() const { return count; }
  int64_t offset() const { return placement == Placement::Prepend ? count : 0; }

  // x [B, T, d] → [B, T + count, d]
  Var<T, Device> insert(Tape<T, Device>& tape, Var<T, Device> x) {
    SINKLAB_CHECK(x.defined() && x.rank() == 3 && x.shape()[2] == dim, kind, " '", name, "': input of shape ",
                  x.defined() ? x.shape() : Shape{}, ", expected [B, T, ", dim, "]");
    Var<T, Device> tok = autodiff::repeat_batch(tape.param(weight), x.shape()[0]);
    return placement == Placement::Prepend ? autodiff::concat<T, Device>({tok, x}, 1)
                                           : autodiff::concat<T, Device>({x, tok}, 1);
  }
  // y [B, T + count, d] → [B, T, d] (the sequence positions only)
  Var<T, Device> discard(Tape<T, Device>& /*tape*/, Var<T, Device> y) {
    SINKLAB_CHECK(y.defined() && y.rank() == 3 && y.shape()[1] > count, kind, " '", name, "': output of shape ",
                  y.defined() ? y.shape() : Shape{}, " has no room for ", count, " inserted token(s) plus a sequence");
    const int64_t len = y.shape()[1];
    return placement == Placement::Prepend ? autodiff::slice(y, 1, count, len) : autodiff::slice(y, 1, 0, len - count);
  }
  template <class V>
  void parameters(V&& visit) {
    visit(weight);
  }
};
}  // namespace detail

struct Registers {
  static constexpr const char* name = "Registers";
  template <class T, class Device = cpu>
  struct Module : detail::TokenModule<T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::TokenModule<T, Device>("registers", std::move(prefix), "registers", o.count, d, o.placement, rng,
                                         o.init) {}
  };
};

struct Sink {
  static constexpr const char* name = "Sink";
  template <class T, class Device = cpu>
  struct Module : detail::TokenModule<T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::TokenModule<T, Device>("sink token", std::move(prefix), "sink_token", 1, d, Placement::Prepend, rng,
                                         o.init) {}
  };
};

struct None {
  static constexpr const char* name = "None";
  template <class T, class Device = cpu>
  struct Module {
    Module() = default;
    Module(std::string, int64_t, Rng&, const Options& = {}) {}
    int64_t extra() const { return 0; }
    int64_t offset() const { return 0; }
    Var<T, Device> insert(Tape<T, Device>&, Var<T, Device> x) { return x; }
    Var<T, Device> discard(Tape<T, Device>&, Var<T, Device> y) { return y; }
    template <class V>
    void parameters(V&&) {}
  };
};

// What a token policy provides: a name and a Module<T, Device> built from (prefix, dim, rng,
// tokens::Options) with insert / discard / extra / offset as above.
template <class P>
concept Policy = requires { { P::name } -> std::convertible_to<const char*>; } &&
                 std::constructible_from<typename P::template Module<float>, std::string, int64_t, Rng&,
                                         const Options&> &&
                 requires(typename P::template Module<float>& m, Tape<float>& t, Var<float> x) {
                   { m.insert(t, x) } -> std::same_as<Var<float>>;
                   { m.discard(t, x) } -> std::same_as<Var<float>>;
                   { m.extra() } -> std::convertible_to<int64_t>;
                   { m.offset() } -> std::convertible_to<int64_t>;
                   m.parameters(nn::detail::VisitParameter{});
                 };

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

template <class P, class T, class Device = cpu>
using module_t = nn::module_t<P, T, Device>;

}  // namespace sinklab::tokens
