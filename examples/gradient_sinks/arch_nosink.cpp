// examples/gradient_sinks: the two contrasts that remove the sink — the G1 output gate and a
// learnable sink logit per head.
#include "fit.hpp"

namespace gradient_sinks::detail {

bool run_nosink(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.name == "gated") fit<Gated>(r, c);
  else if (v.name == "sink") fit<Sinked>(r, c);
  else return false;
  return true;
}

}  // namespace gradient_sinks::detail
