// examples/exoformer, ExoFormer: a separate projection of the token embeddings, split into q, k,
// v and gate-logit anchors, RMS-normed per head and mixed into every layer.
#include "anchors.hpp"

namespace exoformer::detail {

bool run_exo(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.family != "exoformer") return false;
  fit_anchor<mix::ExoFormer>(r, c, v);
  return true;
}

}  // namespace exoformer::detail
