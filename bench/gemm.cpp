// fp32 GEMM throughput of sinklab's kernels::cpu::gemm (Eigen) next to OpenBLAS's cblas_sgemm,
// both on the same thread count in the same run, each also as a fraction of the machine's FMA
// peak measured here. C = A·B with square row-major N×N matrices.
//
//   gemm [--threads 2] [--trials 7] [--min-time 0.2] [--sizes 128,256,512,1024,2048]
//
// OpenBLAS 0.3.21 misdetects this CPU (Sapphire Rapids) and must be told its core type through
// OPENBLAS_CORETYPE before the library loads, so without it the program re-executes itself
// with OPENBLAS_CORETYPE=SkylakeX.
#include <cblas.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"

using namespace sinklab;

namespace {

struct Args {
  int threads = 2;
  int trials = 7;
  double min_time = 0.2;
  std::vector<int64_t> sizes{128, 256, 512, 1024, 2048};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--threads" && has_value) a.threads = std::atoi(argv[++i]);
    else if (k == "--trials" && has_value) a.trials = std::atoi(argv[++i]);
    else if (k == "--min-time" && has_value) a.min_time = std::atof(argv[++i]);
    else if (k == "--sizes" && has_value) {
      a.sizes.clear();
      std::string s = argv[++i];
      for (std::size_t p = 0; p < s.size();) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        a.sizes.push_back(std::stoll(s.substr(p, q - p)));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--trials N] [--min-time S] [--sizes a,b,c]\n", argv[0]);
      std::exit(2);
    }
  }
  if (a.threads < 1 || a.trials < 1 || a.sizes.empty()) {
    std::fprintf(stderr, "gemm: threads and trials must be >= 1 and sizes non-empty\n");
    std::exit(2);
  }
  return a;
}

// Both libraries keep their worker threads spinning after a call (OpenBLAS for about 2^28
// cycles, ~0.1 s); a pause when switching library keeps one's spinning threads from stealing
// the cores of the other, whose threads wait on each other and slow down badly on 2 cores.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    execv("/proc/self/exe", argv);
    std::perror("gemm: re-executing with OPENBLAS_CORETYPE=SkylakeX failed; OpenBLAS may misdetect the CPU");
  }
  const Args args = parse(argc, argv);
  set_num_threads(args.threads);
  openblas_set_num_threads(args.threads);

  std::printf("sinklab GEMM benchmark (fp32, C = A*B, row-major, %d threads)\n", args.threads);
  std::printf("OpenBLAS: %s, core %s, OPENBLAS_CORETYPE=%s\n", openblas_get_config(), openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE"));
#if defined(EIGEN_HAS_OPENMP)
  const char* eigen_parallel = "OpenMP";
#else
  const char* eigen_parallel = "none (EIGEN_HAS_OPENMP undefined)";
#endif
  std::printf("Eigen %d.%d.%d, SIMD: %s; GEMM threading: %s, Eigen::nbThreads() = %d\n", EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse(), eigen_parallel,
              Eigen::nbThreads());
  std::printf("load average at start: %s\n", bench::load_average().c_str());
  const double peak = bench::fma_peak_gflops(args.threads);
  std::printf("FMA peak (%d threads, %zu-lane xsimd FMA chains): %.1f GFLOP/s\n", args.threads,
              xsimd::batch<float>::size, peak);
  std::printf("each figure: %d interleaved trials of >= %.2f s; best and median GFLOP/s\n\n", args.trials,
              args.min_time);
  std::printf("%6s | %13s %13s %6s | %13s %13s %6s | %9s | %12s\n", "N", "sinklab best", "sinklab med", "%peak",
              "OpenBLAS best", "OpenBLAS med", "%peak", "sl/OB", "max rel diff");

  Rng rng(42);
  for (const int64_t n : args.sizes) {
    const Tensor<float> a = rng.uniform<float>({n, n}, -1.f, 1.f);
    const Tensor<float> b = rng.uniform<float>({n, n}, -1.f, 1.f);
    Tensor<float> c_sl = Tensor<float>::zeros({n, n});
    Tensor<float> c_ob = Tensor<float>::zeros({n, n});
    auto run_sinklab = [&] {
      kernels::cpu::gemm(kernels::cpu::Trans::N, kernels::cpu::Trans::N, n, n, n, 1.f, a.data(), n, b.data(), n,
                         0.f, c_sl.data(), n);
    };
    auto run_openblas = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                  static_cast<int>(n), 1.f, a.data(), static_cast<int>(n), b.data(), static_cast<int>(n), 0.f,
                  c_ob.data(), static_cast<int>(n));
    };

    // Correctness: sinklab against OpenBLAS, relative to the largest entry of the result.
    run_sinklab();
    run_openblas();
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < n * n; ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(c_sl.data()[i] - c_ob.data()[i])));
      max_ref = std::max(max_ref, static_cast<double>(std::abs(c_ob.data()[i])));
    }

    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    std::vector<double> sl, ob;
    for (int t = 0; t < args.trials; ++t) {
      settle();
      sl.push_back(bench::calls_per_second(run_sinklab, args.min_time) * flops * 1e-9);
      settle();
      ob.push_back(bench::calls_per_second(run_openblas, args.min_time) * flops * 1e-9);
    }
    const double sl_best = bench::best_of(sl), ob_best = bench::best_of(ob);
    std::printf("%6lld | %13.1f %13.1f %5.1f%% | %13.1f %13.1f %5.1f%% | %8.1f%% | %12.2e\n", static_cast<long long>(n),
                sl_best, bench::median_of(sl), 100 * sl_best / peak, ob_best, bench::median_of(ob),
                100 * ob_best / peak, 100 * sl_best / ob_best, max_diff / max_ref);
    std::fflush(stdout);
  }
  std::printf("\nsl/OB: best sinklab over best OpenBLAS. %%peak: best over the FMA peak.\n");
  std::printf("load average at end: %s\n", bench::load_average().c_str());
  return 0;
}
