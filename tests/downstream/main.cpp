// Downstream smoke program: builds against sinklab::sinklab only, makes tensors with the RNG,
// multiplies them with the CPU GEMM and checks the product against a plain triple loop and
// against a hand-computed value; built with the compiler's default flags, as a user's project is,
// it checks that a CPU able to run wider vectors than the build was told so (once, on stderr).
// Exits non-zero on any mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"

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

  // Random operands from the seeded RNG, B used transposed: C = A · Bᵀ.
  constexpr int64_t M = 17, N = 9, K = 33;
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
  if (!(max_err < 1e-4)) {
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
  std::printf("sinklab downstream OK: C(1,1) = %g, max |GEMM - reference| = %.2e\n", c(1, 1), max_err);
  return 0;
}
