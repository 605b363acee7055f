// examples/sink_atlas, the residual-sink remedies of the outlier-rescaling paper, each with G1 as
// the paper pairs them (PreAffine: a learnable per-channel scale before the RMSNorm; GatedNorm: a
// low-rank sigmoid gate after it), and DyT (tanh(αx) in place of every RMSNorm) alone at its best
// rate, with the embeddings' learnable scale starting where a norm would put the stream (rms 1).
#include "fit.hpp"

namespace sink_atlas::detail {

bool run_norms(experiment::Run& r, const Context& c) {
  const std::string& v = r.variant();
  if (v == "preaffine_g1") fit<Decoder<G1, norm::PreAffineRMS>>(r, c);
  else if (v == "gatednorm_g1") fit<Decoder<G1, norm::GatedNorm<norm::RMS, 16>>>(r, c);
  else if (v == "dyt") fit<Decoder<attn::Attention<>, norm::DyT>>(r, c, {.lr = c.s->dyt_lr, .embed_scale = true});
  else return false;
  return true;
}

}  // namespace sink_atlas::detail
