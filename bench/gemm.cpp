// fp32 GEMM throughput of sinklab's kernels::cpu::gemm (Eigen) next to OpenBLAS's cblas_sgemm,
// both on the same thread count in the same run, each also as a fraction of the machine's FMA
// peak measured here. By default C = A·B with square row-major N×N matrices; --model small|large
// runs instead the products of one training step of bench/train_step's decoder (forward x·W,
// backward g·Wᵀ and xᵀ·g of every projection), each labelled with its layer and transposes.
//
//   gemm [--threads 2] [--trials 7] [--min-time 0.2] [--sizes 128,256,512,1024,2048]
//        [--model small|large] [--cold] [--dtype fp32|bf16|s8] [--torch | --no-torch] [--torch-script PATH]
//
// --dtype bf16 times kernels::cpu::gemm_bf16 (bf16 operands, fp32 accumulation) on sinklab's side;
// --dtype s8 times kernels::cpu::gemm_u8s8 (W8A8 inference: A quantized to uint8 and B to int8
// before the timed calls, B packed once as a model's weight is; only the forward products x·W).
// %peak stays relative to the fp32 FMA peak, and the max rel diff column is then the format's error.
//
// With --dtype fp32 or bf16, PyTorch's torch.matmul on the same products and threads follows in a
// second table (bench/gemm_torch.py, run by /usr/bin/python3; skipped when torch does not import,
// unless --torch): its bf16 operands are bf16 tensors already, so that column leaves out the
// conversion sinklab's gemm_bf16 makes inside every call.
//
// --cold evicts the operands from every cache level before each call (timed one call at a time),
// as inside a training step, where a product's inputs were written many megabytes earlier.
//
// OpenBLAS 0.3.21 misdetects some CPUs and must be told its core type through OPENBLAS_CORETYPE
// before the library loads, so without it the program re-executes itself with the one
// bench::openblas_coretype() picks for this CPU.
#include <cblas.h>
#include <unistd.h>

#include <map>

#include <algorithm>
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
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "sinklab/kernels/cpu/gemm_s8.hpp"
#include "sinklab/kernels/cpu/isa.hpp"

#ifndef SINKLAB_BENCH_SOURCE_DIR
#define SINKLAB_BENCH_SOURCE_DIR "bench"
#endif

using namespace sinklab;

namespace {

struct Args {
  int threads = 2;
  int trials = 7;
  double min_time = 0.2;
  std::vector<int64_t> sizes{128, 256, 512, 1024, 2048};
  std::string model;  // "small" or "large": the decoder's shapes instead of squares
  bool cold = false;  // evict the operands from cache before each (individually timed) call
  std::string dtype = "fp32";  // sinklab's side: gemm, gemm_bf16 (bf16 operands) or gemm_u8s8 (W8A8)
  bool torch = true, torch_forced = false;  // the torch.matmul table (fp32 and bf16)
  std::string torch_script = std::string(SINKLAB_BENCH_SOURCE_DIR) + "/gemm_torch.py";
};

// One product C[M, N] = op(A)·op(B) with inner dimension K.
struct Case {
  std::string label;
  bool ta = false, tb = false;
  int64_t M, N, K;
};

std::vector<Case> square_cases(const std::vector<int64_t>& sizes) {
  std::vector<Case> cases;
  for (const int64_t n : sizes) cases.push_back({std::to_string(n), false, false, n, n, n});
  return cases;
}

// The projections of bench/train_step's decoder (tokens = batch·T rows): for each weight
// W [in, out], forward x·W (NN), input gradient g·Wᵀ (NT) and weight gradient xᵀ·g (TN).
std::vector<Case> model_cases(const std::string& model) {
  const bool large = model == "large";
  const int64_t d = large ? 256 : 128, tokens = large ? 8 * 256 : 16 * 128, hidden = large ? 688 : 344;
  const struct {
    const char* name;
    int64_t in, out;
  } weights[] = {{"qkv", d, 3 * d}, {"out", d, d}, {"ffn_in", d, 2 * hidden}, {"ffn_out", hidden, d}, {"head", d, 256}};
  std::vector<Case> cases;
  for (const auto& w : weights) {
    cases.push_back({std::string(w.name) + " x.W", false, false, tokens, w.out, w.in});
    cases.push_back({std::string(w.name) + " g.W^T", false, true, tokens, w.in, w.out});
    cases.push_back({std::string(w.name) + " x^T.g", true, false, w.in, w.out, tokens});
  }
  return cases;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--threads" && has_value) a.threads = sinklab::bench::positive_int("--threads", argv[++i]);
    else if (k == "--trials" && has_value) a.trials = sinklab::bench::positive_int("--trials", argv[++i]);
    else if (k == "--min-time" && has_value) a.min_time = sinklab::bench::positive_number("--min-time", argv[++i]);
    else if (k == "--model" && has_value) a.model = argv[++i];
    else if (k == "--cold") a.cold = true;
    else if (k == "--torch") a.torch = a.torch_forced = true;
    else if (k == "--no-torch") a.torch = false;
    else if (k == "--torch-script" && has_value) a.torch_script = argv[++i];
    else if (k == "--dtype" && has_value) {
      const std::string d = argv[++i];
      if (d != "fp32" && d != "bf16" && d != "s8") {
        std::fprintf(stderr, "gemm: --dtype must be fp32, bf16 or s8, not '%s'\n", d.c_str());
        std::exit(2);
      }
      a.dtype = d;
    }
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
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--trials N] [--min-time S] [--sizes a,b,c] [--model small|large] [--cold]\n"
                   "          [--dtype fp32|bf16|s8] [--torch | --no-torch] [--torch-script PATH]\n"
                   "defaults: --threads 2 --trials 7 --min-time 0.2 --sizes 128,256,512,1024,2048 --dtype fp32, torch when "
                   "it imports\n",
                   argv[0]);
      std::exit(2);
    }
  }
  if (a.threads < 1 || a.trials < 1 || a.sizes.empty() || !(a.model.empty() || a.model == "small" || a.model == "large")) {
    std::fprintf(stderr, "gemm: threads and trials must be >= 1, sizes non-empty, --model small or large\n");
    std::exit(2);
  }
  return a;
}

// Both libraries keep their worker threads spinning after a call (OpenBLAS for about 2^28
// cycles, ~0.1 s); a pause when switching library keeps one's spinning threads from stealing
// the cores of the other, whose threads wait on each other and slow down badly on 2 cores.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

// Reads a buffer larger than the last-level cache (260 MiB on the machine this was written on),
// so the next call finds its operands in memory only. Reads only: the lines it leaves behind
// are clean, so the timed call pays no write-backs of the sweep.
void evict_caches() {
  static const std::vector<float> sweep(96u << 20, 1.f);  // 384 MiB
  float sum = 0;
  for (std::size_t i = 0; i < sweep.size(); i += 16) sum += sweep[i];
  [[maybe_unused]] static volatile float sink;  // written so the loop is not optimised away
  sink = sum;
}

// Calls per second, each call timed alone after evict_caches() (median of `calls`).
template <class F>
double cold_calls_per_second(F&& f, int calls) {
  std::vector<double> seconds;
  for (int i = 0; i < calls; ++i) {
    evict_caches();
    const double t0 = bench::now_seconds();
    f();
    seconds.push_back(bench::now_seconds() - t0);
  }
  std::sort(seconds.begin(), seconds.end());
  return 1.0 / seconds[seconds.size() / 2];
}

// torch.matmul on the same products (bench/gemm_torch.py), beside sinklab's best rates.
void torch_table(const Args& args, const std::vector<std::pair<Case, double>>& sl_rates) {
  if (!args.torch_forced && std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    std::printf("\n/usr/bin/python3 cannot import torch: no torch.matmul table (--torch insists)\n");
    return;
  }
  std::string cases;
  for (const auto& [c, rate] : sl_rates)
    cases += std::to_string(c.M) + "," + std::to_string(c.N) + "," + std::to_string(c.K) + "," + (c.ta ? "1" : "0") +
             "," + (c.tb ? "1" : "0") + ";";
  settle();
  const std::string cmd = "/usr/bin/python3 " + bench::shell_quoted(args.torch_script) + " --threads " +
                          std::to_string(args.threads) + " --trials " + std::to_string(args.trials) + " --min-time " +
                          std::to_string(args.min_time) + " --dtype " + args.dtype + " --cases " +
                          bench::shell_quoted(cases);
  std::printf("\n%s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* p = popen(cmd.c_str(), "r");
  SINKLAB_CHECK(p, "gemm: could not start ", cmd);
  std::map<int, double> torch_rate;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    int i = 0;
    double r = 0;
    if (std::sscanf(line, "case %d %lf", &i, &r) == 2) torch_rate[i] = r;
    else std::printf("%s", line);
  }
  const int rc = pclose(p);
  SINKLAB_CHECK(rc == 0 && torch_rate.size() == sl_rates.size(), "gemm: ", args.torch_script, " failed (status ", rc,
                ", ", torch_rate.size(), " of ", sl_rates.size(), " cases timed)");
  std::printf("%-28s | %13s | %13s | %9s\n", args.model.empty() ? "N" : "M x N x K", "sinklab best", "torch best",
              "sl/torch");
  for (std::size_t i = 0; i < sl_rates.size(); ++i) {
    const Case& c = sl_rates[i].first;
    const std::string label = args.model.empty() ? c.label
                                                 : c.label + " " + std::to_string(c.M) + "x" + std::to_string(c.N) +
                                                       "x" + std::to_string(c.K);
    const double t = torch_rate[static_cast<int>(i)];
    std::printf("%-28s | %13.1f | %13.1f | %8.1f%%\n", label.c_str(), sl_rates[i].second, t,
                100 * sl_rates[i].second / t);
  }
}

}  // namespace

static int bench_main(int argc, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && bench::openblas_coretype()) {
    setenv("OPENBLAS_CORETYPE", bench::openblas_coretype(), 1);
    execv("/proc/self/exe", argv);
    std::perror("gemm: re-executing with OPENBLAS_CORETYPE set failed; OpenBLAS may misdetect the CPU");
  }
  const Args args = parse(argc, argv);
  set_num_threads(args.threads);
  openblas_set_num_threads(args.threads);

  const bool bf16 = args.dtype == "bf16", s8 = args.dtype == "s8";
  std::printf("sinklab GEMM benchmark (sinklab %s against OpenBLAS fp32, C = A*B, row-major, %d threads)\n",
              bf16 ? "bf16 (gemm_bf16: bf16 operands, fp32 accumulation)"
              : s8 ? "W8A8 (gemm_u8s8: uint8 x int8, int32 sums)"
                   : "fp32",
              args.threads);
  std::printf("CPU: %s\n%s\n", cpu_features().summary().c_str(), kernels::cpu::kernel_isa().summary().c_str());
  std::printf("OpenBLAS: %s, core %s, OPENBLAS_CORETYPE=%s\n", openblas_get_config(), openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
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
  if (args.cold)
    std::printf("each figure: %d interleaved trials of 9 calls, each after evicting all caches (median call); best "
                "and median trial GFLOP/s\n\n",
                args.trials);
  else
    std::printf("each figure: %d interleaved trials of >= %.2f s; best and median GFLOP/s\n\n", args.trials,
                args.min_time);
  std::printf("%-28s | %13s %13s %6s | %13s %13s %6s | %9s | %12s\n", args.model.empty() ? "N" : "M x N x K",
              "sinklab best", "sinklab med", "%peak", "OpenBLAS best", "OpenBLAS med", "%peak", "sl/OB", "max rel diff");

  Rng rng(42);
  const std::vector<Case> cases = args.model.empty() ? square_cases(args.sizes) : model_cases(args.model);
  double sl_seconds = 0, ob_seconds = 0;  // one call of every case, at the best rates
  std::vector<std::pair<Case, double>> sl_rates;  // sinklab's best GFLOP/s per case, for the torch table
  for (const Case& c : cases) {
    if (s8 && (c.ta || c.tb)) continue;  // inference multiplies x·W only
    // Stored shapes: A is M×K (K×M when transposed), B is K×N (N×K when transposed).
    const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    const Tensor<float> a = rng.uniform<float>({c.M * c.K}, -1.f, 1.f);
    const Tensor<float> b = rng.uniform<float>({c.K * c.N}, -1.f, 1.f);
    Tensor<float> c_sl = Tensor<float>::zeros({c.M * c.N});
    Tensor<float> c_ob = Tensor<float>::zeros({c.M * c.N});
    using kernels::cpu::Trans;
    // W8A8: A in [-1, 1] asymmetric (scale 2/255, zero point 128), B symmetric (scale 1/127).
    std::vector<uint8_t> a_u8;
    std::vector<int8_t> b_s8;
    kernels::cpu::PackedS8 b_packed;
    const float sa = 2.0f / 255.0f, sb = 1.0f / 127.0f;
    if (s8) {
      for (int64_t i = 0; i < c.M * c.K; ++i)
        a_u8.push_back(static_cast<uint8_t>(std::clamp(std::nearbyint(a.data()[i] / sa) + 128.0f, 0.0f, 255.0f)));
      for (int64_t i = 0; i < c.K * c.N; ++i)
        b_s8.push_back(static_cast<int8_t>(std::clamp(std::nearbyint(b.data()[i] / sb), -127.0f, 127.0f)));
      b_packed = kernels::cpu::pack_s8(b_s8.data(), c.N, c.K, c.N);
    }
    auto run_sinklab = [&] {
      if (s8)
        kernels::cpu::gemm_u8s8(c.M, a_u8.data(), c.K, 128, b_packed, sa * sb, c_sl.data(), c.N);
      else if (bf16)
        kernels::cpu::gemm_bf16(c.ta ? Trans::T : Trans::N, c.tb ? Trans::T : Trans::N, c.M, c.N, c.K, 1.f, a.data(),
                                lda, b.data(), ldb, 0.f, c_sl.data(), c.N);
      else
        kernels::cpu::gemm(c.ta ? Trans::T : Trans::N, c.tb ? Trans::T : Trans::N, c.M, c.N, c.K, 1.f, a.data(), lda,
                           b.data(), ldb, 0.f, c_sl.data(), c.N);
    };
    auto run_openblas = [&] {
      cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(c.M), static_cast<int>(c.N), static_cast<int>(c.K), 1.f, a.data(),
                  static_cast<int>(lda), b.data(), static_cast<int>(ldb), 0.f, c_ob.data(), static_cast<int>(c.N));
    };

    // Correctness: sinklab against OpenBLAS, relative to the largest entry of the result.
    run_sinklab();
    run_openblas();
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < c.M * c.N; ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(c_sl.data()[i] - c_ob.data()[i])));
      max_ref = std::max(max_ref, static_cast<double>(std::abs(c_ob.data()[i])));
    }

    const double flops = 2.0 * static_cast<double>(c.M) * static_cast<double>(c.N) * static_cast<double>(c.K);
    std::vector<double> sl, ob;
    for (int t = 0; t < args.trials; ++t) {
      settle();
      sl.push_back((args.cold ? cold_calls_per_second(run_sinklab, 9) : bench::calls_per_second(run_sinklab, args.min_time)) *
                   flops * 1e-9);
      settle();
      ob.push_back(
          (args.cold ? cold_calls_per_second(run_openblas, 9) : bench::calls_per_second(run_openblas, args.min_time)) *
          flops * 1e-9);
    }
    const double sl_best = bench::best_of(sl), ob_best = bench::best_of(ob);
    sl_rates.push_back({c, sl_best});
    sl_seconds += flops * 1e-9 / sl_best;
    ob_seconds += flops * 1e-9 / ob_best;
    const std::string label =
        args.model.empty() ? c.label
                           : c.label + " " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
    std::printf("%-28s | %13.1f %13.1f %5.1f%% | %13.1f %13.1f %5.1f%% | %8.1f%% | %12.2e\n", label.c_str(), sl_best,
                bench::median_of(sl), 100 * sl_best / peak, ob_best, bench::median_of(ob), 100 * ob_best / peak,
                100 * sl_best / ob_best, max_diff / max_ref);
    std::fflush(stdout);
  }
  if (!args.model.empty())
    std::printf("\none call of every product: sinklab %.3f ms, OpenBLAS %.3f ms (sl/OB %.1f%%)\n", 1e3 * sl_seconds,
                1e3 * ob_seconds, 100 * ob_seconds / sl_seconds);
  std::printf("\nsl/OB: best sinklab over best OpenBLAS. %%peak: best over the FMA peak.\n");
  if (args.torch && !s8 && !args.cold) torch_table(args, sl_rates);
  std::printf("load average at end: %s\n", bench::load_average().c_str());
  return 0;
}

int main(int argc, char** argv) {
  return sinklab::bench::guarded_main("gemm", [&] { return bench_main(argc, argv); });
}
