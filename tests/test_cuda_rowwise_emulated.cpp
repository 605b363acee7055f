// The CUDA backend's row-wise and normalisation kernel bodies (kernels/cuda/rowwise.hpp, norm.hpp)
// on the SIMT emulator against the CPU backend (kernels/cpu/rowwise.hpp, norm.hpp): softmax and
// log-softmax forward and (accumulating) backward; cross-entropy count, loss, lse and gradient
// with ignored targets (the total through reduce.hpp's sum_partials, as the launcher sums it);
// LayerNorm and DyT forward and backward with null and accumulated outputs. Rows shorter and
// longer than the block and not whole warps, more rows than blocks, more columns than the
// column kernels' threads, and rows offset by ±1000 (softmax stability).
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/norm.hpp"
#include "sinklab/kernels/cpu/rowwise.hpp"
#include "sinklab/kernels/cuda/norm.hpp"
#include "sinklab/kernels/cuda/reduce.hpp"
#include "sinklab/kernels/cuda/rowwise.hpp"
#include "sinklab/kernels/simt.hpp"

using namespace sinklab;

namespace {

// max_rel_diff, and infinitely far where a NaN on one side is not matched on the other
// (max_rel_diff alone passes over NaNs).
template <class T>
double rel(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::isnan(got[i]) != std::isnan(want[i])) return std::numeric_limits<double>::infinity();
  return sinklab_test::max_rel_diff(got, want);
}

template <class T>
std::vector<T> normal(Rng& rng, int64_t count, double mean = 0.0, double sd = 1.0) {
  return rng.normal<double>({count}, mean, sd).to<T>().to_vector();
}

// A launch on the emulator: `grid` blocks of `threads`, and each row of n elements.
struct Launch {
  int64_t rows, n, threads, grid;
};
// n < threads, n > threads (neither whole warps), exactly one warp, a single column, more rows
// than blocks throughout.
const Launch kLaunches[] = {{5, 7, 32, 2}, {4, 70, 32, 3}, {3, 100, 64, 2}, {3, 32, 32, 2}, {3, 1, 32, 2}};

// x [rows, n] ~ N(0, 3²), every other row shifted by +1000 or −1000, and in row 0 one element
// 60 above the rest (one term dominates the row's sum).
template <class T>
std::vector<T> logits(Rng& rng, int64_t rows, int64_t n) {
  std::vector<T> x = normal<T>(rng, rows * n, 0.0, 3.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += T(r % 3 == 1 ? 1000 : r % 3 == 2 ? -1000 : 0);
  x[n / 2] += T(60);
  return x;
}

template <class T>
void check_softmax(const Launch& s, double tol) {
  INFO("rows ", s.rows, ", n ", s.n, ", ", s.grid, " blocks of ", s.threads);
  Rng rng(11);
  const int64_t rows = s.rows, n = s.n, size = rows * n;
  const std::size_t shared = kernels::cuda::row_shared_bytes<T>(s.threads);
  const std::vector<T> x = logits<T>(rng, rows, n), gy = normal<T>(rng, size), prior = normal<T>(rng, size);

  std::vector<T> y_cpu(size), ly_cpu(size), y(size, T(-7)), ly(size, T(-7));
  kernels::cpu::softmax_rows(x.data(), y_cpu.data(), rows, n);
  kernels::cpu::log_softmax_rows(x.data(), ly_cpu.data(), rows, n);
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::softmax_rows(ctx, x.data(), y.data(), rows, n);
  });
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::log_softmax_rows(ctx, x.data(), ly.data(), rows, n);
  });
  CHECK(rel(y, y_cpu) <= tol);
  CHECK(rel(ly, ly_cpu) <= tol);
  for (int64_t r = 0; r < rows; ++r) {  // each row a distribution, whatever its offset
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += static_cast<double>(y[r * n + i]);
    CHECK(std::abs(total - 1.0) <= 10 * tol);
  }

  // In place (y = x), as the CPU allows.
  std::vector<T> inplace = x;
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::softmax_rows(ctx, inplace.data(), inplace.data(), rows, n);
  });
  CHECK(rel(inplace, y_cpu) <= tol);

  // Backward passes accumulate into a gradient that already holds something.
  std::vector<T> gx_cpu = prior, lgx_cpu = prior, gx = prior, lgx = prior;
  kernels::cpu::softmax_rows_backward(y_cpu.data(), gy.data(), gx_cpu.data(), rows, n);
  kernels::cpu::log_softmax_rows_backward(ly_cpu.data(), gy.data(), lgx_cpu.data(), rows, n);
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::softmax_rows_backward(ctx, y_cpu.data(), gy.data(), gx.data(), rows, n);
  });
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::log_softmax_rows_backward(ctx, ly_cpu.data(), gy.data(), lgx.data(), rows, n);
  });
  CHECK(rel(gx, gx_cpu) <= tol);
  CHECK(rel(lgx, lgx_cpu) <= tol);
  if (n > 1) CHECK(rel(gx, prior) > 10 * tol);  // the gradient moved (a one-column row's is 0)
}

// Cross-entropy over N rows of V classes: targets in [0, V), every third row ignore_index
// (ignore_index may itself be a class).
template <class T>
void check_cross_entropy(int64_t N, int64_t V, int64_t threads, int64_t grid, int32_t ignore_index, double tol) {
  INFO("N ", N, ", V ", V, ", ", grid, " blocks of ", threads, ", ignore_index ", ignore_index);
  Rng rng(23);
  const std::vector<T> x = logits<T>(rng, N, V), prior = normal<T>(rng, N * V);
  std::vector<int32_t> targets(static_cast<std::size_t>(N));
  for (int64_t r = 0; r < N; ++r) {
    targets[r] = static_cast<int32_t>(rng.randint(0, V));
    if (targets[r] == ignore_index) targets[r] = static_cast<int32_t>((targets[r] + 1) % V);
    if (r % 3 == 2) targets[r] = ignore_index;
  }
  targets[0] = static_cast<int32_t>(V - 1);  // the last class, and (row 0) the dominant logit elsewhere
  const std::size_t shared = kernels::cuda::row_shared_bytes<T>(threads);

  const int64_t count_cpu = kernels::cpu::cross_entropy_count(targets.data(), N, V, ignore_index);
  int64_t out[2] = {-1, -1};
  simt::emulate(1, threads, kernels::cuda::row_shared_bytes<int64_t>(threads), [&](simt::Emulated& ctx) {
    kernels::cuda::cross_entropy_count(ctx, targets.data(), N, V, ignore_index, out);
  });
  CHECK(out[0] == count_cpu);
  CHECK(out[1] == N);  // no target outside [0, V)
  CHECK(count_cpu == N - N / 3);

  const T unset = T(7777);
  std::vector<T> lse_cpu(N, unset), lse(N, unset), row_loss(N, T(-1));
  const T total_cpu = kernels::cpu::cross_entropy_forward(x.data(), targets.data(), N, V, ignore_index, lse_cpu.data());
  T total = T(-1);
  simt::emulate(grid, threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::cross_entropy_rows(ctx, x.data(), targets.data(), N, V, ignore_index, lse.data(), row_loss.data());
  });
  simt::emulate(1, threads, shared, [&](simt::Emulated& ctx) {  // the launcher's total: sum_all, one block here
    kernels::cuda::sum_partials(ctx, row_loss.data(), N, &total);
  });
  CHECK(rel(lse, lse_cpu) <= tol);  // ignored rows still `unset` on both sides
  for (int64_t r = 0; r < N; ++r)
    if (targets[r] == ignore_index) {
      CHECK(lse[r] == unset);
      CHECK(row_loss[r] == T(0));
    }
  CHECK(std::isfinite(total));
  CHECK(std::abs(static_cast<double>(total) - static_cast<double>(total_cpu)) <=
        tol * std::abs(static_cast<double>(total_cpu)));

  const T scale = T(0.37);
  std::vector<T> gx_cpu = prior, gx = prior;
  kernels::cpu::cross_entropy_backward(x.data(), targets.data(), lse_cpu.data(), N, V, ignore_index, scale,
                                       gx_cpu.data());
  simt::emulate(grid, threads, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::cross_entropy_backward(ctx, x.data(), targets.data(), lse_cpu.data(), N, V, ignore_index, scale,
                                          gx.data());
  });
  CHECK(rel(gx, gx_cpu) <= tol);
  for (int64_t r = 0; r < N; ++r)
    if (targets[r] == ignore_index)
      for (int64_t i = 0; i < V; ++i) CHECK(gx[r * V + i] == prior[r * V + i]);
}

template <class T>
void check_layer_norm(const Launch& s, double tol) {
  INFO("rows ", s.rows, ", n ", s.n, ", ", s.grid, " blocks of ", s.threads);
  Rng rng(5);
  const int64_t rows = s.rows, n = s.n, size = rows * n;
  const std::vector<T> x = normal<T>(rng, size, 3.0, 2.0), gy = normal<T>(rng, size);
  const std::vector<T> gain = normal<T>(rng, n, 1.0, 0.3), bias = normal<T>(rng, n, 0.0, 0.5);
  const std::vector<T> ggain0 = normal<T>(rng, n), gbias0 = normal<T>(rng, n);
  const T eps = T(1e-5);
  const std::size_t shared = kernels::cuda::rms_shared_bytes<T>(s.threads);

  std::vector<T> y_cpu(size), mean_cpu(rows), rstd_cpu(rows), y(size), mean(rows), rstd(rows);
  kernels::cpu::layer_norm_forward(x.data(), gain.data(), bias.data(), y_cpu.data(), mean_cpu.data(), rstd_cpu.data(),
                                   rows, n, eps);
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::layer_norm_forward(ctx, x.data(), gain.data(), bias.data(), y.data(), mean.data(), rstd.data(), rows,
                                      n, eps);
  });
  CHECK(rel(y, y_cpu) <= tol);
  CHECK(rel(mean, mean_cpu) <= tol);
  CHECK(rel(rstd, rstd_cpu) <= tol);

  // gx overwritten (its old contents differ on the two sides), ggain and gbias accumulated.
  std::vector<T> gx_cpu(size, T(5)), ggain_cpu = ggain0, gbias_cpu = gbias0;
  kernels::cpu::layer_norm_backward(x.data(), gain.data(), mean_cpu.data(), rstd_cpu.data(), gy.data(), gx_cpu.data(),
                                    ggain_cpu.data(), gbias_cpu.data(), rows, n);
  std::vector<T> gx(size, T(-9)), ggain = ggain0, gbias = gbias0;
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::layer_norm_backward_input(ctx, x.data(), gain.data(), mean_cpu.data(), rstd_cpu.data(), gy.data(),
                                             gx.data(), rows, n);
  });
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {  // 64 threads: fewer than n = 70 or 100 columns, more than 7
    kernels::cuda::layer_norm_backward_params(ctx, x.data(), mean_cpu.data(), rstd_cpu.data(), gy.data(), ggain.data(),
                                              gbias.data(), rows, n);
  });
  CHECK(rel(gx, gx_cpu) <= tol);
  CHECK(rel(ggain, ggain_cpu) <= tol);
  CHECK(rel(gbias, gbias_cpu) <= tol);

  // One parameter gradient only: the other stays null.
  std::vector<T> gbias_only = gbias0;
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::layer_norm_backward_params(ctx, x.data(), mean_cpu.data(), rstd_cpu.data(), gy.data(),
                                              static_cast<T*>(nullptr), gbias_only.data(), rows, n);
  });
  CHECK(rel(gbias_only, gbias_cpu) <= tol);
}

template <class T>
void check_dyt(const Launch& s, double tol) {
  INFO("rows ", s.rows, ", n ", s.n, ", ", s.grid, " blocks of ", s.threads);
  Rng rng(8);
  const int64_t rows = s.rows, n = s.n, size = rows * n;
  const std::vector<T> x = normal<T>(rng, size, 0.0, 2.0), gy = normal<T>(rng, size);
  const std::vector<T> gamma = normal<T>(rng, n, 1.0, 0.3), beta = normal<T>(rng, n, 0.0, 0.5);
  const std::vector<T> ggamma0 = normal<T>(rng, n), gbeta0 = normal<T>(rng, n);
  const T alpha = T(0.7), galpha0 = T(0.25);
  const std::size_t shared = kernels::cuda::rms_shared_bytes<T>(s.threads);

  std::vector<T> y_cpu(size), y(size, T(-3));
  kernels::cpu::dyt_forward(x.data(), alpha, gamma.data(), beta.data(), y_cpu.data(), rows, n);
  simt::emulate(s.grid, s.threads, 0, [&](simt::Emulated& ctx) {  // elementwise: grid-stride over rows·n
    kernels::cuda::dyt_forward(ctx, x.data(), alpha, gamma.data(), beta.data(), y.data(), rows, n);
  });
  CHECK(rel(y, y_cpu) <= tol);

  std::vector<T> gx_cpu(size, T(5)), ggamma_cpu = ggamma0, gbeta_cpu = gbeta0;
  T galpha_cpu = galpha0;
  kernels::cpu::dyt_backward(x.data(), alpha, gamma.data(), gy.data(), gx_cpu.data(), &galpha_cpu, ggamma_cpu.data(),
                             gbeta_cpu.data(), rows, n);
  std::vector<T> gx(size, T(-9)), row_alpha(rows, T(0)), ggamma = ggamma0, gbeta = gbeta0;
  T galpha = galpha0;
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_input(ctx, x.data(), alpha, gamma.data(), gy.data(), gx.data(), row_alpha.data(), rows,
                                      n);
  });
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_params(ctx, x.data(), alpha, gy.data(), row_alpha.data(), &galpha, ggamma.data(),
                                       gbeta.data(), rows, n);
  });
  CHECK(rel(gx, gx_cpu) <= tol);
  CHECK(rel(ggamma, ggamma_cpu) <= tol);
  CHECK(rel(gbeta, gbeta_cpu) <= tol);
  CHECK(rel(std::vector<T>{galpha}, std::vector<T>{galpha_cpu}) <= tol);
  CHECK(galpha != galpha0);

  // gx null with α's gradient: the partials alone; and α's gradient alone (n = 1: the column
  // kernel's extra thread past the last column).
  std::vector<T> row_alpha_only(rows, T(0));
  T galpha_only = galpha0;
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_input(ctx, x.data(), alpha, gamma.data(), gy.data(), static_cast<T*>(nullptr),
                                      row_alpha_only.data(), rows, n);
  });
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_params(ctx, x.data(), alpha, gy.data(), row_alpha_only.data(), &galpha_only,
                                       static_cast<T*>(nullptr), static_cast<T*>(nullptr), rows, n);
  });
  CHECK(galpha_only == galpha);  // the same sums in the same order
  // gx alone (no partials) and the column sums without α.
  std::vector<T> gx_only(size, T(-9)), gbeta_only = gbeta0;
  simt::emulate(s.grid, s.threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_input(ctx, x.data(), alpha, gamma.data(), gy.data(), gx_only.data(),
                                      static_cast<T*>(nullptr), rows, n);
  });
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::dyt_backward_params(ctx, x.data(), alpha, gy.data(), static_cast<const T*>(nullptr),
                                       static_cast<T*>(nullptr), static_cast<T*>(nullptr), gbeta_only.data(), rows, n);
  });
  CHECK(gx_only == gx);
  CHECK(gbeta_only == gbeta);
}

}  // namespace

TEST_CASE("block_fold: the max and min over blocks of 1-3 warps, 96 threads included (not a power of two)") {
  for (const int64_t threads : {32, 64, 96}) {
    std::vector<double> mx(threads), mn(threads);
    simt::emulate(1, threads, kernels::cuda::row_shared_bytes<double>(threads), [&](simt::Emulated& ctx) {
      const int64_t t = ctx.thread();
      const double v = std::sin(1.7 * static_cast<double>(t) + 0.3) * static_cast<double>(t + 1);
      double* scratch = ctx.shared<double>();
      mx[t] = kernels::cuda::block_max(ctx, v, scratch);
      mn[t] = kernels::cuda::block_fold(ctx, v, scratch, kernels::cuda::MinOp{});
    });
    double want_max = -1e300, want_min = 1e300;
    for (int64_t t = 0; t < threads; ++t) {
      const double v = std::sin(1.7 * static_cast<double>(t) + 0.3) * static_cast<double>(t + 1);
      want_max = std::max(want_max, v);
      want_min = std::min(want_min, v);
    }
    for (int64_t t = 0; t < threads; ++t) {
      CHECK(mx[t] == want_max);
      CHECK(mn[t] == want_min);
    }
  }
}

TEST_CASE("CUDA softmax and log-softmax on the emulator equal the CPU backend (forward, accumulating backward)") {
  for (const Launch& s : kLaunches) {
    check_softmax<double>(s, 1e-12);
    check_softmax<float>(s, 1e-5);
  }
}

TEST_CASE("CUDA cross-entropy on the emulator equals the CPU backend (count, lse, total, gradient; ignored rows)") {
  check_cross_entropy<double>(9, 37, 32, 2, -100, 1e-12);  // V > threads, more rows than blocks
  check_cross_entropy<double>(7, 20, 32, 3, 5, 1e-12);     // V < threads; ignore_index a class
  check_cross_entropy<double>(40, 70, 64, 4, -100, 1e-12); // more rows than the sum's threads
  check_cross_entropy<float>(9, 37, 32, 2, -100, 1e-5);
  check_cross_entropy<float>(7, 20, 32, 3, 5, 1e-5);
  check_cross_entropy<float>(40, 70, 64, 4, -100, 1e-5);
}

TEST_CASE("CUDA cross_entropy_count names the first row whose target is outside [0, V), as the CPU throws for") {
  const int64_t N = 100, V = 10;
  std::vector<int32_t> good(N);
  for (int64_t r = 0; r < N; ++r) good[r] = r % 7 == 0 ? -100 : static_cast<int32_t>(r % V);
  const auto first_bad = [&](const std::vector<int32_t>& targets) {
    int64_t out[2] = {-1, -1};
    simt::emulate(1, 32, kernels::cuda::row_shared_bytes<int64_t>(32), [&](simt::Emulated& ctx) {
      kernels::cuda::cross_entropy_count(ctx, targets.data(), N, V, -100, out);
    });
    return out[1];
  };
  std::vector<int32_t> three = good, at_v = good;
  three[97] = 10;  // each in another thread's stride
  three[40] = -1;
  three[71] = 12;
  at_v[63] = static_cast<int32_t>(V);  // just past the last class
  CHECK(first_bad(good) == N);
  CHECK(first_bad(three) == 40);
  CHECK(first_bad(at_v) == 63);
  CHECK_THROWS_WITH_AS(kernels::cpu::cross_entropy_count(three.data(), N, V, -100),
                       doctest::Contains("target -1 at row 40"), Error);
  CHECK_THROWS_WITH_AS(kernels::cpu::cross_entropy_count(at_v.data(), N, V, -100),
                       doctest::Contains("target 10 at row 63"), Error);
}

TEST_CASE("CUDA LayerNorm on the emulator equals the CPU backend (forward, gx written, ggain and gbias accumulated)") {
  for (const Launch& s : kLaunches) {
    check_layer_norm<double>(s, 1e-12);
    check_layer_norm<float>(s, 1e-5);
  }
}

TEST_CASE("CUDA DyT on the emulator equals the CPU backend (forward, gx, galpha, ggamma, gbeta; null outputs)") {
  for (const Launch& s : kLaunches) {
    check_dyt<double>(s, 1e-12);
    check_dyt<float>(s, 1e-5);
  }
}
