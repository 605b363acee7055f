// The tensor-core attention (kernels/cuda/attention_mma_*.hpp through cuda/attention_mma.cuh) on
// the device against the CPU backend's materialised reference in double on the same rounded
// operands (attention_mma_cases_cpu.cpp): every score family, both masks, grouped-query heads,
// padded keys, head sizes 32, 64 and 128, bf16 and fp16, several key tiles; and the float op with
// precision bf16 (attention_ops.cuh), which converts its operands and takes these kernels.
// test_cuda_attention_mma_emulated runs the same kernel bodies on the CPU's SIMT emulator;
// agreement here is what says the emulator's mma, ldmatrix and cp.async are the hardware's.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../max_rel_diff.hpp"
#include "../softcap_score.hpp"
#include "attention_mma_cases.hpp"
#include "on_device.cuh"
#include "sinklab/cuda/attention_mma.cuh"
#include "sinklab/cuda/attention_ops.cuh"

using namespace sinklab;
using sinklab_test::MmaCase;
using sinklab_test::MmaData;
using sinklab_test::MmaScore;

namespace {

template <class T>
struct Buffer {  // device memory of n elements, freed with the test
  std::shared_ptr<T[]> p;
  int64_t n = 0;
  explicit Buffer(const std::vector<T>& host) : p(memory<cuda>::allocate<T>(host.size() ? host.size() : 1)), n(host.size()) {
    kernels::cuda::host::check(cudaMemcpy(p.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  explicit Buffer(int64_t count, T fill) : Buffer(std::vector<T>(static_cast<std::size_t>(count), fill)) {}
  T* get() const { return p.get(); }
  std::vector<double> host() const {
    std::vector<T> h(static_cast<std::size_t>(n));
    kernels::cuda::host::check(cudaMemcpy(h.data(), p.get(), n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return {h.begin(), h.end()};
  }
};

template <class E, class Score, class Mask>
void run(const Score& score, const MmaCase& c, double tol) {
  const MmaData m = sinklab_test::mma_case_data(c);
  const Buffer<uint16_t> q(m.q), k(m.k), v(m.v), dout(m.dout);
  const Buffer<int64_t> lengths(m.lengths);
  Buffer<float> sink(m.sink.empty() ? std::vector<float>{0.f} : m.sink), dsink(c.H, 0.f);
  Buffer<float> out(c.B * c.H * c.T * c.d, 7.f), lse(c.B * c.H * c.T, 7.f), D(c.B * c.H * c.T, 0.f),
      row_grad(c.B * c.H * c.T, 0.f), dq(c.B * c.H * c.T * c.d, 7.f), dk(c.B * c.Hkv * c.S * c.d, 7.f),
      dv(c.B * c.Hkv * c.S * c.d, 7.f);
  typename Score::template Args<float> args{};
  if constexpr (Score::has_sink) args.sink_logit = sink.get();
  const kernels::cuda::AttentionShape sh{c.B, c.H, c.Hkv, c.T, c.S, c.d, 0.0, 64, c.padded ? lengths.get() : nullptr};
  constexpr bool normalised = Score::family == score::Family::Normalised;
  kernels::cuda::host::attention_mma_forward<E, Score, Mask>(score, args, q.get(), k.get(), v.get(), out.get(),
                                                      normalised ? lse.get() : nullptr, sh);
  kernels::cuda::host::attention_mma_backward<E, Score, Mask>(score, args, q.get(), k.get(), v.get(), out.get(),
                                                       normalised ? lse.get() : nullptr, dout.get(), dq.get(), dk.get(),
                                                       dv.get(), Score::has_sink ? dsink.get() : nullptr, D.get(),
                                                       Score::has_sink ? row_grad.get() : nullptr, sh);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  INFO(std::string(Score::name), " ", std::string(Mask::name), " ", std::string(E::name), " d ", c.d, " T ", c.T,
       " S ", c.S, " H ", c.H, "/", c.Hkv, c.padded ? " padded" : "");
  const double e_out = sinklab_test::max_rel_diff(out.host(), m.out), e_dq = sinklab_test::max_rel_diff(dq.host(), m.dq),
               e_dk = sinklab_test::max_rel_diff(dk.host(), m.dk), e_dv = sinklab_test::max_rel_diff(dv.host(), m.dv);
  MESSAGE(Score::name, " ", E::name, " d ", c.d, ": out ", e_out, " dq ", e_dq, " dk ", e_dk, " dv ", e_dv);
  CHECK(e_out <= tol);
  if constexpr (normalised) CHECK(sinklab_test::max_rel_diff(lse.host(), m.lse) <= 1e-5);
  CHECK(e_dq <= tol);
  CHECK(e_dk <= tol);
  CHECK(e_dv <= tol);
  if constexpr (Score::has_sink) CHECK(sinklab_test::max_rel_diff(dsink.host(), m.dsink) <= tol);
}

template <class E, class Mask>
void every_score(MmaCase c, double tol) {
  c.score = MmaScore::Softmax, run<E, score::Softmax, Mask>({}, c, tol);
  c.score = MmaScore::Sink, run<E, score::SoftmaxSink, Mask>({}, c, tol);
  c.score = MmaScore::Clipped;
  run<E, score::ClippedSoftmax, Mask>({sinklab_test::kClipZeta, sinklab_test::kClipGamma}, c, tol);
  c.score = MmaScore::ReLU, run<E, score::ReLU, Mask>({}, c, tol);
  c.score = MmaScore::Sigmoid, run<E, score::Sigmoid, Mask>({}, c, tol);
  c.score = MmaScore::Softcap, run<E, user::Softcap, Mask>({}, c, tol);
}

constexpr double kBf16 = 1e-2, kF16 = 2e-3;

}  // namespace

TEST_CASE("tensor-core attention on the GPU: every score, causal, GQA, padded, d 32, 64 and 128") {
  for (int64_t d : {32, 64, 128})
    every_score<simt::Bf16, mask::Causal>({MmaScore::Softmax, true, false, true, 2, 4, 2, 300, 300, d}, kBf16);
}

TEST_CASE("tensor-core attention on the GPU: every score, bidirectional") {
  // The mask enters only through key_end; one head size keeps the instantiations (and nvcc's
  // time) down.
  every_score<simt::Bf16, mask::Bidirectional>({MmaScore::Softmax, false, false, false, 1, 2, 1, 200, 200, 64}, kBf16);
}

TEST_CASE("tensor-core attention on the GPU: fp16, fewer queries than keys, long rows") {
  MmaCase c{MmaScore::Softmax, true, true, true, 2, 4, 2, 300, 300, 64};
  run<simt::F16, score::Softmax, mask::Causal>({}, c, kF16);
  c.d = 128, run<simt::F16, score::Softmax, mask::Causal>({}, c, kF16);
  run<simt::Bf16, score::Softmax, mask::Causal>({}, {MmaScore::Softmax, true, false, false, 1, 4, 4, 70, 1000, 64},
                                                kBf16);
  run<simt::Bf16, score::Softmax, mask::Causal>({}, {MmaScore::Softmax, true, false, false, 1, 2, 2, 2048, 2048, 128},
                                                kBf16);
}

TEST_CASE("the float attention op with precision bf16 takes the tensor-core kernels") {
  // Inputs that are bf16 values already, so the op's conversion is exact and the reference applies.
  for (int64_t d : {32, 64}) {
  const MmaCase c{MmaScore::Softmax, true, false, true, 2, 4, 2, 150, 150, d};
  const MmaData m = sinklab_test::mma_case_data(c);
  auto floats = [](const std::vector<uint16_t>& codes, const Shape& s) {
    std::vector<float> f;
    for (uint16_t h : codes) f.push_back(from_bf16(h));
    return Tensor<float, cuda>::from(s, f);
  };
  const auto q = floats(m.q, {c.B, c.H, c.T, c.d}), k = floats(m.k, {c.B, c.Hkv, c.S, c.d}),
             v = floats(m.v, {c.B, c.Hkv, c.S, c.d}), dout = floats(m.dout, {c.B, c.H, c.T, c.d});
  kernels::AttentionOptions opt;
  opt.kv_lengths = Tensor<int64_t>::from({c.B}, m.lengths);
  opt.precision = kernels::Precision::bf16;
  const score::params_t<score::Softmax, float, cuda> params{};
  const auto fwd = kernels::cuda::host::attention_fused_forward(score::Softmax{}, mask::Causal{}, q, k, v, params, opt);
  const auto g = kernels::cuda::host::attention_fused_backward(score::Softmax{}, mask::Causal{}, q, k, v, params, fwd, dout, opt);
  auto host = [](const Tensor<float, cuda>& t) {
    const std::vector<float> f = t.to_vector();
    return std::vector<double>(f.begin(), f.end());
  };
  CHECK(sinklab_test::max_rel_diff(host(fwd.out), m.out) <= kBf16);
  CHECK(sinklab_test::max_rel_diff(host(fwd.lse), m.lse) <= 1e-5);
  CHECK(sinklab_test::max_rel_diff(host(g.dq), m.dq) <= kBf16);
  CHECK(sinklab_test::max_rel_diff(host(g.dk), m.dk) <= kBf16);
  CHECK(sinklab_test::max_rel_diff(host(g.dv), m.dv) <= kBf16);
  // fp32 precision keeps the float kernels: a tighter agreement with the reference.
  opt.precision = kernels::Precision::fp32;
  const auto f32 = kernels::cuda::host::attention_fused_forward(score::Softmax{}, mask::Causal{}, q, k, v, params, opt);
  CHECK(sinklab_test::max_rel_diff(host(f32.out), m.out) <= 1e-5);
  }
}
