// ffn:: — feed-forward policies of a block, x [..., d] → [..., d].
//
//   SwiGLU   down( silu(x·W_gate) ⊙ (x·W_up) )        hidden default round_up(8d/3, 8) (LLaMA)
//   GLU      down( σ(x·W_gate) ⊙ (x·W_up) )           same sizes (Qwen outlier paper: GLU = SwiGLU
//                                                     with sigmoid instead of swish)
//   GeluMLP  fc2( gelu(x·W1 [+ b1]) ) [+ b2]          hidden default 4d; exact (erf) GELU
//   ReluMLP  fc2( relu(x·W1 [+ b1]) ) [+ b2]
//
// The GLU forms use ONE up-projection `gate_up` of shape [d, 2h] (columns 0..h−1 are W_gate,
// h..2h−1 are W_up; split them this way when exchanging checkpoints with separate gate/up
// matrices) and one fused node for act(a) ⊙ b (autodiff/ops/glu.hpp); without biases the whole block is
// one node (glu_mlp). A policy's module is `P::Module<T, Device>(prefix, dim, rng, ffn::Options)`,
// called as ffn(tape, x) (nn convention).
//
// Options::zero_init_output starts the output projection at 0 (ExoFormer's / modded-nanogpt's
// zero-init output projections), so the block starts as the identity on the residual stream.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/autodiff/ops/glu.hpp"

namespace sinklab::ffn {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct Options {
  int64_t hidden = 0;                          // 0: the policy's default (see above)
  bool zero_init_output = false;               // output projection starts at 0
  bool bias = false;                           // biases on both projections (MLPs; the GLU forms too)
  nn::Init init = nn::Init::normal(0.02);      // input projection(s), and the output one unless zero-init
};

// LLaMA's SwiGLU width: 2/3 of 4d, rounded up to a multiple of 8 (d = 128 → 344).
inline int64_t glu_hidden(int64_t d) { return ((8 * d + 2) / 3 + 7) / 8 * 8; }

namespace detail {
inline nn::Init output_init(const Options& o) { return o.zero_init_output ? nn::Init::zeros() : o.init; }

template <class T, class Device = cpu>
void check_input(const char* kind, const std::string& name, Var<T, Device> x, int64_t dim) {
  SINKLAB_CHECK(x.defined(), kind, " '", name, "': undefined input");
  SINKLAB_CHECK(x.rank() >= 1 && x.shape()[-1] == dim, kind, " '", name, "': input of shape ", x.shape(),
                " has last axis ", (x.rank() ? x.shape()[-1] : 0), ", expected ", dim);
}

// The GLU family: gate_up [d, 2h] → act(a) ⊙ b → down [h, d].
template <act::Activation Act, class T, class Device = cpu>
struct GatedModule {
  nn::Linear<T, Device> gate_up;  // [dim, 2·hidden]
  nn::Linear<T, Device> down;     // [hidden, dim]
  int64_t dim = 0, hidden = 0;
  std::string name;

  GatedModule() = default;
  GatedModule(const char* kind, std::string prefix, int64_t d, Rng& rng, const Options& o)
      : dim(d), hidden(o.hidden > 0 ? o.hidden : glu_hidden(d)), name(std::move(prefix)) {
    SINKLAB_CHECK(dim > 0 && o.hidden >= 0, kind, " '", name, "': dim must be positive and hidden >= 0, got dim=", dim,
                  " hidden=", o.hidden);
    gate_up = nn::Linear<T, Device>(nn::join_name(name, "gate_up"), dim, 2 * hidden, rng, o.init, o.bias);
    down = nn::Linear<T, Device>(nn::join_name(name, "down"), hidden, dim, rng, output_init(o), o.bias);
  }
  Var<T, Device> forward(const char* kind, Tape<T, Device>& tape, Var<T, Device> x) {
    check_input(kind, name, x, dim);
    // One fused node unless biases or a projection hook need the composed form.
    if (!gate_up.has_bias() && !down.has_bias() && !nn::projection_hooked<T, Device>())
      return autodiff::glu_mlp<Act>(x, tape.param(gate_up.weight), tape.param(down.weight));
    return down(tape, autodiff::act_mul_halves<Act>(gate_up(tape, x)));
  }
  template <class V>
  void parameters(V&& visit) {
    gate_up.parameters(visit);
    down.parameters(visit);
  }
};

// The two-layer MLP: fc1 [d, h] → act → fc2 [h, d].
template <class T, class Device = cpu>
struct MlpModule {
  nn::Linear<T, Device> fc1;  // [dim, hidden]
  nn::Linear<T, Device> fc2;  // [hidden, dim]
  int64_t dim = 0, hidden = 0;
  std::string name;

  MlpModule() = default;
  MlpModule(const char* kind, std::string prefix, int64_t d, Rng& rng, const Options& o)
      : dim(d), hidden(o.hidden > 0 ? o.hidden : 4 * d), name(std::move(prefix)) {
    SINKLAB_CHECK(dim > 0 && o.hidden >= 0, kind, " '", name, "': dim must be positive and hidden >= 0, got dim=", dim,
                  " hidden=", o.hidden);
    fc1 = nn::Linear<T, Device>(nn::join_name(name, "fc1"), dim, hidden, rng, o.init, o.bias);
    fc2 = nn::Linear<T, Device>(nn::join_name(name, "fc2"), hidden, dim, rng, output_init(o), o.bias);
  }
  template <class V>
  void parameters(V&& visit) {
    fc1.parameters(visit);
    fc2.parameters(visit);
  }
};
}  // namespace detail

struct SwiGLU {
  static constexpr const char* name = "SwiGLU";
  template <class T, class Device = cpu>
  struct Module : detail::GatedModule<act::SiLU, T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::GatedModule<act::SiLU, T, Device>("SwiGLU", std::move(prefix), d, rng, o) {}
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) { return this->forward("SwiGLU", tape, x); }
  };
};

struct GLU {
  static constexpr const char* name = "GLU";
  template <class T, class Device = cpu>
  struct Module : detail::GatedModule<act::Sigmoid, T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::GatedModule<act::Sigmoid, T, Device>("GLU", std::move(prefix), d, rng, o) {}
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) { return this->forward("GLU", tape, x); }
  };
};

struct GeluMLP {
  static constexpr const char* name = "GeluMLP";
  template <class T, class Device = cpu>
  struct Module : detail::MlpModule<T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::MlpModule<T, Device>("GeluMLP", std::move(prefix), d, rng, o) {}
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_input("GeluMLP", this->name, x, this->dim);
      return this->fc2(tape, autodiff::gelu(this->fc1(tape, x)));
    }
  };
};

struct ReluMLP {
  static constexpr const char* name = "ReluMLP";
  template <class T, class Device = cpu>
  struct Module : detail::MlpModule<T, Device> {
    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& o = {})
        : detail::MlpModule<T, Device>("ReluMLP", std::move(prefix), d, rng, o) {}
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_input("ReluMLP", this->name, x, this->dim);
      return this->fc2(tape, autodiff::relu(this->fc1(tape, x)));
    }
  };
};

// What an FFN policy provides: a name and a Module<T, Device> built from (prefix, dim, rng, ffn::Options),
// called as ffn(tape, x) on [..., dim] → [..., dim].
template <class P>
concept Policy = nn::BranchPolicy<P, Options>;

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

template <class P, class T, class Device = cpu>
using module_t = nn::module_t<P, T, Device>;

}  // namespace sinklab::ffn
