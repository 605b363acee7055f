// Attention kernels: forward+backward time of every score policy relative to plain softmax in
// the same run, fused vs materialised, at d_head 64 and T ∈ {128, 512, 2048} (causal, float);
// bytes allocated by each path vs T; and the block inner product as a small GEMM vs an xsimd
// dot loop. Usage: attention [--quick] [--threads N]
#include "bench_common.hpp"
#include "sinklab/kernels/cpu/attention.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"

using namespace sinklab;
using namespace sinklab::kernels::cpu;
using Clock = std::chrono::steady_clock;

namespace {

template <class F>
double median_seconds(F&& f, double budget) {
  std::vector<double> t;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while (t.size() < 3 || (std::chrono::duration<double>(Clock::now() - start).count() < budget && t.size() < 50));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Inputs {
  Tensor<float> q, k, v, dout;
};

Inputs make_inputs(int64_t B, int64_t H, int64_t T, int64_t d) {
  Rng rng(7);
  return {rng.normal<float>({B, H, T, d}, 0.f, 1.f), rng.normal<float>({B, H, T, d}, 0.f, 1.f),
          rng.normal<float>({B, H, T, d}, 0.f, 1.f), rng.normal<float>({B, H, T, d}, 0.f, 1.f)};
}

template <class Score>
void fwd_bwd(const Score& score, const Inputs& x, bool fused) {
  const auto params = score.template make_params<float>(x.q.size(1));
  const mask::Causal causal;
  if (fused) {
    auto f = attention_fused_forward(score, causal, x.q, x.k, x.v, params);
    auto g = attention_fused_backward(score, causal, x.q, x.k, x.v, params, f, x.dout);
  } else {
    auto f = attention_reference_forward(score, causal, x.q, x.k, x.v, params);
    auto g = attention_reference_backward(score, causal, x.q, x.k, x.v, params, x.dout);
  }
}

template <class Score>
int64_t peak_bytes(const Score& score, const Inputs& x, bool fused) {
  AttentionMemory::reset();
  fwd_bwd(score, x, fused);
  return AttentionMemory::peak_bytes();
}

double load_average() {
  double l[3] = {0, 0, 0};
  return getloadavg(l, 3) > 0 ? l[0] : -1.0;
}

}  // namespace

static int bench_main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      set_num_threads(sinklab::bench::positive_int("--threads", argv[++i]));
    else
      throw std::invalid_argument(std::string("unknown flag '") + argv[i] + "'; usage: attention [--quick] [--threads N]");
  }
  const int64_t B = 1, H = 4, d = 64;
  const std::vector<int64_t> Ts = quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{128, 512, 2048};
  const double budget = quick ? 0.05 : 0.4;
  std::printf("attention fwd+bwd, causal, float, B=%lld H=%lld d_head=%lld, threads=%d, load average %.2f\n",
              (long long)B, (long long)H, (long long)d, num_threads(), load_average());

  struct Row {
    std::string name;
    std::vector<double> fused, mat;
  };
  std::vector<Row> rows;
  auto bench_score = [&](const char* name, const auto& score) {
    Row r{name, {}, {}};
    for (int64_t T : Ts) {
      const Inputs x = make_inputs(B, H, T, d);
      r.fused.push_back(median_seconds([&] { fwd_bwd(score, x, true); }, budget));
      r.mat.push_back(median_seconds([&] { fwd_bwd(score, x, false); }, budget));
    }
    rows.push_back(r);
  };
  bench_score("softmax", score::Softmax{});
  bench_score("softmax + sink", score::SoftmaxSink{});
  bench_score("clipped softmax", score::ClippedSoftmax{});
  bench_score("sigmoid (b = -log n)", score::Sigmoid{});
  bench_score("relu / n", score::ReLU{});
  bench_score("n^-1 relu^2", score::Pointwise<score::fn::ReLU2>{});
  bench_score("n^-1 gelu", score::Pointwise<score::fn::GELU>{});
  bench_score("n^-1 softplus", score::Pointwise<score::fn::Softplus>{});
  bench_score("n^-1 identity", score::Pointwise<score::fn::Identity>{});
  bench_score("polynomial s^3/sqrt n", score::Polynomial{});

  std::printf("\n| score | T | fused ms | fused / softmax fused | materialised ms | materialised / fused |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (std::size_t t = 0; t < Ts.size(); ++t)
    for (const Row& r : rows)
      std::printf("| %s | %lld | %.2f | %.2f | %.2f | %.2f |\n", r.name.c_str(), (long long)Ts[t], 1e3 * r.fused[t],
                  r.fused[t] / rows[0].fused[t], 1e3 * r.mat[t], r.mat[t] / r.fused[t]);

  std::printf("\nbytes allocated by one fwd+bwd (outputs + peak scratch), softmax\n");
  std::printf(
      "| T | fused MiB | fused bytes / T | materialised MiB | materialised bytes / T |\n|---:|---:|---:|---:|---:|\n");
  for (int64_t T : Ts) {
    const Inputs x = make_inputs(B, H, T, d);
    const int64_t f = peak_bytes(score::Softmax{}, x, true), m = peak_bytes(score::Softmax{}, x, false);
    std::printf("| %lld | %.2f | %lld | %.2f | %lld |\n", (long long)T, f / 1048576.0, (long long)(f / T),
                m / 1048576.0, (long long)(m / T));
  }

  // The inner product of a 64×64 block pair with d = 64: one small GEMM vs 4096 xsimd dots.
  // Single-threaded, as inside the kernels (their GEMMs run within a parallel region).
  {
    const int threads = num_threads();
    set_num_threads(1);
    const int64_t n = 64;
    Rng rng(3);
    auto a = rng.normal<float>({n, d}, 0.f, 1.f), b = rng.normal<float>({n, d}, 0.f, 1.f);
    std::vector<float> c(n * n);
    const int reps = quick ? 200 : 4000;
    const double tg = median_seconds(
        [&] {
          for (int r = 0; r < reps; ++r)
            gemm(Trans::N, Trans::T, n, n, d, 1.f, a.data(), d, b.data(), d, 0.f, c.data(), n);
        },
        budget);
    const double tl = median_seconds(
        [&] {
          for (int r = 0; r < reps; ++r)
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j)
                c[i * n + j] = simd::dot(a.data() + i * d, b.data() + j * d, d);
        },
        budget);
    std::printf("\nblock logits 64x64x64: GEMM %.2f us, xsimd dot loop %.2f us (loop / GEMM = %.2f)\n", 1e6 * tg / reps,
                1e6 * tl / reps, tl / tg);
    set_num_threads(threads);
  }
  std::printf("load average at the end %.2f\n", load_average());
  return 0;
}

int main(int argc, char** argv) {
  return sinklab::bench::guarded_main("attention", [&] { return bench_main(argc, argv); });
}
