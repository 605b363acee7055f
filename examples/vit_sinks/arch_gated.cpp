// examples/vit_sinks, the G1 gate (σ(LN1(x)·W_g + b) per channel before W_O; W_g = 0, b = 2 at
// the start), without and with register tokens.
#include "fit.hpp"

namespace vit_sinks::detail {

bool run_gated(experiment::Run& r, const Context& c, const Variant& v) {
  if (!v.gate) return false;
  if (v.registers) fit<Vit<GatedEnc, tokens::Registers>>(r, c);
  else fit<Vit<GatedEnc, tokens::None>>(r, c);
  return true;
}

}  // namespace vit_sinks::detail
