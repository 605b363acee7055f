// The CPU side of test_cuda_attention_mma (attention_mma_cases.hpp): random codes and the CPU
// backend's materialised attention in double on their values.
#include "attention_mma_cases.hpp"

#include "softcap_score.hpp"

#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/simt_mma.hpp"

using namespace sinklab;

namespace sinklab_test {
namespace {

template <class E>
Tensor<double> codes(Rng& rng, const Shape& shape, std::vector<uint16_t>& out) {
  Tensor<double> t = rng.normal<double>(shape);
  double* x = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) {
    out.push_back(E::from_float(static_cast<float>(x[i])));
    x[i] = E::to_float(out.back());
  }
  return t;
}

template <class E, class Score, class Mask>
MmaData make(const Score& score, const MmaCase& c) {
  MmaData m;
  Rng rng(17);
  const Tensor<double> q = codes<E>(rng, {c.B, c.H, c.T, c.d}, m.q), k = codes<E>(rng, {c.B, c.Hkv, c.S, c.d}, m.k),
                       v = codes<E>(rng, {c.B, c.Hkv, c.S, c.d}, m.v),
                       dout = codes<E>(rng, {c.B, c.H, c.T, c.d}, m.dout);
  auto params = score.template make_params<double>(c.H);
  if constexpr (Score::has_sink) {
    params.sink_logit = rng.normal<double>({c.H}, 0.5, 1.0);
    for (double s : params.sink_logit.to_vector()) m.sink.push_back(static_cast<float>(s));
    params.sink_logit = Tensor<float>::from({c.H}, m.sink).template to<double>();  // the kernel's float values
  }
  kernels::AttentionOptions opt;
  m.lengths.assign(static_cast<std::size_t>(c.B), c.S);
  if (c.padded) {
    m.lengths.back() = c.S / 2 + 3;
    opt.kv_lengths = Tensor<int64_t>::from({c.B}, m.lengths);
  }
  const auto fw = kernels::cpu::attention_reference_forward(score, Mask{}, q, k, v, params, opt);
  const auto bw = kernels::cpu::attention_reference_backward(score, Mask{}, q, k, v, params, dout, opt);
  m.out = fw.out.to_vector();
  if (fw.lse.defined()) m.lse = fw.lse.to_vector();
  m.dq = bw.dq.to_vector(), m.dk = bw.dk.to_vector(), m.dv = bw.dv.to_vector();
  if constexpr (Score::has_sink) m.dsink = bw.dscore.sink_logit.to_vector();
  return m;
}

template <class E, class Mask>
MmaData by_score(const MmaCase& c) {
  switch (c.score) {
    case MmaScore::Softmax: return make<E, score::Softmax, Mask>({}, c);
    case MmaScore::Sink: return make<E, score::SoftmaxSink, Mask>({}, c);
    case MmaScore::Clipped: return make<E, score::ClippedSoftmax, Mask>({kClipZeta, kClipGamma}, c);
    case MmaScore::ReLU: return make<E, score::ReLU, Mask>({}, c);
    case MmaScore::Sigmoid: return make<E, score::Sigmoid, Mask>({}, c);
    case MmaScore::Softcap: return make<E, user::Softcap, Mask>({}, c);
  }
  return {};
}

}  // namespace

MmaData mma_case_data(const MmaCase& c) {
  if (c.fp16) return c.causal ? by_score<simt::F16, mask::Causal>(c) : by_score<simt::F16, mask::Bidirectional>(c);
  return c.causal ? by_score<simt::Bf16, mask::Causal>(c) : by_score<simt::Bf16, mask::Bidirectional>(c);
}

}  // namespace sinklab_test
