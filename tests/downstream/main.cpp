// Downstream smoke program: builds against sinklab::sinklab only, makes tensors with the RNG,
// multiplies them with the CPU GEMM and checks the product against a plain triple loop and
// against a hand-computed value; built with the compiler's default flags, as a user's project is,
// it checks that a CPU able to run wider vectors than the build was told so (once, on stderr),
// that the run-time-dispatched fp32, bf16 and int8 GEMMs take the CPU's best path all the same
// (and agree with a reference or their portable paths), and that a decoder trains a step in fp32
// and in bf16.
// Exits non-zero on any mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/isa.hpp"
#include "sinklab/nn/transformer.hpp"

using sinklab::Tensor;
using sinklab::kernels::cpu::gemm;
using sinklab::kernels::cpu::Trans;

int main() {
  // Exact check: [[0,1,2],[3,4,5]] · [[0,1],[2,3],[4,5]] = [[10,13],[28,40]].
  auto a = Tensor<double>::arange({2, 3});
  auto b = Tensor<double>::arange({3, 2});
  auto c = Tensor<double>::zeros({2, 2});
  gemm(Trans::N, Trans::N, 2, 2, 3, 1.0, a.data(), 3, b.data(), 2, 0.0, c.data(), 2);
  if (c(0, 0) != 10.0 || c(0, 1) != 13.0 || c(1, 0) != 28.0 || c(1, 1) != 40.0) {
    std::printf("downstream: wrong 2x2 product [[%g, %g], [%g, %g]]\n", c(0, 0), c(0, 1), c(1, 0), c(1, 1));
    return 1;
  }

  // Random operands from the seeded RNG, B used transposed: C = A · Bᵀ, large enough for the
  // packed kernel (and its run-time tiles), with ragged edges.
  constexpr int64_t M = 70, N = 130, K = 90;
  sinklab::Rng rng(2026);
  auto x = rng.normal<float>({M, K});
  auto y = rng.normal<float>({N, K});
  auto z = Tensor<float>::zeros({M, N});
  gemm(Trans::N, Trans::T, M, N, K, 1.0f, x.data(), K, y.data(), K, 0.0f, z.data(), N);
  double max_err = 0.0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0.0;
      for (int64_t k = 0; k < K; ++k) ref += double(x(i, k)) * double(y(j, k));
      max_err = std::max(max_err, std::abs(ref - double(z(i, j))));
    }
  if (!(max_err < 1e-3)) {  // sums of 90 products of normals in fp32
    std::printf("downstream: GEMM differs from the reference by %g\n", max_err);
    return 1;
  }
  // The first GEMM ran warn_if_built_below_cpu(). This project is built with the compiler's
  // defaults (SSE2 on x86-64): on a CPU with AVX2 or AVX-512 it must have warned.
  const sinklab::CpuFeatures& f = sinklab::cpu_features();
  const std::string built = sinklab::compiled_isa();
  const bool warned = sinklab::warn_if_built_below_cpu();
  std::printf("downstream: compiled for %s; CPU: %s; warned: %s\n", built.c_str(), f.summary().c_str(),
              warned ? "yes" : "no");
  if (built == "sse2" && (f.avx512f || (f.avx2 && f.fma)) && !std::getenv("SINKLAB_QUIET_ISA") && !warned) {
    std::printf("downstream: a default (SSE2) build on this CPU was not told to use -march=native\n");
    return 1;
  }

  // The bf16 and int8 GEMMs choose their path at run time, whatever this build's flags.
  namespace kc = sinklab::kernels::cpu;
  const kc::KernelIsa isa = kc::kernel_isa();
  std::printf("downstream: %s\n", isa.summary().c_str());
  const bool wide_fp32 = built == "sse2" && (f.avx512f || (f.avx2 && f.fma));  // a run-time tile is wider
  // AMX where the CPU and OS offer it and SINKLAB_NO_AMX is unset (its self-check must pass too).
  const bool amx = f.amx_permitted && !kc::amx_disabled_by_env();
  if ((f.avx512_bf16 && isa.bf16_gemm != (amx && f.amx_bf16 ? "amx-bf16" : "avx512-bf16")) ||
      (f.avx512_vnni && isa.int8_gemm != (amx && f.amx_int8 ? "amx-int8" : "avx512-vnni")) ||
      (!f.avx512_vnni && f.avx2 && isa.int8_gemm != "avx2") ||
      (wide_fp32 && isa.fp32_gemm != (f.avx512f ? "avx512f (run time)" : "avx2+fma (run time)"))) {
    std::printf("downstream: a run-time-dispatched GEMM does not take this CPU's best path\n");
    return 1;
  }
  {
    constexpr int64_t m = 37, n = 70, k = 45;
    auto p = rng.normal<float>({m, k});
    auto q = rng.normal<float>({k, n});
    auto fast = Tensor<float>::zeros({m, n}), portable = Tensor<float>::zeros({m, n});
    kc::gemm_bf16(Trans::N, Trans::N, m, n, k, 1.f, p.data(), k, q.data(), n, 0.f, fast.data(), n);
    kc::gemm_bf16(Trans::N, Trans::N, m, n, k, 1.f, p.data(), k, q.data(), n, 0.f, portable.data(), n, {},
                  kc::Bf16Path::Emulated);
    double worst = 0;
    for (int64_t i = 0; i < m * n; ++i) worst = std::max(worst, std::abs(double(fast.data()[i]) - portable.data()[i]));
    if (!(worst < 1e-4)) {  // the same bf16 operands; only the order of the fp32 sums differs
      std::printf("downstream: bf16 GEMM (%s) differs from its emulation by %g\n", isa.bf16_gemm.c_str(), worst);
      return 1;
    }
    std::vector<uint8_t> a8(static_cast<std::size_t>(m * k));
    std::vector<int8_t> b8(static_cast<std::size_t>(k * n));
    for (auto& v : a8) v = static_cast<uint8_t>(rng.randint(0, 256));
    for (auto& v : b8) v = static_cast<int8_t>(rng.randint(-127, 128));
    const kc::PackedS8 packed = kc::pack_s8(b8.data(), n, k, n);
    std::vector<int32_t> i_fast(static_cast<std::size_t>(m * n)), i_portable(i_fast.size());
    kc::gemm_u8s8_i32(m, a8.data(), k, 128, packed, i_fast.data(), n);
    kc::gemm_u8s8_i32(m, a8.data(), k, 128, packed, i_portable.data(), n, kc::S8Path::Scalar);
    if (i_fast != i_portable) {
      std::printf("downstream: int8 GEMM (%s) differs from its portable path\n", isa.int8_gemm.c_str());
      return 1;
    }
  }

  // A decoder built with these flags trains a step in fp32 and with bf16 products.
  using Decoder = sinklab::nn::Transformer<sinklab::nn::PreNorm<sinklab::norm::RMS>, sinklab::attn::Attention<>,
                                           sinklab::ffn::SwiGLU>;
  sinklab::nn::ModelConfig cfg;
  cfg.vocab = 32, cfg.d_model = 32, cfg.heads = 2, cfg.layers = 1, cfg.max_len = 16;
  Decoder::Module<float> model("m", cfg, rng);
  auto ids = Tensor<int32_t>::empty({2, 16}), targets = Tensor<int32_t>::empty({2, 16});
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data()[i] = static_cast<int32_t>(rng.randint(0, 32));
    targets.data()[i] = static_cast<int32_t>(rng.randint(0, 32));
  }
  double losses[2];
  for (int i = 0; i < 2; ++i) {
    sinklab::autodiff::Tape<float> tape;
    tape.set_precision(i ? sinklab::kernels::Precision::bf16 : sinklab::kernels::Precision::fp32);
    auto loss = model.loss(tape, ids, targets);
    tape.backward(loss);
    losses[i] = loss.item();
  }
  std::printf("downstream: decoder loss fp32 %.5f, bf16 products %.5f\n", losses[0], losses[1]);
  if (!std::isfinite(losses[0]) || !(std::abs(losses[0] - losses[1]) < 0.05)) {
    std::printf("downstream: the decoder's fp32 and bf16 losses disagree\n");
    return 1;
  }
  std::printf("sinklab downstream OK: C(1,1) = %g, max |GEMM - reference| = %.2e\n", c(1, 1), max_err);
  return 0;
}
