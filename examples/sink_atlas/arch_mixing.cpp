// examples/sink_atlas, mixing across layers: ResFormer (every layer's values mixed with the first
// layer's, fixed 0.5 / 0.5), and the ExoFormer paper's anchor mixing of q, k, v and the G1 gate's
// logits — NuResFormer (the first layer's projections as anchors) and ExoFormer (a separate
// projection of the embeddings, RMS-normed per head), per-element static coefficients, and
// ExoFormer's dynamic mixing. AdamW as every other variant (the paper trains with Muon).
#include "fit.hpp"

namespace sink_atlas::detail {

bool run_mixing(experiment::Run& r, const Context& c) {
  const std::string& v = r.variant();
  const attn::Attention<>::Policies plain{};
  const G1::Policies gated{};
  if (v == "resformer") fit<Decoder<attn::Attention<>, norm::RMS, tokens::None, mix::ResFormer>>(r, c, {}, plain, mix::ResFormerOptions{});
  else if (v == "nuresformer") fit<Decoder<G1, norm::RMS, tokens::None, mix::NuResFormer<>>>(r, c, {}, gated, mix::AnchorOptions{});
  else if (v == "exoformer") fit<Decoder<G1, norm::RMS, tokens::None, mix::ExoFormer<>>>(r, c, {}, gated, mix::AnchorOptions{});
  else if (v == "exoformer_dyn")
    fit<Decoder<G1, norm::RMS, tokens::None, mix::ExoFormer<mix::per_element, mix::Dynamic>>>(r, c, {}, gated, mix::AnchorOptions{});
  else return false;
  return true;
}

}  // namespace sink_atlas::detail
