// examples/vga_lm, the encoder family (BERT-like, bidirectional, masked LM): every variant's model for this mask.
#include "fit.hpp"

namespace vga_lm {

void run_encoder(experiment::Run& run, const FamilyCtx& c) { run_variant<mask::Bidirectional>(run, c); }
Timing time_encoder(const FamilyCtx& c) { return time_run<mask::Bidirectional>(c); }

}  // namespace vga_lm
