// mix:: — anchor mixing of Q, K, V and gate logits across layers (ResFormer, NuResFormer,
// ExoFormer). A mixing policy's Module lives in the model's layer stack: begin() sees the
// token embeddings once per forward, and hook(layer) returns the attention layer's mixing
// hook (attn::Extras::mix), or an empty function for layers it leaves alone.
#pragma once
#include <functional>
#include <string>

#include "sinklab/nn/attention.hpp"

namespace sinklab::mix {

// The shapes a mixing module needs to build its parameters.
struct Dims {
  int64_t d_model = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t gate_heads = 0, gate_channels = 0;  // 0 when the attention has no gate
};

struct None {
  static constexpr const char* name = "None";
  struct Options {};
  template <class T>
  struct Module {
    Module() = default;
    Module(std::string, const Dims&, Rng&, const Options& = {}) {}
    void begin(autodiff::Tape<T>&, autodiff::Var<T> /*embeddings*/) {}
    std::function<void(autodiff::Tape<T>&, autodiff::Var<T>, attn::Projections<T>&)> hook(int64_t /*layer*/) {
      return {};
    }
    template <class V>
    void parameters(V&&) {}
  };
};

}  // namespace sinklab::mix
