// examples/vga_lm, the encoder family with post-norm blocks (--block post, BERT's layout): its own
// unit, so the two layouts compile in parallel and a pre-norm edit does not recompile this one.
#include "fit.hpp"

namespace vga_lm {

void run_encoder_post_norm(experiment::Run& run, const FamilyCtx& c) { run_variant<PostLN, mask::Bidirectional>(run, c); }
Timing time_encoder_post_norm(const FamilyCtx& c) { return time_run<PostLN, mask::Bidirectional>(c); }

}  // namespace vga_lm
