// Memory bandwidth of sinklab's elementwise kernels (y = a + b and y = exp(x), fp32) on arrays
// larger than the caches, next to a copy reference in the same run: std::memcpy with each
// thread copying its share, and a plain STREAM-style add loop on the same threads.
//
//   elementwise [--threads 2] [--trials 7] [--mib 64,256]
//
// GB/s counts the bytes an operation must move, STREAM-style: a + b reads 2 arrays and writes
// 1, exp and copy read 1 and write 1 (write-allocate traffic is not counted). "% copy" is
// the fraction of the copy reference; memcpy is the practical bandwidth ceiling here.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"

using namespace sinklab;
namespace kc = sinklab::kernels::cpu;

namespace {

struct Args {
  int threads = 2;
  int trials = 7;
  std::vector<int64_t> mib{64, 256};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--threads" && has_value) a.threads = sinklab::bench::positive_int("--threads", argv[++i]);
    else if (k == "--trials" && has_value) a.trials = sinklab::bench::positive_int("--trials", argv[++i]);
    else if (k == "--mib" && has_value) {
      a.mib.clear();
      std::string s = argv[++i];
      for (std::size_t p = 0; p < s.size();) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        a.mib.push_back(std::stoll(s.substr(p, q - p)));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--trials N] [--mib a,b]\n", argv[0]);
      std::exit(2);
    }
  }
  if (a.threads < 1 || a.trials < 1 || a.mib.empty()) {
    std::fprintf(stderr, "elementwise: threads and trials must be >= 1 and sizes non-empty\n");
    std::exit(2);
  }
  return a;
}

// Best and median GB/s of f over `trials` runs of at least 0.25 s each.
template <class F>
std::vector<double> gbps(F&& f, double bytes, int trials) {
  std::vector<double> r;
  f();  // warm-up: first-touch and thread start-up stay out of the timings
  for (int t = 0; t < trials; ++t) r.push_back(bench::calls_per_second(f, 0.25) * bytes * 1e-9);
  return r;
}

}  // namespace

static int bench_main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  set_num_threads(args.threads);
  std::printf("sinklab elementwise bandwidth benchmark (fp32, %d threads, SIMD %zu lanes)\n", args.threads,
              xsimd::batch<float>::size);
  std::printf("load average at start: %s\n", bench::load_average().c_str());
  std::printf("each figure: best (median) GB/s over %d runs of >= 0.25 s\n\n", args.trials);
  std::printf("%8s | %-38s | %18s | %7s | %s\n", "MiB/arr", "operation", "GB/s best (median)", "% copy", "check");

  Rng rng(1);
  for (const int64_t mib : args.mib) {
    const int64_t n = mib * (int64_t{1} << 20) / static_cast<int64_t>(sizeof(float));
    const Tensor<float> a = rng.uniform<float>({n}, -4.f, 4.f), b = rng.uniform<float>({n}, -1.f, 1.f);
    Tensor<float> y = Tensor<float>::zeros({n});
    const float* pa = a.data();
    const float* pb = b.data();
    float* py = y.data();
    const double bytes = static_cast<double>(n) * sizeof(float);

    auto copy = [&] {
      parallel_for(0, n, 1 << 16, [&](int64_t lo, int64_t hi) {
        std::memcpy(py + lo, pa + lo, static_cast<std::size_t>(hi - lo) * sizeof(float));
      });
    };
    auto stream_add = [&] {
      parallel_for(0, n, 1 << 16, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) py[i] = pa[i] + pb[i];
      });
    };
    auto sl_add = [&] { kc::binary(pa, pb, py, n, kc::fn::Add{}); };
    auto sl_exp = [&] { kc::unary<kc::fn::Exp>(pa, py, n); };

    const auto r_copy = gbps(copy, 2 * bytes, args.trials);
    const auto r_stream = gbps(stream_add, 3 * bytes, args.trials);
    const auto r_add = gbps(sl_add, 3 * bytes, args.trials);
    // Check a + b on a sample after the timed runs.
    double add_err = 0;
    for (int64_t i = 0; i < n; i += 4099) add_err = std::max(add_err, static_cast<double>(std::abs(py[i] - (pa[i] + pb[i]))));
    const auto r_exp = gbps(sl_exp, 2 * bytes, args.trials);
    double exp_err = 0;
    for (int64_t i = 0; i < n; i += 4099)
      exp_err = std::max(exp_err, std::abs(static_cast<double>(py[i]) - std::exp(static_cast<double>(pa[i]))) /
                                      std::exp(static_cast<double>(pa[i])));

    const double ceiling = bench::best_of(r_copy);
    auto row = [&](const char* name, const std::vector<double>& r, const std::string& check) {
      char cell[64];
      std::snprintf(cell, sizeof cell, "%.1f (%.1f)", bench::best_of(r), bench::median_of(r));
      std::printf("%8lld | %-38s | %18s | %6.1f%% | %s\n", static_cast<long long>(mib), name, cell,
                  100 * bench::best_of(r) / ceiling, check.c_str());
    };
    char c1[64], c2[64];
    std::snprintf(c1, sizeof c1, "max abs err %.1e", add_err);
    std::snprintf(c2, sizeof c2, "max rel err %.1e", exp_err);
    row("copy: memcpy (reference)", r_copy, "");
    row("add: plain loop (STREAM reference)", r_stream, "");
    row("add: sinklab kernels::cpu::binary", r_add, c1);
    row("exp: sinklab kernels::cpu::unary<Exp>", r_exp, c2);
    const double exp_best = bench::best_of(r_exp) / (2 * sizeof(float));
    std::printf("%8s | %-38s | %.2f Gelem/s\n", "", "exp throughput", exp_best);
    std::fflush(stdout);
  }
  std::printf("\nload average at end: %s\n", bench::load_average().c_str());
  return 0;
}

int main(int argc, char** argv) {
  return sinklab::bench::guarded_main("elementwise", [&] { return bench_main(argc, argv); });
}
