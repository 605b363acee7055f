// Attention kernels: forward+backward time of every score policy relative to plain softmax in
// the same run, fused vs materialised and fused with bf16 products vs fp32 ones, at d_head 64
// (--d-head) and T ∈ {128, 512, 2048} (causal, float); bytes allocated by each path vs T; and the
// block inner product as a small GEMM vs an xsimd dot loop. `attention --help` lists the flags.
//
// --device cuda times the CUDA kernels instead (bench/attention_cuda.cu; needs a build with the
// CUDA backend and a GPU): causal attention at B=4, H=16, d_head 64 and 128, T 512–8192, forward
// and backward: the tensor-core kernels (cuda/include/sinklab/cuda/attention_mma.cuh) on bf16
// codes for every score family and on fp16 codes for softmax, the conversion to codes on its
// own, next to PyTorch's scaled_dot_product_attention on the same GPU (bench/attention_torch.py:
// its float32 kernel and FlashAttention-2 in bf16) when the Python given by --python imports
// torch; with --simt also the float32 SIMT kernels (attention.cuh) at T ≤ 2048. Markdown tables
// on stdout, every number as JSON with --json PATH.
#include "bench_common.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cpu/isa.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sinklab/core/rng.hpp"

#if defined(SINKLAB_BENCH_CUDA)
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "attention_cuda.hpp"
#endif

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
void fwd_bwd(const Score& score, const Inputs& x, bool fused, kernels::Precision precision = kernels::Precision::fp32) {
  const auto params = score.template make_params<float>(x.q.size(1));
  const mask::Causal causal;
  if (fused) {
    AttentionOptions opt;
    opt.precision = precision;
    auto f = attention_fused_forward(score, causal, x.q, x.k, x.v, params, opt);
    auto g = attention_fused_backward(score, causal, x.q, x.k, x.v, params, f, x.dout, opt);
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

#if defined(SINKLAB_BENCH_CUDA)
// Causal attention FLOPs (QKᵀ and PV over the visible half), and FlashAttention's convention that
// the backward does 2.5× the forward's.
double causal_flops(int64_t B, int64_t H, int64_t T, int64_t d) { return 2.0 * B * H * T * T * d; }

struct CudaOptions {
  bool torch = true, simt = false;
  int64_t B = 4, H = 16, simt_max_T = 2048;
  std::vector<int64_t> ds{64, 128}, Ts{512, 1024, 2048, 4096, 8192};
  bench::CudaTimingBudget budget;
  std::string python, script, json;
};

// PyTorch's figures: (mode, d, T) → forward, backward ms.
using TorchRef = std::map<std::tuple<std::string, int64_t, int64_t>, std::pair<double, double>>;

TorchRef torch_reference(const CudaOptions& o, nlohmann::json& log) {
  TorchRef ref;
  std::string cmd = bench::shell_quoted(o.python) + " " + bench::shell_quoted(o.script) + " --batch " +
                    std::to_string(o.B) + " --heads " + std::to_string(o.H) + " --budget " +
                    std::to_string(o.budget.budget_s) + " --reps " + std::to_string(o.budget.max_reps) + " --d";
  // append(), not += " " + std::to_string(): GCC 12 warns falsely of that (-Wrestrict)
  for (int64_t d : o.ds) cmd.append(" ").append(std::to_string(d));
  cmd += " --T";
  for (int64_t T : o.Ts) cmd.append(" ").append(std::to_string(T));
  std::printf("torch command: %s\n", cmd.c_str());
  log["command"] = cmd;
  log["results"] = nlohmann::json::array();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    std::printf("torch reference: could not start the command; sinklab alone\n");
    return ref;
  }
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("torch")) {
      std::printf("torch %s on %s\n", j["torch"].get<std::string>().c_str(), j["device"].get<std::string>().c_str());
      log["torch"] = j["torch"], log["device"] = j["device"];
    } else if (j.contains("error")) {
      std::printf("torch %s d=%lld T=%lld failed: %s\n", j["mode"].get<std::string>().c_str(),
                  (long long)j["d"].get<int64_t>(), (long long)j["T"].get<int64_t>(),
                  j["error"].get<std::string>().c_str());
      log["results"].push_back(j);
    } else if (j.contains("forward_ms")) {
      ref[{j["mode"].get<std::string>(), j.value("d", int64_t{64}), j["T"].get<int64_t>()}] = {
          j["forward_ms"].get<double>(), j["backward_ms"].get<double>()};
      log["results"].push_back(j);
    }
  }
  if (pclose(p) != 0 || ref.empty()) std::printf("torch reference failed or unavailable (its message is above); sinklab alone\n");
  return ref;
}

// A time in ms, or – where there is none.
std::string ms_or_dash(double ms) {
  if (!(ms > 0)) return "–";
  char b[32];
  std::snprintf(b, sizeof b, ms < 0.1 ? "%.4f" : "%.3f", ms);
  return b;
}
std::string ratio_or_dash(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "–";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", num / den);
  return b;
}
std::string diff_or_dash(double x) {
  if (std::isnan(x)) return "NaN/Inf";
  if (x < 0) return "–";
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", x);
  return b;
}

// The page's names of the score policies (Score::name → label).
std::string score_label(const std::string& name, const std::string& elem) {
  std::string l = name == "softmax"           ? "softmax"
                  : name == "softmax_sink"    ? "softmax + sink"
                  : name == "clipped_softmax" ? "clipped softmax"
                  : name == "sigmoid"         ? "sigmoid (b = -log n)"
                  : name == "relu"            ? "ReLU / n"
                                              : name;
  return elem == "bf16" ? l : l + ", " + elem;
}

void print_mma(const CudaOptions& o, int sms, const bench::CudaMmaRun& run, const TorchRef& ref) {
  auto find = [&](const std::string& score, const std::string& elem, int64_t d, int64_t T) -> const bench::CudaMmaTiming* {
    for (const auto& t : run.timings)
      if (t.score == score && t.elem == elem && t.d == d && t.T == T) return &t;
    return nullptr;
  };
  auto torch_ms = [&](const char* mode, int64_t d, int64_t T) {
    const auto it = ref.find({mode, d, T});
    return it == ref.end() ? std::pair{0.0, 0.0} : it->second;
  };
  std::vector<int64_t> ds;
  for (const auto& s : run.shapes)
    if (std::find(ds.begin(), ds.end(), s.d) == ds.end()) ds.push_back(s.d);

  if (!run.shapes.empty()) {  // enough blocks to fill the GPU at the shortest T?
    const int64_t T0 = run.shapes.front().T;
    std::printf("\ntensor-core forward grid at T = %lld:", (long long)T0);
    for (const auto& s : run.shapes)
      if (s.T == T0)
        std::printf(" d_head %lld: %lld blocks of %lld query rows (%.1f per SM);", (long long)s.d,
                    (long long)s.forward_blocks, (long long)s.block_rows, double(s.forward_blocks) / sms);
    std::printf("\n");
  }
  for (int64_t d : ds) {
    std::printf("\nTensor-core kernels, bf16, softmax, d_head %lld, against PyTorch; TFLOP/s counts the causal half, "
                "backward 2.5x\n",
                (long long)d);
    std::printf("| T | fwd ms | fwd TFLOP/s | torch fp32 fwd ms | FA2 bf16 fwd ms | FA2 / ours, fwd | bwd ms | bwd TFLOP/s |"
                " torch fp32 bwd ms | FA2 bf16 bwd ms | FA2 / ours, bwd |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int64_t T : o.Ts) {
      const auto* t = find("softmax", "bf16", d, T);
      if (!t) continue;
      const double f = causal_flops(o.B, o.H, T, d);
      const auto fp = torch_ms("fp32", d, T), fa = torch_ms("fa2", d, T);
      std::printf("| %lld | %s | %.1f | %s | %s | %s | %s | %.1f | %s | %s | %s |\n", (long long)T,
                  ms_or_dash(t->forward_ms).c_str(), f / t->forward_ms * 1e-9, ms_or_dash(fp.first).c_str(),
                  ms_or_dash(fa.first).c_str(), ratio_or_dash(fa.first, t->forward_ms).c_str(),
                  ms_or_dash(t->backward_ms).c_str(), 2.5 * f / t->backward_ms * 1e-9, ms_or_dash(fp.second).c_str(),
                  ms_or_dash(fa.second).c_str(), ratio_or_dash(fa.second, t->backward_ms).c_str());
    }
  }

  std::vector<std::pair<std::string, std::string>> scores;  // (name, elem) in the order timed
  for (const auto& t : run.timings)
    if (std::find(scores.begin(), scores.end(), std::pair{t.score, t.elem}) == scores.end())
      scores.emplace_back(t.score, t.elem);
  auto header = [&](const char* first) {
    std::printf("| %s | d_head |", first);
    for (int64_t T : o.Ts) std::printf(" T = %lld |", (long long)T);
    std::printf("\n|---|---:|");
    for (std::size_t i = 0; i < o.Ts.size(); ++i) std::printf("---:|");
    std::printf("\n");
  };
  // One table: a row per (d_head, score), a column per T, cell(score, elem, d, T) in each.
  auto table = [&](const char* title, auto cell) {
    std::printf("\n%s\n", title);
    header("score");
    for (int64_t d : ds)
      for (const auto& [score, elem] : scores) {
        std::printf("| %s | %lld |", score_label(score, elem).c_str(), (long long)d);
        for (int64_t T : o.Ts) std::printf(" %s |", cell(score, elem, d, T).c_str());
        std::printf("\n");
      }
  };
  table("Every score family, tensor-core kernels: forward + backward time over bf16 softmax's",
        [&](const std::string& score, const std::string& elem, int64_t d, int64_t T) -> std::string {
          const auto *t = find(score, elem, d, T), *s = find("softmax", "bf16", d, T);
          return t && s ? ratio_or_dash(t->forward_ms + t->backward_ms, s->forward_ms + s->backward_ms) : "–";
        });
  table("Every score family, tensor-core kernels: forward / backward ms",
        [&](const std::string& score, const std::string& elem, int64_t d, int64_t T) -> std::string {
          const auto* t = find(score, elem, d, T);
          return t ? ms_or_dash(t->forward_ms) + " / " + ms_or_dash(t->backward_ms) : "–";
        });

  std::printf("\nq, k, v, dO to bf16 codes (four attention_mma_codes calls, once per shape; not in the times above)\n"
              "| d_head | T | codes ms | GB/s (4 B read + 2 B written per element) | codes / softmax fwd+bwd |\n"
              "|---:|---:|---:|---:|---:|\n");
  for (const auto& s : run.shapes) {
    const auto* t = find("softmax", "bf16", s.d, s.T);
    const double bytes = 4.0 * o.B * o.H * s.T * s.d * 6.0;
    std::printf("| %lld | %lld | %s | %.0f | %s |\n", (long long)s.d, (long long)s.T, ms_or_dash(s.codes_ms).c_str(),
                bytes / s.codes_ms * 1e-6, t ? ratio_or_dash(s.codes_ms, t->forward_ms + t->backward_ms).c_str() : "–");
  }
  bool checked = false;
  for (const auto& s : run.shapes) checked = checked || s.out_diff >= 0 || std::isnan(s.out_diff);
  if (checked) {
    std::printf("\nSoftmax, tensor-core kernels (bf16 codes of the inputs) against the float32 SIMT kernels (the float "
                "inputs): max |x - ref| / max |ref|\n| d_head | T | out | dq | dk | dv |\n|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& s : run.shapes)
      if (s.out_diff >= 0 || std::isnan(s.out_diff))
        std::printf("| %lld | %lld | %s | %s | %s | %s |\n", (long long)s.d, (long long)s.T, diff_or_dash(s.out_diff).c_str(),
                    diff_or_dash(s.dq_diff).c_str(), diff_or_dash(s.dk_diff).c_str(), diff_or_dash(s.dv_diff).c_str());
  }
}

void print_simt(const CudaOptions& o, int64_t d, const bench::CudaAttentionRun& run, const TorchRef& ref) {
  std::printf("\nFloat32 SIMT kernels, d_head %lld: softmax under each launch configuration (out and dq compared with the "
              "first configuration's)\n| threads | block_k | T | forward ms | backward ms | out rel. diff | dq rel. diff |\n"
              "|---:|---:|---:|---:|---:|---:|---:|\n",
              (long long)d);
  for (const auto& t : run.launches)
    std::printf("| %d | %lld | %lld | %.3f | %.3f | %.1e | %.1e |\n", t.threads, (long long)t.block_k, (long long)t.T,
                t.forward_ms, t.backward_ms, t.out_diff, t.dq_diff);
  if (run.scores.empty()) return;
  const auto& best = run.scores.front();
  std::printf("\nFloat32 SIMT kernels, softmax (threads %d, block_k %lld), d_head %lld, against PyTorch\n", best.threads,
              (long long)best.block_k, (long long)d);
  std::printf("| T | fwd ms | fwd TFLOP/s | torch fp32 fwd ms | FA2 bf16 fwd ms | FA2 / ours, fwd | bwd ms | bwd TFLOP/s |"
              " torch fp32 bwd ms | FA2 bf16 bwd ms | FA2 / ours, bwd |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& t : run.scores) {
    if (t.score != best.score) continue;
    const double f = causal_flops(o.B, o.H, t.T, d);
    const auto it_fp = ref.find({"fp32", d, t.T}), it_fa = ref.find({"fa2", d, t.T});
    const auto fp = it_fp == ref.end() ? std::pair{0.0, 0.0} : it_fp->second;
    const auto fa = it_fa == ref.end() ? std::pair{0.0, 0.0} : it_fa->second;
    std::printf("| %lld | %.3f | %.2f | %s | %s | %s | %.3f | %.2f | %s | %s | %s |\n", (long long)t.T, t.forward_ms,
                f / t.forward_ms * 1e-9, ms_or_dash(fp.first).c_str(), ms_or_dash(fa.first).c_str(),
                ratio_or_dash(fa.first, t.forward_ms).c_str(), t.backward_ms, 2.5 * f / t.backward_ms * 1e-9,
                ms_or_dash(fp.second).c_str(), ms_or_dash(fa.second).c_str(), ratio_or_dash(fa.second, t.backward_ms).c_str());
  }
  std::printf("\nFloat32 SIMT kernels, every score family, same configuration\n| score | T | fwd ms | bwd ms | fwd+bwd / softmax |\n"
              "|---|---:|---:|---:|---:|\n");
  double softmax_total = 0;
  for (const auto& t : run.scores) {
    if (t.score == best.score) softmax_total = t.forward_ms + t.backward_ms;
    std::printf("| %s | %lld | %.3f | %.3f | %.2f |\n", score_label(t.score, "bf16").c_str(), (long long)t.T, t.forward_ms,
                t.backward_ms, (t.forward_ms + t.backward_ms) / softmax_total);
  }
}

int cuda_main(const CudaOptions& o) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped part-way keeps the lines printed so far
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const bench::CudaDeviceInfo dev = bench::cuda_device_info();
  if (dev.name.empty()) {
    std::printf("attention --device cuda: no usable GPU (%s); skipped\n", dev.why.c_str());
    return 77;
  }
  const int64_t T0 = *std::min_element(o.Ts.begin(), o.Ts.end());
  std::printf("attention on %s (%d SMs): causal, B=%lld H=%lld, d_head", dev.name.c_str(), dev.sms, (long long)o.B,
              (long long)o.H);
  for (int64_t d : o.ds) std::printf(" %lld", (long long)d);
  std::printf(", T");
  for (int64_t T : o.Ts) std::printf(" %lld", (long long)T);
  std::printf("\n");
  std::printf("timing: CUDA events, median of the timed calls after %d warm-ups; timed calls go on until they add up to "
              "%.2f s (at least %d, at most %d)\n",
              o.budget.warmups, o.budget.budget_s, o.budget.min_reps, o.budget.max_reps);

  nlohmann::json out;
  out["device"] = dev.name;
  out["sms"] = dev.sms;
  out["config"] = {{"B", o.B}, {"H", o.H}, {"d_head", o.ds}, {"T", o.Ts}, {"mask", "causal"},
                   {"budget_s", o.budget.budget_s}, {"min_reps", o.budget.min_reps},
                   {"max_reps", o.budget.max_reps}, {"warmups", o.budget.warmups}};
  out["flops"] = "forward 2*B*H*T^2*d (the causal half of QK^T and PV), backward 2.5x the forward's";

  TorchRef ref;
  if (o.torch) {
    nlohmann::json tj;
    ref = torch_reference(o, tj);
    out["torch"] = tj;
    std::printf("(%.0f s)\n", elapsed());
  }

  const bench::CudaMmaRun mma = bench::cuda_mma_timings(o.B, o.H, o.ds, o.Ts, o.budget, T0);
  for (int64_t d : mma.unsupported_d)
    std::printf("\nd_head %lld: attention_mma_supports says no; the tensor-core kernels are not timed there\n", (long long)d);
  print_mma(o, dev.sms, mma, ref);
  std::printf("(%.0f s)\n", elapsed());
  out["mma"]["unsupported_d_head"] = mma.unsupported_d;
  out["mma"]["timings"] = nlohmann::json::array();
  for (const auto& t : mma.timings) {
    const double f = causal_flops(o.B, o.H, t.T, t.d);
    out["mma"]["timings"].push_back({{"score", t.score}, {"elem", t.elem}, {"d_head", t.d}, {"T", t.T},
                                     {"forward_ms", t.forward_ms}, {"backward_ms", t.backward_ms},
                                     {"forward_tflops", f / t.forward_ms * 1e-9},
                                     {"backward_tflops", 2.5 * f / t.backward_ms * 1e-9},
                                     {"forward_reps", t.forward_reps}, {"backward_reps", t.backward_reps}});
  }
  out["mma"]["shapes"] = nlohmann::json::array();
  for (const auto& s : mma.shapes) {
    nlohmann::json j{{"d_head", s.d}, {"T", s.T}, {"codes_ms", s.codes_ms}, {"forward_blocks", s.forward_blocks},
                     {"block_rows", s.block_rows}};
    if (s.out_diff >= 0 || std::isnan(s.out_diff))  // NaN: not finite (JSON writes null)
      j["vs_simt_fp32"] = {{"out", s.out_diff}, {"dq", s.dq_diff}, {"dk", s.dk_diff}, {"dv", s.dv_diff}};
    out["mma"]["shapes"].push_back(j);
  }

  if (o.simt) {
    const int64_t d = std::find(o.ds.begin(), o.ds.end(), 64) != o.ds.end() ? 64 : o.ds.front();
    std::vector<int64_t> Ts;
    for (int64_t T : o.Ts)
      if (T <= o.simt_max_T) Ts.push_back(T);
    if (Ts.empty()) {
      std::printf("\n--simt: no T of the list is <= %lld; the SIMT kernels are not timed\n", (long long)o.simt_max_T);
    } else {
      const bench::CudaAttentionRun simt = bench::cuda_attention_timings(o.B, o.H, d, Ts, o.budget);
      print_simt(o, d, simt, ref);
      std::printf("(%.0f s)\n", elapsed());
      auto rows = [](const std::vector<bench::CudaAttentionTiming>& v) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& t : v)
          a.push_back({{"score", t.score}, {"T", t.T}, {"threads", t.threads}, {"block_k", t.block_k},
                       {"forward_ms", t.forward_ms}, {"backward_ms", t.backward_ms}, {"out_diff", t.out_diff},
                       {"dq_diff", t.dq_diff}});
        return a;
      };
      out["simt_fp32"] = {{"d_head", d}, {"launches", rows(simt.launches)}, {"scores", rows(simt.scores)}};
    }
  }
  out["seconds"] = elapsed();
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
    if (!f) throw std::runtime_error("--json: could not write '" + o.json + "'");
    std::printf("numbers written to %s\n", o.json.c_str());
  }
  std::printf("bench time %.0f s\n", elapsed());
  return 0;
}
#endif

}  // namespace

// Comma-separated positive integers ("64,128").
static std::vector<int64_t> int_list(const char* flag, const std::string& value) {
  std::vector<int64_t> v;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = value.find(',', at);
    v.push_back(sinklab::bench::positive_int(flag, value.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

const char* const kUsage =
    "usage: attention [options]\n"
    "  --device cpu|cuda    what to time (default cpu)\n"
    "  --quick              a short run (cpu: T 64, 128; cuda: d_head 64, T 512, 1024, 0.05 s per measurement)\n"
    "  --d-head N[,N...]    head sizes (default: cpu 64, one only; cuda 64,128)\n"
    "  --threads N          cpu: worker threads (default: OMP_NUM_THREADS, else all cores)\n"
    "cuda (causal; the tensor-core kernels in bf16, softmax also in fp16, next to PyTorch's SDPA):\n"
    "  --T N[,N...]         sequence lengths (default 512,1024,2048,4096,8192)\n"
    "  --batch N            batch (default 4)\n"
    "  --heads N            heads (default 16)\n"
    "  --budget S           seconds of timed calls per measurement, at least 3 and at most --max-reps calls,\n"
    "                       after 2 warm-ups (default 0.3)\n"
    "  --max-reps N         (default 100)\n"
    "  --simt               also time the float32 SIMT kernels (launch configurations, every score) at d_head 64,\n"
    "                       for the T of the list up to --simt-max-t (default: off)\n"
    "  --simt-max-t N       (default 2048)\n"
    "  --no-torch           without PyTorch's reference\n"
    "  --python PATH        the interpreter that runs the reference (default $SINKLAB_PYTHON, else python3)\n"
    "  --torch-script PATH  (default bench/attention_torch.py of the source tree)\n"
    "  --json PATH          also write every number to PATH as JSON\n"
    "  --help               this text\n"
    "Without a usable GPU, --device cuda prints the runtime's reason and exits 77.\n";

static int bench_main(int argc, char** argv) {
  bool quick = false, torch = true, simt = false;
  std::string d_list, T_list, json, device = "cpu";
  std::string python = std::getenv("SINKLAB_PYTHON") ? std::getenv("SINKLAB_PYTHON") : "python3";
  int64_t batch = 4, heads = 16, simt_max_T = 2048, max_reps = 100;
  double budget_s = -1;
  std::vector<std::string> cuda_flags;  // given, but only meaningful with --device cuda
#if defined(SINKLAB_BENCH_CUDA)
  std::string torch_script = SINKLAB_BENCH_SOURCE_DIR "/attention_torch.py";
#else
  std::string torch_script;
#endif
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--no-torch") {
      torch = false;
    } else if (a == "--simt") {
      simt = true, cuda_flags.push_back(a);
    } else if (a == "--python" && has_value) {
      python = argv[++i];
    } else if (a == "--torch-script" && has_value) {
      torch_script = argv[++i];
    } else if (a == "--device" && has_value) {
      device = argv[++i];
    } else if (a == "--d-head" && has_value) {
      d_list = argv[++i];
    } else if (a == "--T" && has_value) {
      T_list = argv[++i], cuda_flags.push_back(a);
    } else if (a == "--batch" && has_value) {
      batch = sinklab::bench::positive_int("--batch", argv[++i]), cuda_flags.push_back(a);
    } else if (a == "--heads" && has_value) {
      heads = sinklab::bench::positive_int("--heads", argv[++i]), cuda_flags.push_back(a);
    } else if (a == "--budget" && has_value) {
      budget_s = sinklab::bench::positive_number("--budget", argv[++i]), cuda_flags.push_back(a);
    } else if (a == "--max-reps" && has_value) {
      max_reps = sinklab::bench::positive_int("--max-reps", argv[++i], 3), cuda_flags.push_back(a);
    } else if (a == "--simt-max-t" && has_value) {
      simt_max_T = sinklab::bench::positive_int("--simt-max-t", argv[++i]), cuda_flags.push_back(a);
    } else if (a == "--json" && has_value) {
      json = argv[++i], cuda_flags.push_back(a);
    } else if (a == "--threads" && has_value) {
      set_num_threads(sinklab::bench::positive_int("--threads", argv[++i]));
    } else {
      throw std::invalid_argument("unknown flag or missing value: '" + a + "'\n" + kUsage);
    }
  }
  if (device == "cuda") {
#if defined(SINKLAB_BENCH_CUDA)
    CudaOptions o;
    o.torch = torch, o.simt = simt, o.B = batch, o.H = heads, o.simt_max_T = simt_max_T;
    o.python = python, o.script = torch_script, o.json = json;
    if (quick) o.ds = {64}, o.Ts = {512, 1024}, o.budget.budget_s = 0.05;
    if (!d_list.empty()) o.ds = int_list("--d-head", d_list);
    if (!T_list.empty()) o.Ts = int_list("--T", T_list);
    if (budget_s > 0) o.budget.budget_s = budget_s;
    o.budget.max_reps = static_cast<int>(max_reps);
    return cuda_main(o);
#else
    throw std::invalid_argument("--device cuda: this build has no CUDA backend (configure with the CUDA Toolkit and SINKLAB_CUDA=ON)");
#endif
  }
  if (!cuda_flags.empty()) throw std::invalid_argument(cuda_flags.front() + " is a flag of --device cuda");
  const std::vector<int64_t> d_heads = d_list.empty() ? std::vector<int64_t>{64} : int_list("--d-head", d_list);
  if (d_heads.size() != 1) throw std::invalid_argument("--d-head: the cpu benchmark takes one head size");
  const int64_t d = d_heads.front();
  if (device != "cpu") throw std::invalid_argument("--device '" + device + "': expected cpu or cuda");
  const int64_t B = 1, H = 4;
  const std::vector<int64_t> Ts = quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{128, 512, 2048};
  const double budget = quick ? 0.05 : 0.4;
  std::printf("attention fwd+bwd, causal, float, B=%lld H=%lld d_head=%lld, threads=%d, load average %.2f\n",
              (long long)B, (long long)H, (long long)d, num_threads(), load_average());

  struct Row {
    std::string name;
    std::vector<double> fused, mat, bf16;
  };
  std::vector<Row> rows;
  auto bench_score = [&](const char* name, const auto& score) {
    Row r{name, {}, {}, {}};
    for (int64_t T : Ts) {
      const Inputs x = make_inputs(B, H, T, d);
      r.fused.push_back(median_seconds([&] { fwd_bwd(score, x, true); }, budget));
      r.mat.push_back(median_seconds([&] { fwd_bwd(score, x, false); }, budget));
      r.bf16.push_back(median_seconds([&] { fwd_bwd(score, x, true, kernels::Precision::bf16); }, budget));
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

  std::printf("\nbf16 columns: the fused kernels' products in bf16 (%s)\n", kernel_isa().summary().c_str());
  std::printf(
      "\n| score | T | fused ms | fused / softmax fused | materialised ms | materialised / fused | fused bf16 ms | "
      "fused / fused bf16 |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t t = 0; t < Ts.size(); ++t)
    for (const Row& r : rows)
      std::printf("| %s | %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name.c_str(), (long long)Ts[t],
                  1e3 * r.fused[t], r.fused[t] / rows[0].fused[t], 1e3 * r.mat[t], r.mat[t] / r.fused[t],
                  1e3 * r.bf16[t], r.fused[t] / r.bf16[t]);

  std::printf("\nbytes allocated by one fwd+bwd (outputs + peak scratch), softmax\n");
  std::printf(
      "| T | fused MiB | fused bytes / T | materialised MiB | materialised bytes / T |\n|---:|---:|---:|---:|---:|\n");
  for (int64_t T : Ts) {
    const Inputs x = make_inputs(B, H, T, d);
    const int64_t f = peak_bytes(score::Softmax{}, x, true), m = peak_bytes(score::Softmax{}, x, false);
    std::printf("| %lld | %.2f | %lld | %.2f | %lld |\n", (long long)T, f / 1048576.0, (long long)(f / T),
                m / 1048576.0, (long long)(m / T));
  }

  // The inner product of a 64×64 block pair over d: one small GEMM vs 4096 xsimd dots.
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
    std::printf("\nblock logits 64x64x%lld: GEMM %.2f us, xsimd dot loop %.2f us (loop / GEMM = %.2f)\n", (long long)d,
                1e6 * tg / reps, 1e6 * tl / reps, tl / tg);
    set_num_threads(threads);
  }
  std::printf("load average at the end %.2f\n", load_average());
  return 0;
}

int main(int argc, char** argv) {
  return sinklab::bench::guarded_main("attention", [&] { return bench_main(argc, argv); });
}
