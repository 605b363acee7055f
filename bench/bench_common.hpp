// Shared pieces of the benchmarks: a wall clock, best/median of repeated trials, the machine's
// fp32 FMA peak measured with independent xsimd FMA chains, the load average (other jobs on the
// machine distort timings, so every benchmark prints it), and the OpenBLAS core type to force.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/xsimd.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace sinklab::bench {

inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Shell-quotes s for /bin/sh.
inline std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline double best_of(std::vector<double> v) { return *std::max_element(v.begin(), v.end()); }
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs f() repeatedly for at least min_seconds (and at least once); returns calls per second.
template <class F>
double calls_per_second(F&& f, double min_seconds) {
  int64_t calls = 0;
  const double t0 = now_seconds();
  double t = t0;
  do {
    f();
    ++calls;
    t = now_seconds();
  } while (t - t0 < min_seconds);
  return static_cast<double>(calls) / (t - t0);
}

// OpenBLAS 0.3.21 misdetects newer CPUs (Sapphire Rapids, for one) and must be told its core type
// through OPENBLAS_CORETYPE before the library loads: the widest kernel family this CPU can run —
// SkylakeX with AVX-512, Haswell with AVX2 and FMA (OpenBLAS's choice for Zen 2/3) — or nothing
// (OpenBLAS's own detection). Forcing SkylakeX on a CPU without AVX-512 stops on an illegal
// instruction.
inline const char* openblas_coretype() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl ? "SkylakeX" : f.avx2 && f.fma ? "Haswell" : nullptr;
}

inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

namespace detail {
// kChains independent accumulators hide the FMA latency (4 cycles × 2 ports needs ≥ 8).
constexpr int kChains = 16;

inline float fma_chains(int64_t iters, float seed) {
  using B = xsimd::batch<float>;
  B acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = B(seed + 0.01f * static_cast<float>(c));
  const B mul(0.9999999f), add(1e-7f);  // converges towards 1: no overflow, no denormals
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = xsimd::fma(acc[c], mul, add);
  }
  B s = acc[0];
  for (int c = 1; c < kChains; ++c) s += acc[c];
  return xsimd::hadd(s);
}
}  // namespace detail

// fp32 GFLOP/s of FMAs on `threads` threads (an FMA counts 2 flops per lane); best of `trials`.
inline double fma_peak_gflops(int threads, int trials = 5) {
#if !defined(_OPENMP)
  threads = 1;
#endif
  constexpr int64_t kIters = 20'000'000;
  const double flops = 2.0 * detail::kChains * static_cast<double>(xsimd::batch<float>::size) * kIters * threads;
  std::vector<double> rates;
  volatile float sink = 0;
  for (int t = 0; t < trials; ++t) {
    const double t0 = now_seconds();
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
    {
      const float r = detail::fma_chains(kIters, static_cast<float>(omp_get_thread_num()));
#pragma omp critical
      sink = sink + r;
    }
#else
    sink = sink + detail::fma_chains(kIters, 0.f);
#endif
    rates.push_back(flops / (now_seconds() - t0) * 1e-9);
  }
  return best_of(rates);
}

// A flag's value as a positive integer or number; a bad one throws with the flag named (atoi
// would have read "abc" as 0).
inline int positive_int(const char* flag, const char* value, long min = 1) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || errno != 0 || v < min || v > (1L << 30))
    throw std::invalid_argument(std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" +
                                value + "'");
  return static_cast<int>(v);
}
inline double positive_number(const char* flag, const char* value) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (*value == '\0' || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0)
    throw std::invalid_argument(std::string(flag) + ": expected a positive number, got '" + value + "'");
  return v;
}

// A benchmark's main: an error becomes one line naming the program, and exit status 1.
template <class F>
int guarded_main(const char* program, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace sinklab::bench
