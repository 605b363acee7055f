// Tokens per second of a full training step (forward, backward, AdamW) and of a forward-only
// pass of a pre-norm decoder, nn::Transformer<PreNorm<RMS>, Attention<>, SwiGLU> with RoPE and
// an untied head, next to the same model in PyTorch (bench/train_step_torch.py) run by this
// program in the same run on the same number of threads.
//
//   train_step [--config small|large|both] [--threads 2] [--steps 10] [--warmup 3] [--rounds 1]
//              [--no-torch] [--profile] [--torch-script PATH] [--python PATH] [--openblas-dir DIR] [--precision fp32|bf16]
//              [--torch-autocast] [--check-finite] [--device cpu|cuda] [--help]
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
// (eager, the script's --device cuda; it needs a PyTorch built with CUDA), 5 warmup + 20 timed
// steps unless --warmup/--steps say otherwise; each run there starts from a fresh model. With
// --precision bf16 sinklab's tape is bf16 there too (cuBLAS bf16 GEMMs with fp32 sums; the fused
// attention on the tensor-core kernels for head sizes 64 and 128 on sm_80 and later, on the float32
// SIMT kernels otherwise, and the program says which), its fp32 step is timed in the same rounds,
// and the PyTorch side runs under torch.autocast("cuda", bfloat16) as well as in fp32 (one process,
// the script's --autocast --also-fp32): on cuda, bf16 implies --torch-autocast. The table gives
// each run's step times, tok/s, speed against the PyTorch reference (autocast when timed) and the
// loss before and after the warmup + timed training steps on the one batch, a check that bf16 trains.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
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
  int steps = 10;  // --device cuda: 20 unless given
  int warmup = 3;  // --device cuda: 5 unless given
  bool steps_given = false, warmup_given = false;
  int rounds = 1;
  bool torch = true;
  bool torch_forced = false;
  bool profile = false;
  bool check_finite = false;
  bool torch_autocast = false;  // the PyTorch side under torch.autocast(device, bfloat16)
  std::string device = "cpu";
  kernels::Precision precision = kernels::Precision::fp32;
  std::string torch_script = std::string(SINKLAB_BENCH_SOURCE_DIR) + "/train_step_torch.py";
  // Debian's python3-torch by default (a pyenv python3 earlier on PATH may lack torch).
  std::string python = std::getenv("SINKLAB_PYTHON") ? std::getenv("SINKLAB_PYTHON") : "/usr/bin/python3";
  std::string openblas_dir = "/usr/lib/x86_64-linux-gnu/openblas-openmp";
};

// --help: the usage on stdout, exit 0; a bad command line: on stderr, exit 2.
[[noreturn]] void usage(const char* argv0, bool help = false) {
  std::fprintf(help ? stdout : stderr,
               "usage: %s [--config small|large|both] [--threads N] [--steps N] [--warmup N] [--rounds N]\n"
               "          [--torch | --no-torch] [--profile] [--torch-script PATH] [--python PATH] [--openblas-dir DIR]\n"
               "          [--precision fp32|bf16] [--torch-autocast] [--check-finite] [--device cpu|cuda] [--help]\n"
               "defaults: --config both --threads 2 --steps 10 --warmup 3 --rounds 1 --precision fp32 --device cpu;\n"
               "          with --device cuda: --steps 20 --warmup 5\n"
               "--precision bf16  sinklab's tape in bf16 (bf16 GEMM operands, fp32 sums), sinklab fp32 timed in\n"
               "                  the same rounds for the ratio; on cuda the fused attention takes the tensor-core\n"
               "                  kernels for head sizes 32/64/128 (sm_80+), the float32 SIMT kernels otherwise (the\n"
               "                  configs' head size is printed, and which kernels ran)\n"
               "--torch-autocast  the PyTorch side under torch.autocast(<device>, bfloat16); on cpu its columns\n"
               "                  replace torch fp32's. On cuda, --precision bf16 turns it on, and torch is timed\n"
               "                  both under autocast and in fp32 (one process)\n"
               "--python PATH     the interpreter that runs the PyTorch script (default $SINKLAB_PYTHON, else\n"
               "                  /usr/bin/python3, Debian's, which python3-torch serves)\n"
               "--device cuda     sinklab and PyTorch on the first GPU (needs the CUDA backend; no --profile);\n"
               "                  without a usable GPU it prints the runtime's reason and exits 0\n",
               argv0);
  std::exit(help ? 0 : 2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--help" || k == "-h") usage(argv[0], true);
    if (k == "--config" && has_value) {
      const std::string c = argv[++i];
      if (c == "small") a.configs = {kSmall};
      else if (c == "large") a.configs = {kLarge};
      else if (c == "both") a.configs = {kSmall, kLarge};
      else usage(argv[0]);
    } else if (k == "--threads" && has_value) a.threads = sinklab::bench::positive_int("--threads", argv[++i]);
    else if (k == "--steps" && has_value) {
      a.steps = sinklab::bench::positive_int("--steps", argv[++i]);
      a.steps_given = true;
    } else if (k == "--warmup" && has_value) {
      a.warmup = sinklab::bench::positive_int("--warmup", argv[++i], 0);
      a.warmup_given = true;
    }
    else if (k == "--rounds" && has_value) a.rounds = sinklab::bench::positive_int("--rounds", argv[++i]);
    else if (k == "--torch") a.torch = a.torch_forced = true;
    else if (k == "--no-torch") a.torch = false;
    else if (k == "--profile") a.profile = true;
    else if (k == "--check-finite") a.check_finite = true;
    else if (k == "--torch-autocast") a.torch_autocast = true;
    else if (k == "--torch-script" && has_value) a.torch_script = argv[++i];
    else if (k == "--python" && has_value) a.python = argv[++i];
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
  if (a.device == "cuda") {
    if (a.profile) {
      std::fprintf(stderr, "train_step: --profile is for the cpu device (autodiff::profile times host ops)\n");
      std::exit(2);
    }
    if (!a.steps_given) a.steps = 20;  // a GPU step takes milliseconds: more of them for a steadier median
    if (!a.warmup_given) a.warmup = 5;
    if (a.precision == kernels::Precision::bf16) a.torch_autocast = true;  // bf16 against autocast (and torch fp32)
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
  double loss_end = 0;  // forward-only loss after the warmup + timed training steps (torch; cuda)
  double train_s = 0;   // median seconds per training step
  double fwd_s = 0;     // median seconds per forward-only pass
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

bool torch_available(const Args& a) {
  return std::system((bench::shell_quoted(a.python) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// The PyTorch script's results for one config: float32, and under autocast when asked for.
struct TorchRun {
  std::optional<Result> fp32, autocast;
};

// Runs the PyTorch script for one config: under autocast with --torch-autocast, and in fp32 too
// with `also_fp32` (one process); both empty (with a message) when it fails.
TorchRun run_torch(const ModelSize& s, const Args& a, bool print_info, bool also_fp32 = false) {
  const std::string cmd = torch_env(a) + " " + bench::shell_quoted(a.python) + " " + bench::shell_quoted(a.torch_script) + " --json --config " + s.name +
                          " --threads " + std::to_string(a.threads) + " --steps " + std::to_string(a.steps) +
                          " --warmup " + std::to_string(a.warmup) + (a.torch_autocast ? " --autocast" : "") +
                          (a.torch_autocast && also_fp32 ? " --also-fp32" : "") + " --device " + a.device;
  if (print_info) std::printf("torch command: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    std::fprintf(stderr, "train_step: could not start the PyTorch script\n");
    return {};
  }
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  if (rc != 0) {
    std::fprintf(stderr, "train_step: the PyTorch script failed (status %d); its output:\n%s\n", rc, out.c_str());
    return {};
  }
  TorchRun r;
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
        if (i.contains("gpu"))
          std::printf("torch on %s (CUDA %s), float32 matmuls %s\n", i["gpu"].get<std::string>().c_str(),
                      i.value("cuda", std::string("?")).c_str(),
                      i.value("matmul_tf32", false) ? "in TF32 (allow_tf32 on)" : "in float32 (TF32 off)");
      }
    } else if (j.value("config", "") == s.name) {
      const Result res{j["params"].get<int64_t>(), j["loss0"].get<double>(), j.value("loss_end", std::nan("")),
                       j["train_step_s"].get<double>(), j["fwd_s"].get<double>()};
      (j.value("autocast", false) ? r.autocast : r.fp32) = res;
    }
  }
  if (!(a.torch_autocast ? r.autocast : r.fp32))
    std::fprintf(stderr, "train_step: no result for '%s' in the PyTorch output:\n%s\n", s.name.c_str(), out.c_str());
  return r;
}

// Lets the other side's spinning OpenMP/OpenBLAS threads go to sleep before timing.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

#if defined(SINKLAB_BENCH_CUDA)
// One line of the --device cuda table: one side at one precision, its per-round medians.
struct CudaRow {
  explicit CudaRow(std::string run_, std::string attention_ = "") : run(std::move(run_)), attention(std::move(attention_)) {}
  std::string run;  // "sinklab bf16", "torch autocast", ...
  std::string attention;
  std::vector<double> train_s, fwd_s;
  int64_t params = -1;
  double loss0 = std::nan(""), loss_end = std::nan("");  // of the first round (each round starts afresh)
  bool timed() const { return !train_s.empty(); }
  double train() const { return bench::median_of(train_s); }
  double fwd() const { return bench::median_of(fwd_s); }
  void add(const Result& r) {
    if (!timed()) params = r.params, loss0 = r.loss0, loss_end = r.loss_end;
    train_s.push_back(r.train_s);
    fwd_s.push_back(r.fwd_s);
  }
};

// --device cuda: sinklab's decoder on the GPU beside PyTorch's on the same GPU, per config. With
// --precision bf16, sinklab's fp32 step runs first in each round, then its bf16 step, then the
// script (torch fp32, then torch autocast, in one process); every run builds a fresh model.
int cuda_main(const Args& a) {
  const double begin = bench::now_seconds();
  const bool bf16 = a.precision == kernels::Precision::bf16;
  const std::string prec = kernels::precision_name(a.precision);
  std::printf("train_step --device cuda: %d warmup + %d timed steps per run, %d round(s); sinklab %s%s; torch %s\n",
              a.warmup, a.steps, a.rounds, prec.c_str(), bf16 ? " and fp32" : "",
              !a.torch              ? "not run"
              : a.torch_autocast ? "under torch.autocast(\"cuda\", bfloat16) and in fp32 (eager)"
                                 : "fp32 (eager)");
  struct Done {
    ModelSize size;
    std::vector<CudaRow> rows;  // sinklab at --precision, [sinklab fp32], [torch autocast], torch fp32
  };
  std::vector<Done> done;
  std::string device;
  bool printed_info = false;
  for (const ModelSize& s : a.configs) {
    CudaRow sl{"sinklab " + prec}, sl32{"sinklab fp32"}, tac{"torch autocast", "torch sdpa"}, t32{"torch fp32", "torch sdpa"};
    for (int round = 0; round < a.rounds; ++round) {
      // One sinklab run into `row`; false when there is no GPU.
      auto sinklab = [&](kernels::Precision p, CudaRow& row) {
        const bench::CudaTrainStep r = bench::cuda_train_step(s, a.warmup, a.steps, p);
        if (r.device.empty()) {
          std::printf("train_step --device cuda: no usable GPU (%s); skipped\n", r.why.c_str());
          return false;
        }
        if (device.empty()) std::printf("GPU: %s\n", r.device.c_str());
        device = r.device;
        row.attention = r.tensor_core_attention ? "mma bf16" : "SIMT fp32";
        if (round == 0 && !row.timed() && !sl.timed() && !sl32.timed())  // the config's first run
          std::printf("%s: d_model %lld = %lld heads x d_head %lld, %lld layers, T %lld, batch %lld (%lld tokens/step), "
                      "%lld parameters\n",
                      s.name.c_str(), static_cast<long long>(s.d), static_cast<long long>(s.heads),
                      static_cast<long long>(s.d / s.heads), static_cast<long long>(s.layers),
                      static_cast<long long>(s.T), static_cast<long long>(s.batch),
                      static_cast<long long>(s.batch * s.T), static_cast<long long>(r.params));
        if (round == 0 && p == a.precision) {
          if (r.tensor_core_attention)
            std::printf("%s: the sinklab %s step's attention runs on the bf16 tensor-core kernels (attention_mma.cuh); ",
                        s.name.c_str(), prec.c_str());
          else
            std::printf("%s: the sinklab %s step's attention runs on the float32 SIMT kernels (attention.cuh)%s; ",
                        s.name.c_str(), prec.c_str(),
                        bf16 ? ": the tensor-core kernels take d_head 32, 64 or 128 on sm_80 and later" : "");
          std::printf("its GEMMs are cuBLAS %s\n", bf16 ? "bf16 (fp32 sums)" : "float32 (no TF32)");
        }
        row.add(Result{r.params, r.loss0, r.loss_end, r.train_s, r.fwd_s});
        std::printf("  %s round %d: %-14s train %8.3f ms/step, forward %8.3f ms\n", s.name.c_str(), round + 1,
                    row.run.c_str(), 1e3 * r.train_s, 1e3 * r.fwd_s);
        std::fflush(stdout);
        return true;
      };
      if (bf16 && !sinklab(kernels::Precision::fp32, sl32)) return 0;
      if (!sinklab(a.precision, sl)) return 0;
      if (a.torch) {
        const TorchRun t = run_torch(s, a, !printed_info, /*also_fp32=*/true);
        printed_info = printed_info || t.fp32 || t.autocast;
        for (auto [res, row] : {std::pair{&t.fp32, &t32}, std::pair{&t.autocast, &tac}}) {
          if (!*res) continue;
          row->add(**res);
          std::printf("  %s round %d: %-14s train %8.3f ms/step, forward %8.3f ms\n", s.name.c_str(), round + 1,
                      row->run.c_str(), 1e3 * (*res)->train_s, 1e3 * (*res)->fwd_s);
        }
        std::fflush(stdout);
      }
    }
    Done d{s, {sl}};
    if (bf16) d.rows.push_back(sl32);
    if (tac.timed()) d.rows.push_back(tac);
    if (t32.timed()) d.rows.push_back(t32);
    done.push_back(std::move(d));
  }

  // The reference a row's speed is given against: torch under autocast when it ran, else torch fp32.
  std::printf("\nGPU %s; ms: the median over %d round(s) of each run's median step (%d timed after %d warmup)\n"
              "xref: the reference's step time over the row's (> 1: the row is faster); the reference is torch "
              "autocast where it ran, else torch fp32\n"
              "loss0, loss after: forward-only, before training and after the %d training steps on the run's one batch\n",
              device.c_str(), a.rounds, a.steps, a.warmup, a.warmup + a.steps);
  std::printf("%-6s %-15s %-10s %9s %12s %9s %12s %10s %9s %8s %10s\n", "config", "run", "attention", "train ms",
              "train tok/s", "fwd ms", "fwd tok/s", "train xref", "fwd xref", "loss0", "loss after");
  for (const Done& d : done) {
    const double tokens = static_cast<double>(d.size.batch * d.size.T);
    const CudaRow* ref = nullptr;
    for (const CudaRow& r : d.rows)
      if (!ref && r.run.rfind("torch", 0) == 0) ref = &r;  // autocast comes before fp32 in rows
    for (const CudaRow& r : d.rows) {
      std::printf("%-6s %-15s %-10s %9.3f %12.0f %9.3f %12.0f", d.size.name.c_str(), r.run.c_str(), r.attention.c_str(),
                  1e3 * r.train(), tokens / r.train(), 1e3 * r.fwd(), tokens / r.fwd());
      if (ref)
        std::printf(" %9.2fx %8.2fx", ref->train() / r.train(), ref->fwd() / r.fwd());
      else
        std::printf(" %10s %9s", "-", "-");
      std::printf(" %8.4f %10.4f\n", r.loss0, r.loss_end);
    }
  }
  std::printf("\n");
  for (const Done& d : done) {
    const CudaRow& sl = d.rows.front();
    auto find = [&](const std::string& run) -> const CudaRow* {
      for (const CudaRow& r : d.rows)
        if (r.run == run) return &r;
      return nullptr;
    };
    const CudaRow *sl32 = bf16 ? find("sinklab fp32") : nullptr, *tac = find("torch autocast"), *t32 = find("torch fp32");
    auto ratio = [&](const char* what, const CudaRow& num, const CudaRow& den) {
      std::printf("%s: %s over %s: train %.2fx, forward %.2fx\n", d.size.name.c_str(), what, den.run.c_str(),
                  den.train() / num.train(), den.fwd() / num.fwd());
    };
    if (tac) ratio(sl.run.c_str(), sl, *tac);
    if (t32) ratio(sl.run.c_str(), sl, *t32);
    if (sl32) ratio(sl.run.c_str(), sl, *sl32);
    if (tac && t32) ratio("torch autocast", *tac, *t32);
    if (sl32 || (tac && t32)) {
      std::printf("%s: loss after %d steps, bf16 minus fp32:", d.size.name.c_str(), a.warmup + a.steps);
      if (sl32) std::printf(" sinklab %+.4f (%.4f vs %.4f)", sl.loss_end - sl32->loss_end, sl.loss_end, sl32->loss_end);
      if (tac && t32)
        std::printf("%s torch autocast %+.4f (%.4f vs %.4f)", sl32 ? "," : "", tac->loss_end - t32->loss_end,
                    tac->loss_end, t32->loss_end);
      std::printf("%s\n", sl32 && tac && t32 ? " (sinklab and torch start from different random numbers)" : "");
    }
    for (const CudaRow* t : {tac, t32})
      if (t && t->params != sl.params)
        std::printf("  WARNING: %s: parameter counts differ: sinklab %lld, %s %lld\n", d.size.name.c_str(),
                    static_cast<long long>(sl.params), t->run.c_str(), static_cast<long long>(t->params));
  }
  std::printf("whole run: %.0f s\n", bench::now_seconds() - begin);
  return 0;
}
#endif

}  // namespace

static int bench_main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.device == "cuda") {
#if defined(SINKLAB_BENCH_CUDA)
    if (a.torch && !a.torch_forced && !torch_available(a)) {
      std::printf("train_step: %s cannot import torch; running sinklab alone\n", a.python.c_str());
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
  if (a.torch && !a.torch_forced && !torch_available(a)) {
    std::printf("train_step: %s cannot import torch; running sinklab alone\n", a.python.c_str());
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
        const TorchRun tr = run_torch(s, a, !printed_info);
        if (const std::optional<Result>& t = a.torch_autocast ? tr.autocast : tr.fp32) {
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
