// examples/exoformer: the anchor-mixing families (NuResFormer, ExoFormer) by granularity and
// mode. Only the paper's variants are instantiated — scalar, per-head and per-element static
// mixing, per-element dynamic mixing — so each family's translation unit builds four models.
#pragma once
#include "fit.hpp"

namespace exoformer::detail {

template <template <class, class, class> class Family, class G, class M>
using AnchorModel = Decoder<Gated, Family<G, M, norm::RMS>>;

template <template <class, class, class> class Family>
void fit_anchor(experiment::Run& r, const Context& c, const Variant& v) {
  const mix::AnchorOptions o{.q = v.streams[0],
                             .k = v.streams[1],
                             .v = v.streams[2],
                             .g = v.streams[3],
                             .normalize_anchor = !v.raw_anchors};
  if (v.dynamic) {
    SINKLAB_CHECK(v.granularity == 'e', "exoformer: '", v.name,
                  "': dynamic mixing is built with element-wise coefficients only (the paper's dynamic model)");
    fit<AnchorModel<Family, mix::per_element, mix::Dynamic>>(r, c, v, o);
  } else if (v.granularity == 'e') {
    fit<AnchorModel<Family, mix::per_element, mix::Static>>(r, c, v, o);
  } else if (v.granularity == 'h') {
    fit<AnchorModel<Family, mix::per_head, mix::Static>>(r, c, v, o);
  } else {
    fit<AnchorModel<Family, mix::scalar, mix::Static>>(r, c, v, o);
  }
}

}  // namespace exoformer::detail
