// examples/outlier_rescaling, the RMSNorm family: the baseline, Gated Attention (G1), and G1
// with the residual-sink remedies (PreAffine, GatedNorm). Residual clipping is a ModelConfig
// setting, so clip variants reuse these types.
#include "fit.hpp"

namespace outlier_rescaling::detail {

template <class Norm, class Attn>
using Llama = nn::Transformer<nn::PreNorm<Norm>, Attn, ffn::SwiGLU>;

bool run_rms(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.arch == "baseline") fit<Baseline>(r, c, v);
  else if (v.arch == "g1") fit<Llama<norm::RMS, G1>>(r, c, v);
  else if (v.arch == "g1_preaffine") fit<Llama<norm::PreAffineRMS, G1>>(r, c, v);
  else if (v.arch == "g1_gatednorm") fit<Llama<norm::GatedNorm<norm::RMS, 16>, G1>>(r, c, v);
  else return false;
  return true;
}

}  // namespace outlier_rescaling::detail
