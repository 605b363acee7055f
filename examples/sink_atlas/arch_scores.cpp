// examples/sink_atlas, scores without softmax's normaliser, which Gu et al. find form no sink
// (sigmoid attention σ(s + b), b = −log n; ReLU attention ReLU(s)/n, n the visible keys), and
// Bondarenko et al.'s clipped softmax clip((ζ − γ)·softmax + γ, 0, 1) with ζ = 1, γ = −12/T
// (their γ = −α/T at α = 12), which lets a head give exactly zero attention.
#include "fit.hpp"

namespace sink_atlas::detail {

bool run_scores(experiment::Run& r, const Context& c) {
  const std::string& v = r.variant();
  using Clipped = attn::Attention<score::ClippedSoftmax>;
  if (v == "sigmoid") fit<Decoder<attn::Attention<score::Sigmoid>>>(r, c);
  else if (v == "relu") fit<Decoder<attn::Attention<score::ReLU>>>(r, c);
  else if (v == "clipped")
    fit<Decoder<Clipped>>(r, c, {}, Clipped::Policies{.score = score::ClippedSoftmax::for_length(c.s->seq_len)});
  else return false;
  return true;
}

}  // namespace sink_atlas::detail
