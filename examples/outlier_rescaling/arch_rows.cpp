// examples/outlier_rescaling, the rows of the paper's Table 1 the other units do not build: G1
// with a residual-sink remedy and GLU (rows 17 and 18: PreAffine or GatedNorm, sigmoid GLU for
// SwiGLU), and attention without the softmax's normaliser (row 3). The paper's linear attention is
// Gated DeltaNet; ours is the plain causal form a_ij = (q_i·k_j/√d) / n_i (score::Pointwise with
// the identity, n_i the visible keys), which keeps what row 3 is about — no normalisation in the
// token mixing — without a recurrent state.
#include "fit.hpp"

namespace outlier_rescaling::detail {

template <class Norm, class Attn, class FFN>
using Decoder = nn::Transformer<nn::PreNorm<Norm>, Attn, FFN>;
using Linear = attn::Attention<score::Pointwise<act::Identity>>;

bool run_rows(experiment::Run& r, const Context& c, const Variant& v) {
  if (v.arch == "g1_preaffine_glu") fit<Decoder<norm::PreAffineRMS, G1, ffn::GLU>>(r, c, v);
  else if (v.arch == "g1_gatednorm_glu") fit<Decoder<norm::GatedNorm<norm::RMS, 16>, G1, ffn::GLU>>(r, c, v);
  else if (v.arch == "linear") fit<Decoder<norm::RMS, Linear, ffn::SwiGLU>>(r, c, v);
  else return false;
  return true;
}

}  // namespace outlier_rescaling::detail
