// cuBLAS GEMM behind the CPU backend's row-major interface (cuda/include/sinklab/cuda/gemm.cuh)
// against loops in double: every transpose pair, sizes off any tile (K = 1 among them), padded
// leading dimensions, alpha and beta, batches at strides; bf16 mode against the same loops on
// bf16-rounded operands, and measurably away from the float32 product (so the mode is in force).
#include <doctest/doctest.h>

#include <cuda_bf16.h>

#include <tuple>
#include <vector>

#include "../max_rel_diff.hpp"
#include "on_device.cuh"
#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/gemm.cuh"

using namespace sinklab;
using kernels::Trans;

namespace {

struct Case {
  int64_t batch, M, N, K;
  Trans ta, tb;
};

// Row-major op(X)[r, k] of a matrix stored with leading dimension ld.
double at(const std::vector<double>& X, int64_t offset, int64_t ld, Trans t, int64_t r, int64_t k) {
  return t == Trans::N ? X[offset + r * ld + k] : X[offset + k * ld + r];
}

template <class T>
void check(const Case& c, kernels::Precision precision, double tol) {
  const int64_t a_rows = c.ta == Trans::N ? c.M : c.K, a_cols = c.ta == Trans::N ? c.K : c.M;
  const int64_t b_rows = c.tb == Trans::N ? c.K : c.N, b_cols = c.tb == Trans::N ? c.N : c.K;
  const int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = c.N + 2;  // padded rows: strided operands
  const int64_t sa = a_rows * lda + 5, sb = b_rows * ldb + 2, sc = c.M * ldc + 1;
  Rng rng(static_cast<uint64_t>(c.M * 131 + c.N * 17 + c.K));
  auto draw = [&](int64_t n) {
    const std::vector<double> x = rng.normal<double>({n}).to_vector();
    return std::vector<T>(x.begin(), x.end());
  };
  const std::vector<T> A = draw(c.batch * sa), B = draw(c.batch * sb), C0 = draw(c.batch * sc);
  const T alpha = T(0.7), beta = T(0.3);

  // The reference sees the operands as the product does: bf16-rounded in bf16 mode.
  auto operand = [&](const std::vector<T>& x) {
    std::vector<double> d(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      d[i] = precision == kernels::Precision::bf16 ? double(__bfloat162float(__float2bfloat16_rn(float(x[i]))))
                                                   : double(x[i]);
    return d;
  };
  const std::vector<double> Ad = operand(A), Bd = operand(B), Aexact(A.begin(), A.end()), Bexact(B.begin(), B.end());
  std::vector<double> want(C0.begin(), C0.end()), want_fp32(C0.begin(), C0.end());
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0, s32 = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          s += at(Ad, b * sa, lda, c.ta, i, k) * at(Bd, b * sb, ldb, c.tb, k, j);
          s32 += at(Aexact, b * sa, lda, c.ta, i, k) * at(Bexact, b * sb, ldb, c.tb, k, j);
        }
        double& w = want[b * sc + i * ldc + j];
        w = double(alpha) * s + double(beta) * w;
        double& w32 = want_fp32[b * sc + i * ldc + j];
        w32 = double(alpha) * s32 + double(beta) * w32;
      }

  auto dA = sinklab_test::on_device(A), dB = sinklab_test::on_device(B), dC = sinklab_test::on_device(C0);
  kernels::cuda::host::gemm_batched(c.ta, c.tb, c.batch, c.M, c.N, c.K, alpha, dA.data(), lda, sa, dB.data(), ldb, sb, beta,
                             dC.data(), ldc, sc, precision);
  kernels::cuda::host::check(cudaDeviceSynchronize(), "gemm_batched");
  const std::vector<T> got = dC.to_vector();
  INFO("batch ", c.batch, " M ", c.M, " N ", c.N, " K ", c.K, " ta ", c.ta == Trans::T, " tb ", c.tb == Trans::T, " ",
       kernels::precision_name(precision));
  CHECK(sinklab_test::max_rel_diff(got, want) <= tol);
  if (precision == kernels::Precision::bf16 && c.K >= 64)  // bf16 rounding shows in a long sum
    CHECK(sinklab_test::max_rel_diff(got, want_fp32) > 1e-4);
}

const std::vector<Case> cases() {
  std::vector<Case> out;
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 5, 1}, {33, 17, 65}, {128, 96, 200}, {5, 300, 7}})
        for (int64_t batch : {1, 3}) out.push_back({batch, M, N, K, ta, tb});
  return out;
}

}  // namespace

TEST_CASE("cuda: cuBLAS GEMM with the row-major interface equals loops in double (float, double)") {
  for (const Case& c : cases()) {
    check<double>(c, kernels::Precision::fp32, 1e-13);
    check<float>(c, kernels::Precision::fp32, 2e-5);
  }
}

TEST_CASE("cuda: cuBLAS GEMM in bf16 mode rounds the operands to bf16 and sums in float32") {
  for (const Case& c : cases()) check<float>(c, kernels::Precision::bf16, 2e-5);
}

TEST_CASE("cuda: GEMM arguments out of range are refused with their values") {
  float x = 0;
  CHECK_THROWS_WITH_AS(kernels::cuda::host::gemm(Trans::N, Trans::N, 4, 4, 4, 1.f, &x, 2, &x, 4, 0.f, &x, 4), doctest::Contains("lda 2"),
                       std::exception);
}
