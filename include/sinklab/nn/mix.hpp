// mix:: — anchor mixing of Q, K, V and gate logits across layers (ResFormer, NuResFormer,
// ExoFormer). A mixing policy's Module lives in the model's layer stack (nn::LayerStack), which
// calls begin() with the token embeddings once per forward and then, for each layer it
// mixes(layer), mix(tape, layer, x, projections) between the attention's projection and its
// core (attn::Attention's project and attend): after the projections, before QK-norm and RoPE;
// gate logits are mixed as logits. x is the layer's normalised input (dynamic coefficients).
//
//   ResFormer          V_n = λ₁·V_1 + λ₂·V_n for n ≥ 2 (layer 1 = index 0 gives V_1, raw);
//                      official: fixed λ₁ = λ₂ = 0.5 (Options::learnable makes them scalars
//                      per layer, trained).
//   NuResFormer<G, M>  internal anchor: layer 1's q, k, v, g, each RMS-normed per head with a
//                      learnable gain, mixed into every later layer:
//                      Ŝ_n = λ₁ ⊙ RMSNorm(S_anc) + λ₂ ⊙ S_n   (S ∈ {Q, K, V, G}, n ≥ 2).
//   ExoFormer<G, M>    external anchor: one Linear(d → q + k + v + g columns) on the embeddings,
//                      split per head and RMS-normed per head (gain init 1), mixed into every
//                      layer, the first included.
//
// G is the coefficients' granularity (mix::scalar, mix::per_head, mix::per_element; the paper's
// headline models are per_element), M is mix::Static or mix::Dynamic. Dynamic mixing scales
// the λ per token: γ = σ(fc2(GELU(fc1(x)))), fc1 d → 16 without bias, fc2 16 → 8 (6 without a
// gate) zero-initialised with bias, so γ = 0.5 at init and λ starts at 1.0 instead of 0.5;
// Ŝ = (λ₁γ₁) ⊙ RMSNorm(S_anc) + (λ₂γ₂) ⊙ S with γ = (q1, q2, k1, k2, v1, v2, g1, g2).
//
// Anchors are normalised per head by the AnchorNorm policy (the third template argument of
// NuResFormer and ExoFormer; norm::RMS with a learnable gain by default, any norm::Policy works).
// Anchor normalisation follows the paper's "full residual norms" (Options::normalize_anchor;
// false gives its "no norm" ablations). The official NuResFormer code reuses layer 1's QK-norm
// output as the q/k anchors; here every anchor has its own gain, which is the same function
// with separately learnt gains. A per-head gate (one logit per head) is never normalised:
// RMS-normalising a single value would keep only its sign.
#pragma once
#include <array>
#include <concepts>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/attention.hpp"
#include "sinklab/autodiff/ops/heads.hpp"
#include "sinklab/autodiff/ops/mix.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/norm.hpp"

namespace sinklab::mix {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

// The shapes a mixing module needs to build its parameters.
struct Dims {
  int64_t d_model = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t gate_heads = 0, gate_channels = 0;  // 0 when the attention has no gate
};

struct None {
  static constexpr const char* name = "None";
  struct Options {};
  template <class T, class Device = cpu>
  struct Module {
    Module() = default;
    Module(std::string, const Dims&, Rng&, const Options& = {}) {}
    void begin(Tape<T, Device>&, Var<T, Device> /*embeddings*/) {}
    static constexpr bool mixes(int64_t /*layer*/) { return false; }
    void mix(Tape<T, Device>&, int64_t, Var<T, Device>, attn::Projections<T, Device>&) {}
    template <class V>
    void parameters(V&&) {}
  };
};

using Granularity = autodiff::MixGranularity;
using autodiff::mix_pair;
struct scalar {
  static constexpr Granularity value = Granularity::Scalar;
};
struct per_head {
  static constexpr Granularity value = Granularity::Head;
};
struct per_element {
  static constexpr Granularity value = Granularity::Element;
};
struct Static {
  static constexpr bool dynamic = false;
};
struct Dynamic {
  static constexpr bool dynamic = true;
};

// Settings of NuResFormer and ExoFormer.
struct AnchorOptions {
  bool q = true, k = true, v = true, g = true;  // which projections are mixed (g: when the attention has a gate)
  bool normalize_anchor = true;                 // AnchorNorm(S_anc) per head (RMS with a learnable gain)
  std::optional<double> lambda_init{};          // unset: 0.5 (static) or 1.0 (dynamic)
  int64_t dynamic_hidden = 16;                  // fc1's width
  double eps = 1e-6;                            // of the anchor norms
  nn::Init init = nn::Init::normal(0.02);       // ExoFormer's anchor projection and fc1
};

namespace detail {

inline constexpr const char* kComponent[4] = {"q", "k", "v", "g"};

// Heads and channels per head of component c (q, k, v, g) as the attention lays them out.
struct Part {
  int64_t heads = 0, channels = 0;
};
inline Part part(const Dims& d, int c) {
  const int64_t kv = d.kv_heads ? d.kv_heads : d.heads;
  switch (c) {
    case 0:
      return {d.heads, d.head_dim};
    case 1:
    case 2:
      return {kv, d.head_dim};
    default:
      return {d.gate_heads, d.gate_channels};
  }
}
inline Shape coeff_shape(Granularity g, Part p) {
  return g == Granularity::Scalar ? Shape{1} : g == Granularity::Head ? Shape{p.heads} : Shape{p.heads, p.channels};
}
inline void check_dims(const char* who, const std::string& name, const Dims& d) {
  SINKLAB_CHECK(d.d_model > 0 && d.layers > 0 && d.heads > 0 && d.head_dim > 0, who, " '", name,
                "': d_model, layers, heads and head_dim must be positive, got ", d.d_model, ", ", d.layers, ", ",
                d.heads, ", ", d.head_dim);
  SINKLAB_CHECK((d.gate_heads > 0) == (d.gate_channels > 0), who, " '", name, "': gate heads ", d.gate_heads,
                " and gate channels ", d.gate_channels, " must be both zero (no gate) or both positive");
}

// One layer's mixing coefficients (and its dynamic-mixing MLP).
template <class T, class Device = cpu>
struct LayerCoeffs {
  std::array<std::array<Parameter<T, Device>, 2>, 4> lambda;  // [component][term]; undefined when not mixed
  nn::Linear<T, Device> fc1, fc2;
  bool dynamic = false;

  template <class V>
  void parameters(V&& visit) {
    for (auto& pair : lambda)
      for (auto& p : pair)
        if (p.value.defined()) visit(p);
    if (dynamic) {
      fc1.parameters(visit);
      fc2.parameters(visit);
    }
  }
};

// What NuResFormer and ExoFormer share: which components are mixed, the anchors of this
// forward, their norms, and per-layer coefficients for layers [first_layer, layers).
template <class T, class Gran, class Mode, class AnchorNorm, class Device = cpu>
struct AnchorMixer {
  static_assert(norm::is_policy_v<AnchorNorm>, "mix: the anchor norm must be a sinklab::norm policy");
  static constexpr Granularity granularity = Gran::value;
  static constexpr bool dynamic = Mode::dynamic;

  Dims dims;
  AnchorOptions opts;
  std::string name;
  const char* kind = "mix";
  int64_t first_layer = 0;
  std::array<bool, 4> on{};
  std::array<bool, 4> normed{};                              // which anchors are normalised
  std::array<norm::module_t<AnchorNorm, T, Device>, 4> anchor_norm;  // over channels, per head
  std::array<Var<T, Device>, 4> anchors;                             // this forward's (normalised) anchors
  std::vector<LayerCoeffs<T, Device>> coeffs;                        // layers first_layer .. layers − 1

  AnchorMixer() = default;
  AnchorMixer(const char* k, std::string prefix, const Dims& d, Rng& rng, const AnchorOptions& o, int64_t first)
      : dims(d), opts(o), name(std::move(prefix)), kind(k), first_layer(first) {
    check_dims(kind, name, dims);
    SINKLAB_CHECK(opts.dynamic_hidden > 0, kind, " '", name, "': dynamic_hidden must be positive, got ",
                  opts.dynamic_hidden);
    const bool want[4] = {opts.q, opts.k, opts.v, opts.g};
    for (int c = 0; c < 4; ++c) on[c] = want[c] && part(dims, c).heads > 0;
    const double init = opts.lambda_init.value_or(dynamic ? 1.0 : 0.5);
    for (int c = 0; c < 4; ++c)
      if (on[c] && opts.normalize_anchor && part(dims, c).channels > 1) {
        normed[c] = true;
        anchor_norm[c] =
            norm::module_t<AnchorNorm, T, Device>(nn::join_name(name, std::string("anchor_") + kComponent[c] + "_norm"),
                                                  part(dims, c).channels, rng, norm::Options{.eps = opts.eps});
      }
    const int64_t width = dims.gate_heads > 0 ? 8 : 6;
    coeffs.resize(static_cast<std::size_t>(std::max<int64_t>(dims.layers - first_layer, 0)));
    for (int64_t n = first_layer; n < dims.layers; ++n) {
      LayerCoeffs<T, Device>& lc = coeffs[static_cast<std::size_t>(n - first_layer)];
      const std::string lp = nn::join_name(name, "layers." + std::to_string(n));
      for (int c = 0; c < 4; ++c)
        if (on[c])
          for (int i = 0; i < 2; ++i)
            lc.lambda[c][i] = Parameter<T, Device>(
                nn::join_name(lp, std::string("lambda_") + kComponent[c] + std::to_string(i + 1)),
                Tensor<T, Device>::full(coeff_shape(granularity, part(dims, c)), static_cast<T>(init)));
      if constexpr (dynamic) {
        lc.dynamic = true;
        lc.fc1 = nn::Linear<T, Device>(nn::join_name(lp, "dynamic.fc1"), dims.d_model, opts.dynamic_hidden, rng,
                                       opts.init, false);
        lc.fc2 = nn::Linear<T, Device>(nn::join_name(lp, "dynamic.fc2"), opts.dynamic_hidden, width, rng,
                                       nn::Init::zeros(), true);
      }
    }
  }

  Var<T, Device> normalize(Tape<T, Device>& tape, int c, Var<T, Device> s) {
    return normed[c] ? anchor_norm[c](tape, s) : s;
  }

  static Var<T, Device>& slot(attn::Projections<T, Device>& p, int c) {
    switch (c) {
      case 0:
        return p.q;
      case 1:
        return p.k;
      case 2:
        return p.v;
      default:
        return p.gate;
    }
  }

  void mix_layer(Tape<T, Device>& tape, Var<T, Device> x, attn::Projections<T, Device>& p, int64_t layer) {
    SINKLAB_CHECK(layer >= first_layer && layer < dims.layers, kind, " '", name, "': layer ", layer,
                  " has no mixing coefficients (layers ", first_layer, "..", dims.layers - 1, ")");
    LayerCoeffs<T, Device>& lc = coeffs[static_cast<std::size_t>(layer - first_layer)];
    Var<T, Device> gamma;
    if constexpr (dynamic) gamma = autodiff::sigmoid(lc.fc2(tape, autodiff::gelu(lc.fc1(tape, x))));
    for (int c = 0; c < 4; ++c) {
      if (!on[c]) continue;
      const Var<T, Device> a = anchors[c];
      SINKLAB_CHECK(a.defined() && a.tape == &tape, kind, " '", name, "': no ", kComponent[c],
                    " anchor on this tape for layer ", layer, " (begin() must run first in the same forward)");
      Var<T, Device>& s = slot(p, c);
      SINKLAB_CHECK(!s.defined() || s.shape() == a.shape(), kind, " '", name, "': layer ", layer, "'s ", kComponent[c],
                    " of shape ", s.defined() ? s.shape() : Shape{}, " does not match the anchor ", a.shape());
      s = mix_pair(a, s, tape.param(lc.lambda[c][0]), tape.param(lc.lambda[c][1]), granularity, gamma, 2 * c,
                   2 * c + 1);
    }
  }

  template <class V>
  void visit_norms_and_coeffs(V&& visit) {
    for (int c = 0; c < 4; ++c)
      if (normed[c]) anchor_norm[c].parameters(visit);
    for (auto& lc : coeffs) lc.parameters(visit);
  }
};

}  // namespace detail

// At namespace scope (not nested in ResFormer) so that `const Options& = {}` inside ResFormer
// may use its default member initialisers (clang rejects that for a nested class).
struct ResFormerOptions {
  bool learnable = false;  // official: fixed 0.5 / 0.5
  double lambda1 = 0.5, lambda2 = 0.5;
};

// Value residual learning (Zhou et al., 2025): V_n = λ₁·V_1 + λ₂·V_n for every layer after the first.
struct ResFormer {
  static constexpr const char* name = "ResFormer";
  using Options = ResFormerOptions;
  template <class T, class Device = cpu>
  struct Module {
    Options opts;
    std::string name;
    int64_t layers = 0;
    std::vector<std::array<Parameter<T, Device>, 2>> lambda;  // layers 1 .. L−1 when learnable
    Var<T, Device> v1;

    Module() = default;
    Module(std::string prefix, const Dims& d, Rng& /*rng*/, const Options& o = {})
        : opts(o), name(std::move(prefix)), layers(d.layers) {
      detail::check_dims("ResFormer", name, d);
      if (opts.learnable)
        for (int64_t n = 1; n < layers; ++n) {
          const std::string lp = nn::join_name(name, "layers." + std::to_string(n));
          lambda.push_back({Parameter<T, Device>(nn::join_name(lp, "lambda_v1"),
                                                 Tensor<T, Device>::full({1}, static_cast<T>(opts.lambda1))),
                            Parameter<T, Device>(nn::join_name(lp, "lambda_v2"),
                                                 Tensor<T, Device>::full({1}, static_cast<T>(opts.lambda2)))});
        }
    }
    void begin(Tape<T, Device>&, Var<T, Device>) { v1 = Var<T, Device>{}; }
    bool mixes(int64_t /*layer*/) const { return true; }  // layer 0 gives V_1
    void mix(Tape<T, Device>& tape, int64_t layer, Var<T, Device>, attn::Projections<T, Device>& p) {
      if (layer == 0) {
        v1 = p.v;
        return;
      }
      SINKLAB_CHECK(v1.defined() && v1.tape == &tape, "ResFormer '", name, "': layer ", layer,
                    " runs before layer 0 captured V_1 in this forward");
      Var<T, Device> l1, l2;
      if (opts.learnable) {
        auto& pair = lambda[static_cast<std::size_t>(layer - 1)];
        l1 = tape.param(pair[0]);
        l2 = tape.param(pair[1]);
      } else {
        l1 = tape.constant(Tensor<T, Device>::full({1}, static_cast<T>(opts.lambda1)));
        l2 = tape.constant(Tensor<T, Device>::full({1}, static_cast<T>(opts.lambda2)));
      }
      p.v = mix_pair(v1, p.v, l1, l2, Granularity::Scalar);
    }
    template <class V>
    void parameters(V&& visit) {
      for (auto& pair : lambda) {
        visit(pair[0]);
        visit(pair[1]);
      }
    }
  };
};

// Internal anchor: layer 1's (index 0) projections, normalised, mixed into layers 2..L.
template <class Gran = per_element, class Mode = Static, class AnchorNorm = norm::RMS>
struct NuResFormer {
  static constexpr const char* name = "NuResFormer";
  using Options = AnchorOptions;
  template <class T, class Device = cpu>
  struct Module : detail::AnchorMixer<T, Gran, Mode, AnchorNorm, Device> {
    using Base = detail::AnchorMixer<T, Gran, Mode, AnchorNorm, Device>;
    Module() = default;
    Module(std::string prefix, const Dims& d, Rng& rng, const Options& o = {})
        : Base("NuResFormer", std::move(prefix), d, rng, o, 1) {}

    void begin(Tape<T, Device>&, Var<T, Device>) { this->anchors = {}; }
    bool mixes(int64_t /*layer*/) const { return true; }  // layer 0 gives the anchors
    void mix(Tape<T, Device>& tape, int64_t layer, Var<T, Device> x, attn::Projections<T, Device>& p) {
      if (layer != 0) return this->mix_layer(tape, x, p, layer);
      for (int c = 0; c < 4; ++c) {
        if (!this->on[c]) continue;
        Var<T, Device> s = Base::slot(p, c);
        SINKLAB_CHECK(s.defined(), "NuResFormer '", this->name, "': layer 0 has no ", detail::kComponent[c],
                      " projection to serve as the anchor (gate::FromAnchor gates need ExoFormer, or set "
                      "Options::g = false)");
        this->anchors[c] = this->normalize(tape, c, s);
      }
    }
    template <class V>
    void parameters(V&& visit) {
      this->visit_norms_and_coeffs(visit);
    }
  };
};

// External anchor: a dedicated projection of the token embeddings, mixed into every layer.
template <class Gran = per_element, class Mode = Static, class AnchorNorm = norm::RMS>
struct ExoFormer {
  static constexpr const char* name = "ExoFormer";
  using Options = AnchorOptions;
  template <class T, class Device = cpu>
  struct Module : detail::AnchorMixer<T, Gran, Mode, AnchorNorm, Device> {
    using Base = detail::AnchorMixer<T, Gran, Mode, AnchorNorm, Device>;
    nn::Linear<T, Device> anchor_proj;  // [d_model, columns of the mixed components]
    std::array<int64_t, 4> col0{};  // where each component's columns start

    Module() = default;
    Module(std::string prefix, const Dims& d, Rng& rng, const Options& o = {})
        : Base("ExoFormer", std::move(prefix), d, rng, o, 0) {
      int64_t cols = 0;
      for (int c = 0; c < 4; ++c) {
        col0[c] = cols;
        if (this->on[c]) cols += detail::part(d, c).heads * detail::part(d, c).channels;
      }
      SINKLAB_CHECK(cols > 0, "ExoFormer '", this->name, "': no component to mix (q, k, v and g all off)");
      anchor_proj =
          nn::Linear<T, Device>(nn::join_name(this->name, "anchor_proj"), d.d_model, cols, rng, o.init, false);
    }

    // embeddings [B, T, d_model] → the four normalised anchors [B, heads, T, channels].
    void begin(Tape<T, Device>& tape, Var<T, Device> embeddings) {
      SINKLAB_CHECK(embeddings.defined() && embeddings.rank() == 3 && embeddings.shape()[2] == this->dims.d_model,
                    "ExoFormer '", this->name, "': embeddings of shape ",
                    embeddings.defined() ? embeddings.shape() : Shape{}, ", expected [B, T, ", this->dims.d_model, "]");
      Var<T, Device> a = anchor_proj(tape, embeddings);
      this->anchors = {};
      for (int c = 0; c < 4; ++c)
        if (this->on[c]) {
          const detail::Part pt = detail::part(this->dims, c);
          this->anchors[c] = this->normalize(tape, c, autodiff::split_heads(a, col0[c], pt.heads, pt.channels));
        }
    }
    bool mixes(int64_t /*layer*/) const { return true; }
    void mix(Tape<T, Device>& tape, int64_t layer, Var<T, Device> x, attn::Projections<T, Device>& p) {
      this->mix_layer(tape, x, p, layer);
    }
    template <class V>
    void parameters(V&& visit) {
      anchor_proj.parameters(visit);
      this->visit_norms_and_coeffs(visit);
    }
  };
};

// What a mixing policy provides: a name, an Options type and a Module<T, Device> built from (prefix,
// Dims, rng, Options) with begin(tape, embeddings) once per forward, mixes(layer) saying which
// layers it touches and mix(tape, layer, x, projections) rewriting those layers' projections.
template <class P>
concept Policy = requires { { P::name } -> std::convertible_to<const char*>; typename P::Options; } &&
                 std::constructible_from<typename P::template Module<float>, std::string, const Dims&, Rng&,
                                         const typename P::Options&> &&
                 requires(typename P::template Module<float>& m, Tape<float>& t, Var<float> x,
                          attn::Projections<float>& p) {
                   m.begin(t, x);
                   { m.mixes(int64_t{0}) } -> std::convertible_to<bool>;
                   m.mix(t, int64_t{0}, x, p);
                   m.parameters(nn::detail::VisitParameter{});
                 };

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

}  // namespace sinklab::mix
