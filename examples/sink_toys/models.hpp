// examples/sink_toys: the two toy models of "NOP vs broadcast sinks" (docs/papers.md), as the
// paper and its authors' notebooks build them (PyTorch module defaults throughout: Linear
// weights U(±1/√fan_in) without biases in attention, LayerNorm eps 1e-5 with affine, positions
// and the BOS offset N(0, 0.02²)).
//
// NopModel<Attn>: one pre-LN attention layer, one head, d_head = d, bidirectional, no MLP.
//   z = LN(x + pos + [i = 0]·bos),  ΔO = W_O · Attn(z),  O = z + ΔO
// The loss is on ΔO (the update the branch should make) or on O (the authors' notebook loss).
//
// BroadcastModel<Tokens>: two pre-LN blocks (one head, MLP d → 4d → d with GELU and biases);
// learned positions enter layer 1's attention input only (z = LN₁(x + pos)), never the residual
// stream; optional register tokens (no positions) are appended and dropped at the output.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/shape.hpp"
#include "sinklab/nn/layers.hpp"

namespace sink_toys {

using namespace sinklab;
using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;
// The paper's G1 gate: σ(z·W_g + b) per channel on the head's output, before W_O; W_g = 0 and
// b = 2 at the start, so the gate opens at σ(2) ≈ 0.88 and the sink must be unlearned through it.
using GatedEnc = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>, value::Identity,
                                 mask::Bidirectional>;

template <class Attn>
typename Attn::Policies toy_policies() {
  typename Attn::Policies p;
  if constexpr (Attn::gate_type::enabled) p.gate.init = gate::Init::nop();
  return p;
}

inline attn::Config toy_attention(int64_t d) {
  return {.d_model = d, .heads = 1, .head_dim = d, .init = nn::Init::pytorch()};
}

template <class Attn>
struct NopModel {
  template <class T>
  struct Module {
    Parameter<T> pos, bos;  // [L, d], [1, d]
    typename norm::LayerNorm::template Module<T> ln;
    typename Attn::template Module<T> attn;

    Module() = default;
    Module(int64_t d, int64_t L, Rng& rng)
        : pos("pos", nn::make_tensor<T>({L, d}, nn::Init::normal(0.02), rng)),
          bos("bos", nn::make_tensor<T>({1, d}, nn::Init::normal(0.02), rng)),
          ln("ln", d, rng, norm::Options{.eps = 1e-5}),
          attn("attn", toy_attention(d), rng, toy_policies<Attn>()) {}

    struct Out {
      Var<T> stream, update;  // z (the block's residual input) and ΔO
      Tensor<T> pre_norm;     // x + pos + bos at token 0, before the LayerNorm
    };
    // `edits`: interventions on the attention (nn/intervention.hpp; layer 0), or none.
    Out forward(Tape<T>& tape, const Tensor<T>& x, autodiff::AttentionRecorder<T>* rec = nullptr,
                const std::vector<nn::Intervention>* edits = nullptr) {
      const int64_t L = x.size(1);
      Var<T> p = tape.param(pos);
      Var<T> offset = autodiff::concat<T>({autodiff::slice(p, 0, 0, 1) + tape.param(bos), autodiff::slice(p, 0, 1, L)}, 0);
      Var<T> h = tape.constant(x) + offset;
      Var<T> z = ln(tape, h);
      attn::Extras<T> ex;
      ex.probe = rec;
      ex.interventions = edits;
      return {z, attn.forward(tape, z, ex), h.value()};
    }

    template <class V>
    void parameters(V&& visit) {
      visit(pos);
      visit(bos);
      ln.parameters(visit);
      attn.parameters(visit);
    }
  };
};

template <class Tokens>
struct BroadcastModel {
  using Layer = nn::Layer<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP>;
  template <class T>
  struct Module {
    Parameter<T> pos;  // [L, d], layer 1's attention input only
    typename Tokens::template Module<T> registers;
    std::array<typename Layer::template Module<T>, 2> layers;

    Module() = default;
    Module(int64_t d, int64_t L, int64_t registers_count, Rng& rng)
        : pos("pos", nn::make_tensor<T>({L, d}, nn::Init::normal(0.02), rng)),
          registers("registers", d, rng, tokens::Options{.count = registers_count}) {
      const nn::ModelConfig mc{.d_model = d, .heads = 1, .head_dim = d, .ffn_hidden = 4 * d, .init = nn::Init::pytorch(),
                               .norm = norm::Options{.eps = 1e-5}};
      for (int l = 0; l < 2; ++l)
        layers[l] = typename Layer::template Module<T>("layers." + std::to_string(l), toy_attention(d), mc, rng, {});
      // The toy's MLP has biases (nn.Linear's default); nn::Layer builds it from ffn::Options.
      for (int l = 0; l < 2; ++l)
        layers[l].ffn = ffn::GeluMLP::Module<T>("layers." + std::to_string(l) + ".ffn", d, rng,
                                                 ffn::Options{.hidden = 4 * d, .bias = true, .init = nn::Init::pytorch()});
    }

    // x [B, L, d] → the output for the L tokens; rec[l] records layer l's attention (registers
    // included, at positions L.. when present), upd[l] its update.
    Var<T> forward(Tape<T>& tape, const Tensor<T>& x, std::array<autodiff::AttentionRecorder<T>, 2>* rec = nullptr,
                   std::array<Tensor<T>, 2>* upd = nullptr) {
      Var<T> h = registers.insert(tape, tape.constant(x));
      const int64_t extra = h.value().size(1) - x.size(1);
      Var<T> p = tape.param(pos);
      if (extra > 0) p = autodiff::concat<T>({p, tape.constant(Tensor<T>::zeros({extra, x.size(2)}))}, 0);
      for (int l = 0; l < 2; ++l) {
        auto& layer = layers[l];
        Var<T> a = layer.attn(tape, layer.attn_norm(tape, l == 0 ? h + p : h), rec ? &(*rec)[l] : nullptr);
        if (upd) (*upd)[l] = a.value();
        h = h + a;
        h = h + layer.ffn(tape, layer.ffn_norm(tape, h));
      }
      return registers.discard(tape, h);
    }

    template <class V>
    void parameters(V&& visit) {
      visit(pos);
      registers.parameters(visit);
      for (auto& l : layers) l.parameters(visit);
    }
  };
};

}  // namespace sink_toys
