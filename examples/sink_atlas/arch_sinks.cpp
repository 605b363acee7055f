// examples/sink_atlas, the softmax models that keep or move the sink: the baseline, a learnable
// sink logit per head (gpt-oss; the VGA paper's "learnable sink"), register tokens (Darcet et
// al.; prepended, as a causal model cannot see appended ones), one learnable sink token at
// position 0, and V-scale (v̂ = φ(‖v‖²) v, the gradient-sinks paper's remedy); and the baseline's
// final weights trained on (finetune: the VGA paper's "fine-tuning w/o VGA").
#include "fit.hpp"

namespace sink_atlas::detail {

bool run_sinks(experiment::Run& r, const Context& c) {
  const std::string& v = r.variant();
  if (v == "baseline") fit<Baseline>(r, c);
  else if (v == "sink_logit") fit<Decoder<attn::Attention<score::SoftmaxSink>>>(r, c);
  else if (v == "registers") fit<Decoder<attn::Attention<>, norm::RMS, tokens::Registers>>(r, c, {.registers = c.s->registers});
  else if (v == "sink_token") fit<Decoder<attn::Attention<>, norm::RMS, tokens::Sink>>(r, c);
  else if (v == "finetune") fit<Baseline>(r, c, {.from_baseline = true});
  else if (v == "vscale") fit<Decoder<attn::Attention<score::Softmax, gate::None, value::VScale>>>(r, c);
  else return false;
  return true;
}

}  // namespace sink_atlas::detail
