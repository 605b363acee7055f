// examples/vga_bigram_backcopy, the gated models: g = σ(S·W_g) per head and token, W_g zero at the
// start (every gate 0.5), with S the layer input (IGA) or the values (VGA), gating each key's
// value or each query's head output.
#include "fit.hpp"

namespace vga_bigram_backcopy::detail {

bool run_gated(ex::Run& r, const Context& c, const ex::TensorBank& reference) {
  using namespace gate;
  const std::string& v = r.variant();
  if (v == "iga") fit<score::Softmax, FromInput<per_head, on_values>>(r, c, reference);
  else if (v == "vga_values") fit<score::Softmax, FromValue<per_head, on_values>>(r, c, reference);
  else if (v == "vga_output") fit<score::Softmax, FromValue<per_head, on_output>>(r, c, reference);
  else return false;
  return true;
}

}  // namespace vga_bigram_backcopy::detail
