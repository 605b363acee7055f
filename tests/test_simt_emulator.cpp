// The SIMT emulator (kernels/simt.hpp) behaves like a CUDA block — every index once, barriers
// that order shared-memory writes and reads, the warp butterfly in the device's order — and the
// CUDA backend's kernel bodies run on it against the CPU backend: RMSNorm and its pre-affine
// form, forward and backward (kernels/cuda/rms_norm.hpp; tests/cuda/test_cuda_norm.cu runs the
// same bodies on a GPU), memory<cuda>'s strided copies, and the bf16 GEMM's operand conversion.
#include <doctest/doctest.h>

#include "max_rel_diff.hpp"

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/norm.hpp"
#include "sinklab/kernels/cuda/convert.hpp"
#include "sinklab/kernels/cuda/rms_norm.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"

using namespace sinklab;

namespace {

// The xor butterfly of one warp, as the device runs it: lane l adds lane l ^ offset's value.
template <class T>
std::vector<T> butterfly(std::vector<T> v) {
  for (int offset = simt::kWarp / 2; offset > 0; offset /= 2) {
    const std::vector<T> before = v;
    for (int l = 0; l < simt::kWarp; ++l) v[l] = before[l] + before[l ^ offset];
  }
  return v;
}


}  // namespace

TEST_CASE("simt::emulate runs every thread of every block once, with its indices") {
  std::mutex m;
  std::set<std::pair<int64_t, int64_t>> seen;
  std::atomic<int> wrong{0};
  simt::emulate(3, 64, 0, [&](simt::Emulated& ctx) {
    if (ctx.threads() != 64 || ctx.blocks() != 3 || ctx.lane() != ctx.thread() % 32) ++wrong;
    const std::lock_guard<std::mutex> lock(m);
    seen.insert({ctx.block(), ctx.thread()});
  });
  CHECK(seen.size() == 3 * 64);
  CHECK(wrong == 0);
  CHECK_THROWS_WITH_AS(simt::emulate(1, 48, 0, [](simt::Emulated&) {}), doctest::Contains("whole warps of 32"), Error);
}

TEST_CASE("simt: sync() orders shared-memory writes before reads; warp and block sums in the device's order") {
  const int64_t threads = 128;
  std::vector<double> reversed(threads), warp(threads), block(threads);
  simt::emulate(1, threads, threads * sizeof(double), [&](simt::Emulated& ctx) {
    double* sh = ctx.shared<double>();
    const int64_t t = ctx.thread();
    sh[t] = static_cast<double>(t);
    ctx.sync();
    reversed[t] = sh[threads - 1 - t];
    ctx.sync();
    const double v = 1.0 / (1.0 + static_cast<double>(t)) + 1e6 * static_cast<double>(t % 3);
    warp[t] = ctx.warp_sum(v);
    block[t] = simt::block_sum(ctx, v, sh);
  });
  double want_block = 0;
  for (int64_t w = 0; w < threads / 32; ++w) {
    std::vector<double> lanes(32);
    for (int l = 0; l < 32; ++l) {
      const int64_t t = w * 32 + l;
      lanes[l] = 1.0 / (1.0 + static_cast<double>(t)) + 1e6 * static_cast<double>(t % 3);
    }
    const std::vector<double> want = butterfly(lanes);
    for (int l = 0; l < 32; ++l) CHECK(warp[w * 32 + l] == want[l]);  // bit for bit, lane by lane
    want_block += want[0];
  }
  for (int64_t t = 0; t < threads; ++t) {
    CHECK(reversed[t] == static_cast<double>(threads - 1 - t));
    CHECK(block[t] == want_block);
  }
}

template <class T>
void check_rms(bool with_pre, double tol) {
  const int64_t rows = 5, n = 70, threads = 64, grid = 2;  // n not a multiple of the block; rows > grid
  Rng rng(3);
  const auto x = rng.normal<double>({rows, n}).to<T>(), gy = rng.normal<double>({rows, n}).to<T>();
  const auto gain = rng.normal<double>({n}, 1.0, 0.3).to<T>(), pre = rng.normal<double>({n}, 1.0, 0.3).to<T>();
  const T* p = with_pre ? pre.data() : nullptr;
  const T eps = T(1e-6);

  std::vector<T> y_cpu(rows * n), rstd_cpu(rows), gx_cpu(rows * n), ggain_cpu(n, T(0)), gpre_cpu(n, T(0));
  kernels::cpu::rms_forward(x.data(), p, gain.data(), y_cpu.data(), rstd_cpu.data(), rows, n, eps);
  kernels::cpu::rms_backward(x.data(), p, gain.data(), rstd_cpu.data(), gy.data(), gx_cpu.data(), static_cast<const T*>(nullptr),
                             ggain_cpu.data(), with_pre ? gpre_cpu.data() : nullptr, rows, n);

  std::vector<T> y(rows * n), rstd(rows), gx(rows * n), k(rows), ggain(n, T(0)), gpre(n, T(0));
  const std::size_t shared = kernels::cuda::rms_shared_bytes<T>(threads);
  simt::emulate(grid, threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::rms_forward(ctx, x.data(), p, gain.data(), y.data(), rstd.data(), rows, n, eps);
  });
  simt::emulate(grid, threads, shared, [&](simt::Emulated& ctx) {
    kernels::cuda::rms_backward_input(ctx, x.data(), p, gain.data(), rstd.data(), gy.data(), gx.data(),
                                      static_cast<const T*>(nullptr), k.data(), rows, n);
  });
  simt::emulate(1, 32, 0, [&](simt::Emulated& ctx) {  // fewer threads than columns: the grid-stride loop
    kernels::cuda::rms_backward_params(ctx, x.data(), p, gain.data(), rstd.data(), k.data(), gy.data(), ggain.data(),
                                       with_pre ? gpre.data() : nullptr, rows, n);
  });
  CHECK(sinklab_test::max_rel_diff(y, y_cpu) <= tol);
  CHECK(sinklab_test::max_rel_diff(rstd, rstd_cpu) <= tol);
  CHECK(sinklab_test::max_rel_diff(gx, gx_cpu) <= tol);
  CHECK(sinklab_test::max_rel_diff(ggain, ggain_cpu) <= tol);
  if (with_pre) CHECK(sinklab_test::max_rel_diff(gpre, gpre_cpu) <= tol);
}

TEST_CASE("CUDA RMSNorm kernels on the emulator equal the CPU backend (forward, input and parameter gradients)") {
  SUBCASE("double, plain") { check_rms<double>(false, 1e-13); }
  SUBCASE("double, pre-affine") { check_rms<double>(true, 1e-13); }
  SUBCASE("float, plain") { check_rms<float>(false, 2e-6); }
  SUBCASE("float, pre-affine") { check_rms<float>(true, 2e-6); }
}

TEST_CASE("memory<cuda>'s fill, gather and scatter kernels on the emulator equal the host's (transposes, slices)") {
  using View = Tensor<double> (*)(const Tensor<double>&);
  const View views[] = {[](const Tensor<double>& t) { return t.transpose(0, 2); },
                        [](const Tensor<double>& t) { return t.slice(1, 1, 4); },
                        [](const Tensor<double>& t) { return t.transpose(1, 2).slice(0, 1, 3); }};
  for (View make : views) {
    const Tensor<double> base = Tensor<double>::arange({3, 5, 7});
    const Tensor<double> view = make(base);
    INFO("view of shape ", view.shape());
    REQUIRE_FALSE(view.is_contiguous());
    const auto layout = kernels::cuda::StridedLayout::of(view.shape().begin(), view.strides().data(), view.rank());
    std::vector<double> dense(static_cast<std::size_t>(view.numel()), -1.0);
    simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::gather(ctx, dense.data(), view.data(), layout); });
    CHECK(dense == view.to_vector());  // the host gathers in the same row-major order

    std::vector<double> src(dense.size());
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = 100.0 + static_cast<double>(i);
    Tensor<double> device_side = Tensor<double>::zeros({3, 5, 7}), host_side = Tensor<double>::zeros({3, 5, 7});
    Tensor<double> target = make(device_side);
    simt::emulate(1, 64, 0, [&](simt::Emulated& ctx) { kernels::cuda::scatter(ctx, target.data(), src.data(), layout); });
    make(host_side).copy_from(Tensor<double>::from(view.shape(), src));  // memory<cpu>::scatter
    CHECK(device_side.to_vector() == host_side.to_vector());
  }
  std::vector<float> filled(1000, 0.f);
  simt::emulate(3, 32, 0, [&](simt::Emulated& ctx) { kernels::cuda::fill(ctx, filled.data(), int64_t{1000}, 2.5f); });
  CHECK(filled == std::vector<float>(1000, 2.5f));
}

TEST_CASE("the bf16 GEMM's operand conversion on the emulator: strided batches made dense, rounded as the CPU rounds") {
  const int64_t batch = 3, rows = 5, cols = 7, ld = 9, stride = rows * ld + 4;
  Rng rng(17);
  const std::vector<float> src = rng.normal<float>({batch * stride}, 0.f, 3.f).to_vector();
  std::vector<uint16_t> dense(static_cast<std::size_t>(batch * rows * cols), 0xdead);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::to_bf16_dense(ctx, src.data(), batch, rows, cols, ld, stride, dense.data());
  });
  int64_t wrong = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        wrong += dense[(b * rows + r) * cols + c] != to_bf16(src[b * stride + r * ld + c]);
  CHECK(wrong == 0);

  // A dense source (rows ld = cols apart, matrices rows·cols apart) takes the indexed path, with
  // the same codes.
  std::vector<uint16_t> again(src.size(), 0xdead);
  const int64_t matrices = static_cast<int64_t>(src.size()) / (rows * cols);
  simt::emulate(2, 32, 0, [&](simt::Emulated& ctx) {
    kernels::cuda::to_bf16_dense(ctx, src.data(), matrices, rows, cols, cols, rows * cols, again.data());
  });
  int64_t wrong_dense = 0;
  for (int64_t x = 0; x < matrices * rows * cols; ++x) wrong_dense += again[x] != to_bf16(src[x]);
  CHECK(wrong_dense == 0);
}
