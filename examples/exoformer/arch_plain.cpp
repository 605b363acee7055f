// examples/exoformer, the models without anchors: the base Transformer, Gated Attention, and
// ResFormer's value residual (without a gate as in the paper's table, and with G1: the paper's
// "naive combination").
#include "fit.hpp"

namespace exoformer::detail {

bool run_plain(experiment::Run& r, const Context& c, const Variant& v) {
  const mix::ResFormerOptions res{.learnable = v.learnable};
  if (v.family == "base") fit<Base>(r, c, v);
  else if (v.family == "gated") fit<Decoder<Gated>>(r, c, v);
  else if (v.family == "resformer" && !v.gate) fit<Decoder<attn::Attention<>, mix::ResFormer>>(r, c, v, res);
  else if (v.family == "resformer") fit<Decoder<Gated, mix::ResFormer>>(r, c, v, res);
  else return false;
  return true;
}

}  // namespace exoformer::detail
