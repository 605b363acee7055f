// examples/gradient_sinks: the two variants that keep softmax attention's sink — vanilla and
// V-scale (which keeps the sink and shrinks its value).
#include "fit.hpp"

namespace gradient_sinks::detail {

bool run_softmax(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.name == "vanilla") fit<Vanilla>(r, c);
  else if (v.name == "vscale") fit<VScaled>(r, c);
  else return false;
  return true;
}

}  // namespace gradient_sinks::detail
