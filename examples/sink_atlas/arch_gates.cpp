// examples/sink_atlas, the sigmoid gates: Gated Attention G1 per channel and per head (σ(X·W_g)
// on each head's output, Qiu et al.), IGA (σ(X·W_g) per head on each key's value) and VGA
// (σ(V·W_g) per head) on each key's value — the VGA paper's eq. 4 — and on each query's output
// (its App. B). IGA starts like VGA (W_g = 0, bias 0: every gate 0.5), as in the VGA paper's
// comparison; G1 keeps Qiu et al.'s N(0, 0.02) projection without a bias. retrofit_vga adds VGA to
// the baseline's final weights (W_g = 0 and W_O doubled: the trained function at the start) and
// trains on (the VGA paper's App. C).
#include "fit.hpp"

namespace sink_atlas::detail {

bool run_gates(experiment::Run& r, const Context& c) {
  using namespace gate;
  const std::string& v = r.variant();
  using Vga = attn::Attention<score::Softmax, FromValue<per_head, on_values>>;
  if (v == "g1") fit<Decoder<G1>>(r, c);
  else if (v == "g1_head") fit<Decoder<attn::Attention<score::Softmax, FromInput<per_head, on_output>>>>(r, c);
  else if (v == "iga") {
    using Iga = attn::Attention<score::Softmax, FromInput<per_head, on_values>>;
    Iga::Policies pol;
    pol.gate.init = gate::Init::vga();
    fit<Decoder<Iga>>(r, c, {}, pol);
  } else if (v == "vga") fit<Decoder<Vga>>(r, c);
  else if (v == "retrofit_vga") fit<Decoder<Vga>>(r, c, {.from_baseline = true, .preserve_output = true});
  else if (v == "vga_out") fit<Decoder<attn::Attention<score::Softmax, FromValue<per_head, on_output>>>>(r, c);
  else return false;
  return true;
}

}  // namespace sink_atlas::detail
