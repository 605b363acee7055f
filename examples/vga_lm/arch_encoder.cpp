// examples/vga_lm, the encoder family (BERT-like, bidirectional, masked LM) with pre-norm blocks:
// every variant's model for this mask; --block post goes to arch_encoder_post.cpp.
#include "fit.hpp"

namespace vga_lm {

void run_encoder(experiment::Run& run, const FamilyCtx& c) {
  if (c.s->block == "post") run_encoder_post_norm(run, c);
  else run_variant<PreLN, mask::Bidirectional>(run, c);
}
Timing time_encoder(const FamilyCtx& c) {
  return c.s->block == "post" ? time_encoder_post_norm(c) : time_run<PreLN, mask::Bidirectional>(c);
}

}  // namespace vga_lm
