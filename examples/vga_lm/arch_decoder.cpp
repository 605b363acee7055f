// examples/vga_lm, the decoder family (OPT-like, causal LM): every variant's model for this mask.
#include "fit.hpp"

namespace vga_lm {

// The decoder is pre-norm (OPT's layout); main.cpp refuses --block post for it.
void run_decoder(experiment::Run& run, const FamilyCtx& c) { run_variant<PreLN, mask::Causal>(run, c); }
Timing time_decoder(const FamilyCtx& c) { return time_run<PreLN, mask::Causal>(c); }
int64_t vanilla_parameters(const FamilyCtx& c) {
  Rng r0(0);
  typename VanillaOf<PreLN, mask::Causal>::template Module<float> counter("", c.cfg, r0);
  return nn::parameter_count<float>(counter);
}

}  // namespace vga_lm
