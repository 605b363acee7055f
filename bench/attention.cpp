// Attention kernels: forward+backward time of every score policy relative to plain softmax in
// the same run, fused vs materialised and fused with bf16 products vs fp32 ones, at d_head 64
// (--d-head) and T ∈ {128, 512, 2048} (causal, float); bytes allocated by each path vs T; and the
// block inner product as a small GEMM vs an xsimd dot loop.
// Usage: attention [--quick] [--threads N] [--d-head N] [--device cpu|cuda] [--no-torch] [--python PATH]
//                  [--torch-script PATH]
//
// --device cuda times the CUDA kernels instead (bench/attention_cuda.cu; needs a build with the
// CUDA backend and a GPU): causal float attention at B=4, H=16, d_head 64, T 512–4096, forward and
// backward, softmax under several launch configurations and every score family under the best,
// next to PyTorch's scaled_dot_product_attention on the same GPU (bench/attention_torch.py: its
// float32 kernel and FlashAttention-2 in bf16) when the Python given by --python imports torch.
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
#include <map>
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

int cuda_main(bool quick, bool torch, const std::string& python, const std::string& script) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped part-way keeps the lines printed so far
  const int64_t B = 4, H = 16, d = 64;
  const std::vector<int64_t> Ts = quick ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{512, 1024, 2048, 4096};
  const int reps = quick ? 5 : 20;
  const bench::CudaAttentionRun run = bench::cuda_attention_timings(B, H, d, Ts, reps);
  if (run.device.empty()) {
    std::printf("attention --device cuda: no usable GPU (%s); skipped\n", run.why.c_str());
    return 77;
  }
  std::printf("attention on %s: causal, float, B=%lld H=%lld d_head=%lld, median of %d (CUDA events)\n",
              run.device.c_str(), (long long)B, (long long)H, (long long)d, reps);

  std::map<std::pair<std::string, int64_t>, std::pair<double, double>> ref;  // (mode, T) → fwd, bwd ms
  if (torch) {
    std::string cmd = bench::shell_quoted(python) + " " + bench::shell_quoted(script) +
                      " --batch " + std::to_string(B) + " --heads " + std::to_string(H) + " --d " + std::to_string(d) +
                      " --reps " + std::to_string(reps) + " --T";
    for (int64_t T : Ts) cmd += " " + std::to_string(T);
    std::printf("torch command: %s\n", cmd.c_str());
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char line[4096];
      while (std::fgets(line, sizeof line, p)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) continue;
        if (j.contains("torch"))
          std::printf("torch %s on %s\n", j["torch"].get<std::string>().c_str(), j["device"].get<std::string>().c_str());
        else
          ref[{j["mode"].get<std::string>(), j["T"].get<int64_t>()}] = {j["forward_ms"].get<double>(),
                                                                         j["backward_ms"].get<double>()};
      }
      if (pclose(p) != 0 || ref.empty()) std::printf("torch reference failed or unavailable; sinklab alone\n");
    }
  }

  std::printf("\nsoftmax under each launch configuration (out and dq compared with the first configuration's)\n"
              "| threads | block_k | T | forward ms | backward ms | out rel. diff | dq rel. diff |\n"
              "|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& t : run.launches)
    std::printf("| %d | %lld | %lld | %.3f | %.3f | %.1e | %.1e |\n", t.threads, (long long)t.block_k, (long long)t.T,
                t.forward_ms, t.backward_ms, t.out_diff, t.dq_diff);

  const auto& best = run.scores.front();
  std::printf("\nsoftmax (threads %d, block_k %lld) against PyTorch; TFLOP/s counts the causal half, backward 2.5x\n",
              best.threads, (long long)best.block_k);
  std::printf("| T | fwd ms | fwd TFLOP/s | torch fp32 fwd ms | FA2 bf16 fwd ms | FA2 fwd / ours | bwd ms | bwd TFLOP/s |"
              " torch fp32 bwd ms | FA2 bf16 bwd ms | FA2 bwd / ours |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& t : run.scores) {
    if (t.score != run.scores.front().score) continue;
    const double f = causal_flops(B, H, t.T, d);
    const auto fp = ref.count({"fp32", t.T}) ? ref[{"fp32", t.T}] : std::pair{0.0, 0.0};
    const auto fa = ref.count({"fa2", t.T}) ? ref[{"fa2", t.T}] : std::pair{0.0, 0.0};
    std::printf("| %lld | %.3f | %.2f | %.3f | %.3f | %.3f | %.3f | %.2f | %.3f | %.3f | %.3f |\n", (long long)t.T,
                t.forward_ms, f / t.forward_ms * 1e-9, fp.first, fa.first, fa.first / t.forward_ms, t.backward_ms,
                2.5 * f / t.backward_ms * 1e-9, fp.second, fa.second, fa.second / t.backward_ms);
  }

  std::printf("\nevery score family, same configuration\n| score | T | fwd ms | bwd ms | fwd+bwd / softmax |\n"
              "|---|---:|---:|---:|---:|\n");
  double softmax_total = 0;
  for (const auto& t : run.scores) {
    if (t.score == run.scores.front().score) softmax_total = t.forward_ms + t.backward_ms;
    std::printf("| %s | %lld | %.3f | %.3f | %.2f |\n", t.score.c_str(), (long long)t.T, t.forward_ms, t.backward_ms,
                (t.forward_ms + t.backward_ms) / softmax_total);
  }
  return 0;
}
#endif

}  // namespace

static int bench_main(int argc, char** argv) {
  bool quick = false, torch = true;
  int64_t d = 64;
  std::string device = "cpu", python = std::getenv("SINKLAB_PYTHON") ? std::getenv("SINKLAB_PYTHON") : "python3";
#if defined(SINKLAB_BENCH_CUDA)
  std::string torch_script = SINKLAB_BENCH_SOURCE_DIR "/attention_torch.py";
#else
  std::string torch_script;
#endif
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--no-torch"))
      torch = false;
    else if (!std::strcmp(argv[i], "--python") && i + 1 < argc)
      python = argv[++i];
    else if (!std::strcmp(argv[i], "--torch-script") && i + 1 < argc)
      torch_script = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      device = argv[++i];
    else if (!std::strcmp(argv[i], "--d-head") && i + 1 < argc)
      d = sinklab::bench::positive_int("--d-head", argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      set_num_threads(sinklab::bench::positive_int("--threads", argv[++i]));
    else
      throw std::invalid_argument(std::string("unknown flag '") + argv[i] +
                                  "'; usage: attention [--quick] [--threads N] [--d-head N (default 64)] [--device "
                                  "cpu|cuda] [--no-torch] [--python PATH (default python3)] "
                                  "[--torch-script PATH (default bench/attention_torch.py)]");
  }
  if (device == "cuda") {
#if defined(SINKLAB_BENCH_CUDA)
    return cuda_main(quick, torch, python, torch_script);
#else
    throw std::invalid_argument("--device cuda: this build has no CUDA backend (configure with the CUDA Toolkit and SINKLAB_CUDA=ON)");
#endif
  }
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
