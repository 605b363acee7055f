// pos:: — position information.
//
//   RoPE     rotary embedding of q or k, x [..., T, d] (usually [B, H, T, d]), one fused node
//            (autodiff::rope; the rotate-half convention is written there). base (θ) defaults
//            to 10000.
//   Learned  absolute positions: adds rows [offset, offset + T) of a learned table [max_len, d]
//            to x [B, T, d] (init N(0, 0.02); N(0, 1) under nn::Init::pytorch(), as the
//            nn.Embedding of the reference code).
//   None     adds nothing.
//
// Modules follow the nn convention (prefix, dim, rng, Options); RoPE has no parameters.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/rope.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/module.hpp"

namespace sinklab::pos {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct RoPEOptions {
  double theta = 10000.0;  // the base
};

struct LearnedOptions {
  int64_t max_len = 1024;
  nn::Init init = nn::Init::normal(0.02);
};

struct None {
  static constexpr const char* name = "None";
  struct Options {};
  template <class T, class Device = cpu>
  struct Module {
    Module() = default;
    Module(std::string, int64_t, Rng&, const Options& = {}) {}
    Var<T, Device> operator()(Tape<T, Device>&, Var<T, Device> x, int64_t /*offset*/ = 0) { return x; }
    template <class V>
    void parameters(V&&) {}
  };
};

struct RoPE {
  static constexpr const char* name = "RoPE";
  static constexpr bool rotary = true;
  using Options = RoPEOptions;
  template <class T, class Device = cpu>
  struct Module {
    int64_t head_dim = 0;
    double theta = 10000.0;
    std::string name;
    autodiff::RopeTable<T, Device> table;

    Module() = default;
    Module(std::string prefix, int64_t d, const Options& o = {}) : head_dim(d), theta(o.theta), name(std::move(prefix)) {
      SINKLAB_CHECK(d > 0 && d % 2 == 0, "RoPE '", name, "': head size must be positive and even, got ", d);
      SINKLAB_CHECK(o.theta > 1, "RoPE '", name, "': base theta must be > 1, got ", o.theta);
    }
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& o = {}) : Module(std::move(prefix), d, o) {}

    // x [..., T, head_dim] → rotated, positions offset..offset+T−1.
    Var<T, Device> operator()(Tape<T, Device>& /*tape*/, Var<T, Device> x, int64_t offset = 0) {
      SINKLAB_CHECK(x.defined() && x.rank() >= 2 && x.shape()[-1] == head_dim, "RoPE '", name, "': input of shape ",
                    x.defined() ? x.shape() : Shape{}, ", expected [..., T, ", head_dim, "]");
      SINKLAB_CHECK(offset >= 0, "RoPE '", name, "': negative position offset ", offset);
      table.ensure(offset + x.shape()[-2], head_dim, theta);
      return autodiff::rope(x, table, offset);
    }
    template <class V>
    void parameters(V&&) {}
  };
};

struct Learned {
  static constexpr const char* name = "Learned";
  using Options = LearnedOptions;
  template <class T, class Device = cpu>
  struct Module {
    Parameter<T, Device> weight;  // [max_len, dim]
    int64_t max_len = 0, dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : max_len(o.max_len), dim(d), name(std::move(prefix)) {
      SINKLAB_CHECK(d > 0 && max_len > 0, "learned positions '", name, "': sizes must be positive, got max_len=",
                    max_len, " dim=", d);
      weight = Parameter<T, Device>(nn::join_name(name, "weight"),
                                    nn::make_tensor<T, Device>({max_len, dim}, o.init.for_embedding(), rng));
    }

    // x [..., T, dim] + table[offset : offset + T].
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x, int64_t offset = 0) {
      SINKLAB_CHECK(x.defined() && x.rank() >= 2 && x.shape()[-1] == dim, "learned positions '", name,
                    "': input of shape ", x.defined() ? x.shape() : Shape{}, ", expected [..., T, ", dim, "]");
      const int64_t tlen = x.shape()[-2];
      SINKLAB_CHECK(offset >= 0 && offset + tlen <= max_len, "learned positions '", name, "': positions [", offset,
                    ", ", offset + tlen, ") exceed max_len ", max_len, " (input of shape ", x.shape(), ")");
      Var<T, Device> table = tape.param(weight);
      if (offset != 0 || tlen != max_len) table = autodiff::slice(table, 0, offset, offset + tlen);
      return x + table;
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
    }
  };
};

// What a position policy provides: a name, an Options type and a Module<T, Device> built from (prefix,
// dim, rng, Options), called as pos(tape, x, offset) on [..., T, dim]. A rotary policy
// (`rotary = true`) is applied inside attention to q and k instead of to the embeddings.
template <class P>
concept Policy = requires { { P::name } -> std::convertible_to<const char*>; typename P::Options; } &&
                 std::constructible_from<typename P::template Module<float>, std::string, int64_t, Rng&,
                                         const typename P::Options&> &&
                 requires(typename P::template Module<float>& m, Tape<float>& t, Var<float> x) {
                   { m(t, x, int64_t{0}) } -> std::same_as<Var<float>>;
                   m.parameters(nn::detail::VisitParameter{});
                 };

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

// Whether P rotates q and k inside attention (RoPE) rather than adding to the embeddings.
template <class P>
inline constexpr bool is_rotary_v = requires { requires P::rotary; };

template <class P, class T, class Device = cpu>
using module_t = nn::module_t<P, T, Device>;

}  // namespace sinklab::pos
