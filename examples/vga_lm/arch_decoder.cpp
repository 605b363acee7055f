// examples/vga_lm, the decoder family (OPT-like, causal LM): every variant's model for this mask.
#include "fit.hpp"

namespace vga_lm {

void run_decoder(experiment::Run& run, const FamilyCtx& c) { run_variant<mask::Causal>(run, c); }
Timing time_decoder(const FamilyCtx& c) { return time_run<mask::Causal>(c); }
int64_t vanilla_parameters(const FamilyCtx& c) {
  Rng r0(0);
  typename VanillaOf<mask::Causal>::template Module<float> counter("", c.cfg, r0);
  return nn::parameter_count<float>(counter);
}

}  // namespace vga_lm
