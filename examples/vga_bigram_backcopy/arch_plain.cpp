// examples/vga_bigram_backcopy, the models without a gate: vanilla softmax attention (also the
// reference init every variant of a seed starts from), a learnable sink logit per head in the
// softmax's normaliser, and one learnable register token prepended before <s>.
#include "fit.hpp"

namespace vga_bigram_backcopy {

ex::TensorBank vanilla_init(const Context& c, uint64_t seed) {
  Rng r(seed);
  Vanilla::Module<float> m("", c.cfg, r);
  return ex::TensorBank::of(m);
}

int64_t vanilla_parameters(const Context& c) {
  Rng r(0);
  Vanilla::Module<float> m("", c.cfg, r);
  return nn::parameter_count<float>(m);
}

namespace detail {

bool run_plain(ex::Run& r, const Context& c, const ex::TensorBank& reference) {
  const std::string& v = r.variant();
  if (v == "vanilla") fit<score::Softmax, gate::None>(r, c, reference);
  else if (v == "sink") fit<score::SoftmaxSink, gate::None>(r, c, reference);
  else if (v == "register") fit<score::Softmax, gate::None, tokens::Registers>(r, c, reference);
  else return false;
  return true;
}

}  // namespace detail

}  // namespace vga_bigram_backcopy
