// examples/exoformer, NuResFormer: layer 1's q, k, v and gate logits, RMS-normed per head, as
// the anchors mixed into every later layer.
#include "anchors.hpp"

namespace exoformer::detail {

bool run_nures(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.family != "nuresformer") return false;
  fit_anchor<mix::NuResFormer>(r, c, v);
  return true;
}

}  // namespace exoformer::detail
