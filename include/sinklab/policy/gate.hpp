// gate:: — sigmoid gates g = σ(logit) multiplied into attention, as a vocabulary:
//   source      None | FromInput (IGA, Gated Attention G1: logits = X·W_g) | FromValue (VGA:
//               logits = V·W_g) | FromAnchor (logits given by ExoFormer's anchor mixing)
//   placement   on_output  — per query, on each head's output:   o_i ← g_i ⊙ o_i
//               on_values  — per key, on each value before aggregation: o_i = Σ_j a_ij (g_j ⊙ v_j)
//   granularity per_head (one gate per head and token) | per_channel (one per head channel)
// The layer computes the logits and owns the gate weights
// W_g and bias; this header fixes their initialisation options. Gate logits are laid out
// [B, heads, tokens, G] with G = 1 (per_head) or d_head (per_channel); heads are query heads on
// the output and key/value heads on the values. The tensor-level application and its backward
// are in kernels/cpu/attention_transforms.hpp.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::gate {

enum class Source { None, FromInput, FromValue, FromAnchor };
enum class Placement { OnOutput, OnValues };
enum class Granularity { PerHead, PerChannel };

struct per_head {
  static constexpr Granularity value = Granularity::PerHead;
};
struct per_channel {
  static constexpr Granularity value = Granularity::PerChannel;
};
struct on_output {
  static constexpr Placement value = Placement::OnOutput;
};
struct on_values {
  static constexpr Placement value = Placement::OnValues;
};

enum class WeightInit { Zero, Normal };
enum class BiasInit { None, Zero, Logit025, Two };

// Initialisation of a gate's projection W_g and bias. Presets follow the papers:
//   vga()        W_g = 0, bias 0 → every gate 0.5 at init (VGA publishes no init; neutral choice)
//   g1()         W_g ~ N(0, 0.02), no bias (Qwen Gated Attention: logits are extra q_proj outputs)
//   bondarenko() W_g ~ N(0, 0.02), bias logit(0.25) (outlier-free transformers' gated attention)
//   nop()        W_g = 0, bias 2.0 (NOP-vs-broadcast: gate open at σ(2) ≈ 0.88)
struct Init {
  WeightInit weight = WeightInit::Zero;
  double sigma = 0.02;
  BiasInit bias = BiasInit::Zero;

  static constexpr Init vga() { return {WeightInit::Zero, 0.02, BiasInit::Zero}; }
  static constexpr Init g1() { return {WeightInit::Normal, 0.02, BiasInit::None}; }
  static constexpr Init bondarenko() { return {WeightInit::Normal, 0.02, BiasInit::Logit025}; }
  static constexpr Init nop() { return {WeightInit::Zero, 0.02, BiasInit::Two}; }

  bool has_bias() const { return bias != BiasInit::None; }
  double bias_value() const {
    switch (bias) {
      case BiasInit::Logit025:
        return std::log(0.25 / 0.75);
      case BiasInit::Two:
        return 2.0;
      default:
        return 0.0;
    }
  }
  // Fills W_g (any shape) and, when given, the bias.
  template <class T>
  void initialise(Rng& rng, Tensor<T>& w, Tensor<T>* b = nullptr) const {
    if (weight == WeightInit::Normal)
      rng.fill_normal(w, T(0), static_cast<T>(sigma));
    else
      w.fill(T(0));
    if (b) {
      SINKLAB_CHECK(has_bias(), "gate::Init::initialise: a bias tensor of shape ", b->shape(),
                    " was given but this init has no bias (BiasInit::None)");
      b->fill(static_cast<T>(bias_value()));
    }
  }
};

struct None {
  static constexpr Source source = Source::None;
  static constexpr bool enabled = false;
  static constexpr const char* name = "none";
};

namespace detail {
template <class G>
inline constexpr bool is_granularity_v = std::is_same_v<G, per_head> || std::is_same_v<G, per_channel>;
template <class P>
inline constexpr bool is_placement_v = std::is_same_v<P, on_output> || std::is_same_v<P, on_values>;

template <Source S, class Gran, class Place>
struct SigmoidGate {
  static_assert(is_granularity_v<Gran>, "gate: the granularity argument must be gate::per_head or gate::per_channel");
  static_assert(is_placement_v<Place>, "gate: the placement argument must be gate::on_output or gate::on_values");
  static constexpr Source source = S;
  static constexpr bool enabled = true;
  static constexpr Placement placement = Place::value;
  static constexpr Granularity granularity = Gran::value;

  // Gate values per head and token: 1 (per_head) or d_head (per_channel).
  static constexpr int64_t channels(int64_t d_head) { return granularity == Granularity::PerHead ? 1 : d_head; }
  // σ from the activation vocabulary; a gate with another activation overrides these two
  // (docs/extending.md writes a tanh gate).
  template <class V>
  SINKLAB_HD static V activation(V logit) {
    return act::Sigmoid::f(logit);
  }
  template <class V>
  SINKLAB_HD static V activation_grad(V logit) {
    return act::Sigmoid::df(logit);
  }
};
}  // namespace detail

// Defaults follow each source's paper: VGA gates each key's value per head (the form its
// analysis uses); G1 gates the output per channel (Qwen's best variant); ExoFormer gates the
// SDPA output per channel.
template <class Gran = per_channel, class Place = on_output>
struct FromInput : detail::SigmoidGate<Source::FromInput, Gran, Place> {
  static constexpr const char* name = "from_input";
  Init init = Init::g1();
};
template <class Gran = per_head, class Place = on_values>
struct FromValue : detail::SigmoidGate<Source::FromValue, Gran, Place> {
  static constexpr const char* name = "from_value";
  Init init = Init::vga();
};
template <class Gran = per_channel, class Place = on_output>
struct FromAnchor : detail::SigmoidGate<Source::FromAnchor, Gran, Place> {
  static constexpr const char* name = "from_anchor";
  Init init = Init::g1();
};

// Whether gate G is applied at placement P (false for gate::None).
template <class G, Placement P>
constexpr bool applied_at() {
  if constexpr (G::enabled) return G::placement == P;
  else return false;
}

template <class G>
inline constexpr bool is_policy_v = requires {
  { G::source } -> std::convertible_to<Source>;
  { G::enabled } -> std::convertible_to<bool>;
};

}  // namespace sinklab::gate
