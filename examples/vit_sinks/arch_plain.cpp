// examples/vit_sinks, the ungated models: the vanilla ViT and the ViT with register tokens.
#include "fit.hpp"

namespace vit_sinks::detail {

bool run_plain(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.gate) return false;
  if (v.registers) fit<Vit<Enc, tokens::Registers>>(r, c);
  else fit<Vanilla>(r, c);
  return true;
}

}  // namespace vit_sinks::detail
