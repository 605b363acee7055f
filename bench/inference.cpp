// Tokens per second of inference — the forward pass to logits, no gradients — of the benchmark
// decoder (bench/decoder.hpp, random weights) in three arithmetics, in one run on the same threads:
//
//   fp32   every product in fp32
//   bf16   the projections with bf16 operands and fp32 accumulation (Tape::set_precision)
//   int8   W8A8 with integer GEMMs (quant::ModelQuantizer::integer_scope): int8 weights with an
//          MSE-searched per-tensor scale, uint8 inputs with static per-tensor ranges calibrated on
//          `--calibration` batches, int32 sums (AVX512-VNNI where the CPU has it)
//
// The attention's products follow the tape's precision: fp32 in the fp32 pass, bf16 in the other
// two (the fused attention's bf16 products); its softmax, the norms, RoPE and the residual stream
// are fp32 in all three. So bf16 and int8 differ only in the projections, and int8/bf16 is what
// the integer projections buy a whole forward pass. Each mode runs `warmup` untimed passes and
// `steps` timed ones per round; rounds rotate the modes so machine load hits each alike; a mode's
// time is the median over rounds of the per-round medians. The same batch's loss is printed under
// each mode as a check, and twice more for the integer path: under fake W8A8 and with the integer
// projections but fp32 attention products — those two share every code and may differ only by
// fp32 rounding.
//
//   inference [--config small|large|xl|all] [--threads 2] [--steps 10] [--warmup 3] [--rounds 3]
//             [--calibration 4] [--smoothquant] [--profile]
//
// --profile adds each mode's forward pass by op and by section (autodiff::profile), `steps`
// passes each, after the timed rounds.
//
// xl (d 512, 8 heads, 6 layers, SwiGLU hidden glu_hidden(512), T 256, batch 8) is larger than the
// training benchmark's configs: at d 128–256 a projection's GEMM is small next to the work
// around it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "decoder.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/profile.hpp"
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/isa.hpp"
#include "sinklab/quant/model.hpp"

using namespace sinklab;

namespace {

using bench::ModelSize;
const ModelSize kXL{"xl", 512, 8, 6, 256, 8};

struct Args {
  std::vector<ModelSize> configs{bench::kSmall, bench::kLarge, kXL};
  int threads = 2;
  int steps = 10;
  int warmup = 3;
  int rounds = 3;
  int calibration = 4;
  bool smoothquant = false;
  bool profile = false;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--config small|large|xl|all] [--threads N] [--steps N] [--warmup N] [--rounds N]\n"
               "          [--calibration N] [--smoothquant] [--profile]\n"
               "defaults: --config all --threads 2 --steps 10 --warmup 3 --rounds 3 --calibration 4, no SmoothQuant,\n"
               "          no profile\n",
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
      if (c == "small") a.configs = {bench::kSmall};
      else if (c == "large") a.configs = {bench::kLarge};
      else if (c == "xl") a.configs = {kXL};
      else if (c != "all") usage(argv[0]);
    } else if (k == "--threads" && has_value) a.threads = bench::positive_int("--threads", argv[++i]);
    else if (k == "--steps" && has_value) a.steps = bench::positive_int("--steps", argv[++i]);
    else if (k == "--warmup" && has_value) a.warmup = bench::positive_int("--warmup", argv[++i], 0);
    else if (k == "--rounds" && has_value) a.rounds = bench::positive_int("--rounds", argv[++i]);
    else if (k == "--calibration" && has_value) a.calibration = bench::positive_int("--calibration", argv[++i]);
    else if (k == "--smoothquant") a.smoothquant = true;
    else if (k == "--profile") a.profile = true;
    else usage(argv[0]);
  }
  return a;
}

enum Mode { kFp32, kBf16, kInt8, kModes };
const char* const kModeName[kModes] = {"fp32", "bf16", "int8"};

// Mean cross-entropy of the batch's targets from the logits (a check that the modes compute the
// same model, not a quality figure: the weights are random).
double batch_loss(const Tensor<float>& logits, const Tensor<int32_t>& y) {
  const int64_t V = logits.size(-1), rows = y.numel();
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * V;
    double m = row[0], s = 0;
    for (int64_t j = 1; j < V; ++j) m = std::max(m, double(row[j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(double(row[j]) - m);
    total += std::log(s) + m - row[y.data()[r]];
  }
  return total / static_cast<double>(rows);
}

int bench_main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_num_threads(a.threads);
  std::printf("inference: %d threads, %d warmup + %d timed passes, %d round(s), %d calibration batches%s, load average %s\n",
              a.threads, a.warmup, a.steps, a.rounds, a.calibration, a.smoothquant ? ", SmoothQuant" : "",
              bench::load_average().c_str());
  std::printf("CPU: %s\n%s\n", cpu_features().summary().c_str(), kernels::cpu::kernel_isa().summary().c_str());
  std::string table;
  for (const ModelSize& s : a.configs) {
    bench::DecoderSetup<> d(s);
    auto& model = *d.model;
    const int64_t tokens = s.batch * s.T;
    std::vector<Tensor<int32_t>> calib;
    for (int i = 0; i < a.calibration; ++i) {
      Tensor<int32_t> x = Tensor<int32_t>::empty({s.batch, s.T});
      for (int64_t j = 0; j < x.numel(); ++j) x.data()[j] = static_cast<int32_t>(d.rng.randint(0, 256));
      calib.push_back(x);
    }
    quant::ModelQuantizer<float> q({.scheme = quant::Scheme::w8a8, .smoothquant = a.smoothquant});
    q.calibrate([&] {
      autodiff::no_grad off;
      autodiff::Tape<float> t;
      for (const auto& x : calib) {
        t.clear();
        model.logits(t, x);
      }
    });
    autodiff::no_grad off;
    autodiff::Tape<float> tape;
    auto forward = [&](Mode m) {
      tape.clear();
      tape.set_precision(m == kFp32 ? kernels::Precision::fp32 : kernels::Precision::bf16);
      return model.logits(tape, d.batch.x).value();
    };
    // fp32 and bf16 run the float weights; int8 runs the quantized model.
    double loss[kModes], fake_loss, int8_fp32_loss;  // the last two: the integer path's check
    loss[kFp32] = batch_loss(forward(kFp32), d.batch.y);
    loss[kBf16] = batch_loss(forward(kBf16), d.batch.y);
    const double q0 = bench::now_seconds();
    q.quantize_weights();
    std::printf("  %s: quantize_weights %.2f s (%lld parameters in the model)\n", s.name.c_str(),
                bench::now_seconds() - q0, static_cast<long long>(d.elements()));
    {
      auto fake = q.activation_scope();
      fake_loss = batch_loss(forward(kFp32), d.batch.y);
    }
    {
      auto integer = q.integer_scope();
      int8_fp32_loss = batch_loss(forward(kFp32), d.batch.y);
      loss[kInt8] = batch_loss(forward(kInt8), d.batch.y);
    }

    // Timed on the quantized weights throughout (a float pass costs the same whatever its weights).
    std::vector<double> per_round[kModes];
    for (int round = 0; round < a.rounds; ++round) {
      for (int k = 0; k < kModes; ++k) {
        const Mode m = static_cast<Mode>((k + round) % kModes);
        auto time = [&] {
          for (int i = 0; i < a.warmup; ++i) forward(m);
          std::vector<double> t;
          for (int i = 0; i < a.steps; ++i) {
            const double t0 = bench::now_seconds();
            forward(m);
            t.push_back(bench::now_seconds() - t0);
          }
          return bench::median_of(t);
        };
        if (m == kInt8) {
          auto integer = q.integer_scope();
          per_round[m].push_back(time());
        } else {
          per_round[m].push_back(time());
        }
        std::printf("  %s round %d: %s %.2f ms per pass (load %s)\n", s.name.c_str(), round + 1, kModeName[m],
                    1e3 * per_round[m].back(), bench::load_average().c_str());
      }
    }
    if (a.profile) {
      for (int k = 0; k < kModes; ++k) {
        const Mode m = static_cast<Mode>(k);
        autodiff::profile::Profiler prof;
        auto passes = [&] {
          autodiff::profile::Session on(prof);
          for (int i = 0; i < a.steps; ++i) {
            prof.mark();
            forward(m);
          }
        };
        if (m == kInt8) {
          auto integer = q.integer_scope();
          passes();
        } else {
          passes();
        }
        std::printf("\nprofile of the %s pass, %s config (%d passes, ms per pass)\n", kModeName[m], s.name.c_str(),
                    a.steps);
        prof.print(stdout, a.steps);
      }
    }
    q.restore();
    double tps[kModes];
    for (int m = 0; m < kModes; ++m) tps[m] = static_cast<double>(tokens) / bench::median_of(per_round[m]);
    char row[512];
    std::snprintf(
        row, sizeof row, "| %s | %lld | %.0f | %.0f | %.0f | %.2f | %.2f | %.4f / %.4f / %.4f / %.4f / %.4f |\n",
        s.name.c_str(), static_cast<long long>(tokens), tps[kFp32], tps[kBf16], tps[kInt8], tps[kInt8] / tps[kBf16],
        tps[kInt8] / tps[kFp32], loss[kFp32], loss[kBf16], fake_loss, int8_fp32_loss, loss[kInt8]);
    table += row;
  }
  std::printf(
      "\n| config | tokens | fp32 tok/s | bf16 tok/s | int8 tok/s | int8/bf16 | int8/fp32 | loss fp32 / bf16 / W8A8 "
      "fake / int8 fp32 attn. / int8 |\n"
      "|---|---|---|---|---|---|---|---|\n%s",
      table.c_str());
  std::printf("load average at the end: %s\n", bench::load_average().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main("inference", [&] { return bench_main(argc, argv); });
}
