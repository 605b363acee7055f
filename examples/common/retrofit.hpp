// Adding a value gate to a trained model without changing what it computes: a gate initialised at
// W_g = 0 (and bias 0) multiplies every value, or every head's output, by σ(0) = 1/2, so doubling
// each layer's output projection W_O gives back the trained function exactly (both factors are
// powers of two). vga_lm and sink_atlas retrofit VGA this way (the VGA paper's App. C).
#pragma once
#include <cstdint>

namespace examples {

template <class Model>
void double_attention_output(Model& model) {
  for (auto& layer : model.layers) {
    auto& w = layer.attn.w_o.value;
    for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] *= 2.0f;
  }
}

}  // namespace examples
