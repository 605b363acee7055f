// Tokens per second of a full training step (forward, backward, AdamW) and of a forward-only
// pass of a pre-norm decoder, nn::Transformer<PreNorm<RMS>, Attention<>, SwiGLU> with RoPE and
// an untied head, next to the same model in PyTorch (bench/train_step_torch.py) run by this
// program in the same run on the same number of threads.
//
//   train_step [--config small|large|both] [--threads 2] [--steps 10] [--warmup 3] [--rounds 1]
//              [--no-torch] [--profile] [--torch-script PATH] [--openblas-dir DIR] [--precision fp32|bf16]
//              [--torch-autocast] [--check-finite] [--device cpu|cuda]
//
// The small and large configs, the model and its batch: bench/decoder.hpp.
//
// Each side runs `warmup` untimed steps, then `steps` timed ones; a side's result is the median
// step time (the median over rounds of the per-round medians with --rounds > 1; rounds alternate
// sinklab and torch so a change of machine load hits both). PyTorch runs with OpenBLAS
// (Debian's openblas-openmp libblas.so.3 first on LD_LIBRARY_PATH, OPENBLAS_CORETYPE as bench/gemm sets it,
// OMP_NUM_THREADS and torch.set_num_threads equal to --threads); the script prints which BLAS it
// loaded. --profile adds a per-op / per-layer breakdown of sinklab's step (autodiff::profile),
// taken after the timed steps. --precision bf16 trains sinklab's side with bf16 matrix products
// (fp32 accumulation, autodiff::Tape::set_precision) and times the fp32 step in the same rounds
// for the ratio. --torch-autocast runs the PyTorch side under torch.autocast("cpu", bfloat16) (its
// "torch" columns are then autocast's; the torch command line printed first says so). --check-finite runs sinklab's side under the non-finite guard
// (autodiff::CheckFinite, on in the examples), to measure what the guard costs.
//
// --device cuda times the same model as Module<float, cuda> on the GPU (bench/train_step_cuda.cu;
// needs a build with the CUDA backend and a GPU) against the PyTorch model on the same GPU
// (eager, the script's --device cuda; it needs a PyTorch built with CUDA).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "decoder.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/profile.hpp"
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/isa.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"

#if defined(SINKLAB_BENCH_CUDA)
#include "train_step_cuda.hpp"
#endif

#ifndef SINKLAB_BENCH_SOURCE_DIR
#define SINKLAB_BENCH_SOURCE_DIR "bench"
#endif

using namespace sinklab;

namespace {

using bench::kLarge;
using bench::kSmall;
using bench::ModelSize;

struct Args {
  std::vector<ModelSize> configs{kSmall, kLarge};
  int threads = 2;
  int steps = 10;
  int warmup = 3;
  int rounds = 1;
  bool torch = true;
  bool torch_forced = false;
  bool profile = false;
  bool check_finite = false;
  bool torch_autocast = false;  // the PyTorch side under torch.autocast("cpu", bfloat16)
  std::string device = "cpu";
  kernels::Precision precision = kernels::Precision::fp32;
  std::string torch_script = std::string(SINKLAB_BENCH_SOURCE_DIR) + "/train_step_torch.py";
  std::string openblas_dir = "/usr/lib/x86_64-linux-gnu/openblas-openmp";
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--config small|large|both] [--threads N] [--steps N] [--warmup N] [--rounds N]\n"
               "          [--torch | --no-torch] [--profile] [--torch-script PATH] [--openblas-dir DIR]\n"
               "          [--precision fp32|bf16] [--torch-autocast] [--check-finite] [--device cpu|cuda]\n"
               "defaults: --config both --threads 2 --steps 10 --warmup 3 --rounds 1 --precision fp32 --device cpu\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--config" && has_value) {
      const std::string c = argv[++i];
      if (c == "small") a.configs = {kSmall};
      else if (c == "large") a.configs = {kLarge};
      else if (c == "both") a.configs = {kSmall, kLarge};
      else usage(argv[0]);
    } else if (k == "--threads" && has_value) a.threads = sinklab::bench::positive_int("--threads", argv[++i]);
    else if (k == "--steps" && has_value) a.steps = sinklab::bench::positive_int("--steps", argv[++i]);
    else if (k == "--warmup" && has_value) a.warmup = sinklab::bench::positive_int("--warmup", argv[++i], 0);
    else if (k == "--rounds" && has_value) a.rounds = sinklab::bench::positive_int("--rounds", argv[++i]);
    else if (k == "--torch") a.torch = a.torch_forced = true;
    else if (k == "--no-torch") a.torch = false;
    else if (k == "--profile") a.profile = true;
    else if (k == "--check-finite") a.check_finite = true;
    else if (k == "--torch-autocast") a.torch_autocast = true;
    else if (k == "--torch-script" && has_value) a.torch_script = argv[++i];
    else if (k == "--openblas-dir" && has_value) a.openblas_dir = argv[++i];
    else if (k == "--device" && has_value) {
      a.device = argv[++i];
      if (a.device != "cpu" && a.device != "cuda") usage(argv[0]);
    }
    else if (k == "--precision" && has_value) {
      const std::string p = argv[++i];
      if (p != "fp32" && p != "bf16") usage(argv[0]);
      a.precision = p == "bf16" ? kernels::Precision::bf16 : kernels::Precision::fp32;
    } else usage(argv[0]);
  }
  if (a.device == "cuda" && (a.precision != kernels::Precision::fp32 || a.torch_autocast || a.profile)) {
    std::fprintf(stderr, "train_step: --device cuda times fp32 only (no --precision bf16, --torch-autocast or --profile)\n");
    std::exit(2);
  }
  if (a.threads < 1 || a.steps < 1 || a.warmup < 0 || a.rounds < 1) {
    std::fprintf(stderr, "train_step: threads, steps and rounds must be >= 1, warmup >= 0\n");
    std::exit(2);
  }
  return a;
}


struct Result {
  int64_t params = 0;
  double loss0 = 0;
  double train_s = 0;  // median seconds per training step
  double fwd_s = 0;    // median seconds per forward-only pass
};

// One model, optimiser and batch; times training steps and forward-only passes.
class SinklabRun {
 public:
  SinklabRun(const ModelSize& s, kernels::Precision p) : d_(s) { d_.tape.set_precision(p); }
  int64_t params() const { return d_.elements(); }
  int64_t tokens() const { return d_.size.batch * d_.size.T; }

  float train_step() {
    d_.tape.clear();
    d_.opt->zero_grad();
    autodiff::Var<float> loss = d_.model->loss(d_.tape, d_.batch.x, d_.batch.y);
    d_.tape.backward(loss);
    d_.opt->step();
    return loss.item();
  }
  float forward_only() {
    autodiff::no_grad off;
    d_.tape.clear();
    return d_.model->loss(d_.tape, d_.batch.x, d_.batch.y).item();
  }

  // Per-op / per-section times of `steps` training steps, plus the optimiser's share.
  void profile(int steps) {
    autodiff::profile::Profiler prof;
    double zero_s = 0, step_s = 0, clear_s = 0;
    {
      autodiff::profile::Session on(prof);
      for (int i = 0; i < steps; ++i) {
        double t0 = bench::now_seconds();
        d_.tape.clear();
        clear_s += bench::now_seconds() - t0;
        t0 = bench::now_seconds();
        d_.opt->zero_grad();
        zero_s += bench::now_seconds() - t0;
        prof.mark();
        autodiff::Var<float> loss = d_.model->loss(d_.tape, d_.batch.x, d_.batch.y);
        d_.tape.backward(loss);
        t0 = bench::now_seconds();
        d_.opt->step();
        step_s += bench::now_seconds() - t0;
      }
    }
    std::printf("\nprofile of sinklab's training step, %s config (%d steps, ms per step)\n", d_.size.name.c_str(), steps);
    prof.print(stdout, steps);
    std::printf("%-52s %32.2f\n%-52s %32.2f\n%-52s %32.2f\n", "tape.clear() ms/step", 1e3 * clear_s / steps,
                "AdamW zero_grad ms/step", 1e3 * zero_s / steps, "AdamW step ms/step", 1e3 * step_s / steps);
  }

 private:
  bench::DecoderSetup<> d_;
};

template <class F>
double median_seconds(F&& f, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const double t0 = bench::now_seconds();
    f();
    t.push_back(bench::now_seconds() - t0);
  }
  return bench::median_of(t);
}

Result run_sinklab(SinklabRun& run, const Args& a) {
  Result r;
  r.params = run.params();
  r.loss0 = run.forward_only();
  r.train_s = median_seconds([&] { run.train_step(); }, a.warmup, a.steps);
  r.fwd_s = median_seconds([&] { run.forward_only(); }, a.warmup, a.steps);
  return r;
}


std::string torch_env(const Args& a) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  std::string ld = a.openblas_dir + (old && *old ? std::string(":") + old : std::string());
  const char* core = std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : bench::openblas_coretype();
  return "LD_LIBRARY_PATH=" + bench::shell_quoted(ld) + (core ? " OPENBLAS_CORETYPE=" + bench::shell_quoted(core) : std::string()) +
         " OMP_NUM_THREADS=" + std::to_string(a.threads);
}

bool torch_available() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// Runs the PyTorch script for one config; nullopt (with a message) when it fails.
std::optional<Result> run_torch(const ModelSize& s, const Args& a, bool print_info) {
  const std::string cmd = torch_env(a) + " /usr/bin/python3 " + bench::shell_quoted(a.torch_script) + " --json --config " + s.name +
                          " --threads " + std::to_string(a.threads) + " --steps " + std::to_string(a.steps) +
                          " --warmup " + std::to_string(a.warmup) + (a.torch_autocast ? " --autocast" : "") +
                          " --device " + a.device;
  if (print_info) std::printf("torch command: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    std::fprintf(stderr, "train_step: could not start the PyTorch script\n");
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  if (rc != 0) {
    std::fprintf(stderr, "train_step: the PyTorch script failed (status %d); its output:\n%s\n", rc, out.c_str());
    return std::nullopt;
  }
  std::optional<Result> r;
  for (std::size_t pos = 0; pos < out.size();) {
    std::size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    const std::string line = out.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    if (j.contains("info")) {
      if (print_info) {
        const auto& i = j["info"];
        std::printf("torch %s, %d threads, BLAS %s, 1024x1024 matmul %.1f GFLOP/s, scaled_dot_product_attention %s\n",
                    i["torch"].get<std::string>().c_str(), i["threads"].get<int>(), i["blas"].dump().c_str(),
                    i["matmul1024_gflops"].get<double>(), i["sdpa"].get<bool>() ? "yes" : "no (softmax(QKᵀ/√d + mask)V)");
      }
    } else if (j.value("config", "") == s.name) {
      r = Result{j["params"].get<int64_t>(), j["loss0"].get<double>(), j["train_step_s"].get<double>(),
                 j["fwd_s"].get<double>()};
    }
  }
  if (!r) std::fprintf(stderr, "train_step: no result for '%s' in the PyTorch output:\n%s\n", s.name.c_str(), out.c_str());
  return r;
}

// Lets the other side's spinning OpenMP/OpenBLAS threads go to sleep before timing.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

#if defined(SINKLAB_BENCH_CUDA)
// --device cuda: sinklab's decoder on the GPU beside PyTorch's on the same GPU, per config.
int cuda_main(const Args& a) {
  std::printf("train_step --device cuda: %d warmup + %d timed steps, %d round(s)\n", a.warmup, a.steps, a.rounds);
  bool printed_info = false, printed_header = false;
  for (const ModelSize& s : a.configs) {
    std::vector<double> train_sl, fwd_sl, train_torch, fwd_torch;
    bench::CudaTrainStep sl;
    for (int round = 0; round < a.rounds; ++round) {
      sl = bench::cuda_train_step(s, a.warmup, a.steps);
      if (sl.device.empty()) {
        std::printf("train_step --device cuda: no usable GPU (%s); skipped\n", sl.why.c_str());
        return 0;
      }
      train_sl.push_back(sl.train_s);
      fwd_sl.push_back(sl.fwd_s);
      if (a.torch) {
        if (auto t = run_torch(s, a, !printed_info)) {
          printed_info = true;
          train_torch.push_back(t->train_s);
          fwd_torch.push_back(t->fwd_s);
        }
      }
    }
    if (!printed_header) {
      printed_header = true;
      std::printf("\n%-6s %10s %8s | %14s %14s %7s | %14s %14s %7s\n", "config", "params", "loss0", "sinklab train",
                  "torch train", "ratio", "sinklab fwd", "torch fwd", "ratio");
    }
    const double tokens = static_cast<double>(s.batch * s.T);
    const double sl_train = tokens / bench::median_of(train_sl), sl_fwd = tokens / bench::median_of(fwd_sl);
    if (train_torch.empty()) {
      std::printf("%-6s %10lld %8.4f | %14.0f %14s %7s | %14.0f %14s %7s   (%s)\n", s.name.c_str(),
                  static_cast<long long>(sl.params), sl.loss0, sl_train, "-", "-", sl_fwd, "-", "-", sl.device.c_str());
      continue;
    }
    const double t_train = tokens / bench::median_of(train_torch), t_fwd = tokens / bench::median_of(fwd_torch);
    std::printf("%-6s %10lld %8.4f | %14.0f %14.0f %6.2fx | %14.0f %14.0f %6.2fx   (%s)\n", s.name.c_str(),
                static_cast<long long>(sl.params), sl.loss0, sl_train, t_train, sl_train / t_train, sl_fwd, t_fwd,
                sl_fwd / t_fwd, sl.device.c_str());
  }
  return 0;
}
#endif

}  // namespace

static int bench_main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.device == "cuda") {
#if defined(SINKLAB_BENCH_CUDA)
    if (a.torch && !a.torch_forced && !torch_available()) {
      std::printf("train_step: /usr/bin/python3 cannot import torch; running sinklab alone\n");
      a.torch = false;
    }
    return cuda_main(a);
#else
    std::fprintf(stderr, "train_step: --device cuda needs a build with the CUDA backend (SINKLAB_CUDA=ON or AUTO "
                         "with the CUDA Toolkit found); this one has none\n");
    return 2;
#endif
  }
  set_num_threads(a.threads);
  if (a.torch && !a.torch_forced && !torch_available()) {
    std::printf("train_step: /usr/bin/python3 cannot import torch; running sinklab alone\n");
    a.torch = false;
  }
  autodiff::set_check_finite(a.check_finite);
  std::printf("train_step: %d threads, %d warmup + %d timed steps, %d round(s), sinklab precision %s%s, load average %s\n",
              a.threads, a.warmup, a.steps, a.rounds, kernels::precision_name(a.precision),
              a.check_finite ? ", non-finite guard on" : "", bench::load_average().c_str());
  const bool with_fp32 = a.precision != kernels::Precision::fp32;  // time sinklab fp32 too, for the ratio
  if (with_fp32)
    std::printf("CPU: %s\n%s\n", cpu_features().summary().c_str(), kernels::cpu::kernel_isa().summary().c_str());

  struct Row {
    ModelSize size;
    int64_t params_sl = 0, params_torch = -1;
    double loss_sl = 0, loss_torch = 0;
    std::vector<double> train_sl, fwd_sl, train_torch, fwd_torch, train_fp32, fwd_fp32;
  };
  std::vector<Row> rows;
  bool printed_info = false;
  for (const ModelSize& s : a.configs) {
    Row row;
    row.size = s;
    SinklabRun run(s, a.precision);
    std::optional<SinklabRun> fp32;
    if (with_fp32) fp32.emplace(s, kernels::Precision::fp32);
    for (int round = 0; round < a.rounds; ++round) {
      if (fp32) {
        const Result r = run_sinklab(*fp32, a);
        row.train_fp32.push_back(r.train_s);
        row.fwd_fp32.push_back(r.fwd_s);
        std::printf("  %s round %d: sinklab fp32 train %.1f ms/step, forward %.1f ms\n", s.name.c_str(), round + 1,
                    1e3 * r.train_s, 1e3 * r.fwd_s);
      }
      const Result sl = run_sinklab(run, a);
      row.params_sl = sl.params;
      if (round == 0) row.loss_sl = sl.loss0;  // later rounds start from a trained model
      row.train_sl.push_back(sl.train_s);
      row.fwd_sl.push_back(sl.fwd_s);
      std::printf("  %s round %d: sinklab train %.1f ms/step, forward %.1f ms", s.name.c_str(), round + 1,
                  1e3 * sl.train_s, 1e3 * sl.fwd_s);
      if (a.torch) {
        settle();
        std::printf("\n");
        if (auto t = run_torch(s, a, !printed_info)) {
          printed_info = true;
          row.params_torch = t->params;
          if (round == 0) row.loss_torch = t->loss0;
          row.train_torch.push_back(t->train_s);
          row.fwd_torch.push_back(t->fwd_s);
          std::printf("  %s round %d: torch   train %.1f ms/step, forward %.1f ms", s.name.c_str(), round + 1,
                      1e3 * t->train_s, 1e3 * t->fwd_s);
        }
        settle();
      }
      std::printf("  (load %s)\n", bench::load_average().c_str());
      std::fflush(stdout);
    }
    if (a.profile) run.profile(a.steps);
    rows.push_back(std::move(row));
  }

  std::printf("\n%-6s %10s %8s | %14s %14s %7s | %14s %14s %7s\n", "config", "params", "loss0", "sinklab train",
              "torch train", "ratio", "sinklab fwd", "torch fwd", "ratio");
  std::printf("%-6s %10s %8s | %14s %14s %7s | %14s %14s %7s\n", "", "", "", "tok/s", "tok/s", "", "tok/s", "tok/s",
              "");
  for (const Row& r : rows) {
    const double tokens = static_cast<double>(r.size.batch * r.size.T);
    const double sl_train = tokens / bench::median_of(r.train_sl), sl_fwd = tokens / bench::median_of(r.fwd_sl);
    if (r.train_torch.empty()) {
      std::printf("%-6s %10lld %8.4f | %14.0f %14s %7s | %14.0f %14s %7s\n", r.size.name.c_str(),
                  static_cast<long long>(r.params_sl), r.loss_sl, sl_train, "-", "-", sl_fwd, "-", "-");
      continue;
    }
    const double t_train = tokens / bench::median_of(r.train_torch), t_fwd = tokens / bench::median_of(r.fwd_torch);
    std::printf("%-6s %10lld %8.4f | %14.0f %14.0f %6.2fx | %14.0f %14.0f %6.2fx\n", r.size.name.c_str(),
                static_cast<long long>(r.params_sl), r.loss_sl, sl_train, t_train, sl_train / t_train, sl_fwd, t_fwd,
                sl_fwd / t_fwd);
    if (r.params_torch != r.params_sl)
      std::printf("  WARNING: parameter counts differ: sinklab %lld, torch %lld\n", static_cast<long long>(r.params_sl),
                  static_cast<long long>(r.params_torch));
    else
      std::printf("  parameters match (%lld); initial loss sinklab %.4f, torch %.4f (ln 256 = %.4f)\n",
                  static_cast<long long>(r.params_sl), r.loss_sl, r.loss_torch, std::log(256.0));
  }
  for (const Row& r : rows)
    if (!r.train_fp32.empty())
      std::printf("%s: sinklab %s over sinklab fp32: train %.2fx, forward %.2fx\n", r.size.name.c_str(),
                  kernels::precision_name(a.precision), bench::median_of(r.train_fp32) / bench::median_of(r.train_sl),
                  bench::median_of(r.fwd_fp32) / bench::median_of(r.fwd_sl));
  std::printf("load average at the end: %s\n", bench::load_average().c_str());
  return 0;
}

int main(int argc, char** argv) {
  return sinklab::bench::guarded_main("train_step", [&] { return bench_main(argc, argv); });
}
