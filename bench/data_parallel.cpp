// Data-parallel training on this machine: one process with N threads on the global batch
// against N MPI ranks with one thread each and 1/N of the batch (dist::DataParallel), on the
// train_step model (pre-norm decoder, RMSNorm, softmax attention, SwiGLU, AdamW). The
// data-parallel step is timed with the gradient reduction overlapped with the backward pass
// and without; the all-reduce of the whole gradient is timed alone, which with the step's
// compute time feeds a model of step time against the rank count (printed at the end).
//
//   data_parallel [--config small|large] [--ranks 2] [--steps 10] [--warmup 3] [--rounds 2]
//                 [--bucket-kb 2048]
//
// Run directly: it times the one-process side, then starts itself under `mpirun -np <ranks>`
// (one thread per rank) for the other, alternating sides over --rounds so that a change of
// machine load hits both; the result of a side is the median over rounds of per-round medians.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "decoder.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/dist/world.hpp"

#ifndef SINKLAB_MPIEXEC
#define SINKLAB_MPIEXEC "mpirun"
#endif

using namespace sinklab;
using Json = nlohmann::json;

namespace {

using bench::kLarge;
using bench::kSmall;
using bench::ModelSize;
using Trainer = bench::DecoderSetup<>;

struct Args {
  ModelSize size = kLarge;
  int ranks = 2, steps = 10, warmup = 3, rounds = 2;
  int64_t bucket_kb = 2048;
  bool worker = false;
};

[[noreturn]] void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--config small|large] [--ranks N] [--steps N] [--warmup N] [--rounds N] [--bucket-kb N]\n"
               "  defaults: --config large --ranks 2 --steps 10 --warmup 3 --rounds 2 --bucket-kb 2048\n",
               prog);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has = i + 1 < argc;
    if (k == "--config" && has) {
      const std::string c = argv[++i];
      if (c == "small") a.size = kSmall;
      else if (c == "large") a.size = kLarge;
      else usage(argv[0]);
    } else if (k == "--ranks" && has) a.ranks = bench::positive_int("--ranks", argv[++i], 2);
    else if (k == "--steps" && has) a.steps = bench::positive_int("--steps", argv[++i]);
    else if (k == "--warmup" && has) a.warmup = bench::positive_int("--warmup", argv[++i], 0);
    else if (k == "--rounds" && has) a.rounds = bench::positive_int("--rounds", argv[++i]);
    else if (k == "--bucket-kb" && has) a.bucket_kb = bench::positive_int("--bucket-kb", argv[++i]);
    else if (k == "--worker") a.worker = true;
    else if (k == "--help" || k == "-h") usage(argv[0]);
    else {
      std::fprintf(stderr, "data_parallel: unknown or incomplete flag '%s'\n", k.c_str());
      usage(argv[0]);
    }
  }
  if (a.size.batch % a.ranks != 0) {
    std::fprintf(stderr, "data_parallel: the %s config's batch %lld does not split over %d ranks\n",
                 a.size.name.c_str(), static_cast<long long>(a.size.batch), a.ranks);
    std::exit(2);
  }
  return a;
}

template <class F>
std::vector<double> timed(F&& f, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const double t0 = bench::now_seconds();
    f();
    t.push_back(bench::now_seconds() - t0);
  }
  return t;
}

// One process, --ranks threads, the global batch.
double one_process_step(Trainer& tr, const Args& a) {
  set_num_threads(a.ranks);
  return bench::median_of(timed(
      [&] {
        tr.tape.clear();
        tr.opt->zero_grad();
        tr.tape.backward(tr.model->loss(tr.tape, tr.batch.x, tr.batch.y));
        tr.opt->step();
      },
      a.warmup, a.steps));
}

// Under mpirun: every rank times the data-parallel step; rank 0 prints one RESULT line.
int worker(const Args& a) {
  dist::Communicator& comm = dist::world();
  set_num_threads(1);
  Trainer tr(a.size);
  const auto local = dist::shard(tr.batch, comm);
  const int64_t bucket = a.bucket_kb * 1024 / int64_t(sizeof(float));
  dist::DataParallel<float> on(comm, tr.params, {.bucket_elements = bucket}),
      off(comm, tr.params, {.bucket_elements = bucket, .overlap = false});
  std::vector<double> wait_on, wait_off, backward_on;
  auto step = [&](dist::DataParallel<float>& dp, std::vector<double>* wait, std::vector<double>* bwd) {
    comm.barrier();  // the ranks start each step together, as they do after a reduction
    const double t0 = bench::now_seconds();
    tr.tape.clear();
    tr.opt->zero_grad();
    dp.backward(tr.tape, tr.model->loss(tr.tape, local.x, local.y));
    tr.opt->step();
    const double t = bench::now_seconds() - t0;
    if (wait) wait->push_back(dp.last_step().wait_seconds);
    if (bwd) bwd->push_back(dp.last_step().backward_seconds);
    return t;
  };
  std::vector<double> t_on, t_off, t_compute, t_reduce;
  std::vector<float> all(static_cast<std::size_t>(tr.elements()), 0.0f);  // zeros: a sum keeps them finite
  for (int i = 0; i < a.warmup; ++i) step(on, nullptr, nullptr), step(off, nullptr, nullptr);
  for (int i = 0; i < a.steps; ++i) {
    t_on.push_back(step(on, &wait_on, &backward_on));
    t_off.push_back(step(off, &wait_off, nullptr));
    // The same step with no reduction at all: the compute a rank does.
    comm.barrier();
    double t0 = bench::now_seconds();
    tr.tape.clear();
    tr.opt->zero_grad();
    tr.tape.backward(tr.model->loss(tr.tape, local.x, local.y));
    tr.opt->step();
    t_compute.push_back(bench::now_seconds() - t0);
    // The whole gradient reduced alone, as one buffer: the communication a step needs.
    comm.barrier();
    t0 = bench::now_seconds();
    comm.all_reduce_sum(all.data(), tr.elements());
    t_reduce.push_back(bench::now_seconds() - t0);
  }
  // Each side's time is the slowest rank's.
  double med[6] = {bench::median_of(t_on),    bench::median_of(t_off),   bench::median_of(t_compute),
                   bench::median_of(t_reduce), bench::median_of(wait_on), bench::median_of(wait_off)};
  comm.all_reduce_max(med, 6);
  if (comm.rank() == 0) {
    const Json j{{"step_overlap", med[0]},  {"step_no_overlap", med[1]}, {"compute", med[2]},
                 {"allreduce", med[3]},     {"wait_overlap", med[4]},    {"wait_no_overlap", med[5]},
                 {"backward", bench::median_of(backward_on)}, {"buckets", on.buckets().size()},
                 {"overlapped", on.last_step().buckets_overlapped}, {"ranks", comm.size()}};
    std::printf("RESULT %s\n", j.dump().c_str());
  }
  return 0;
}

// Starts this program under mpirun for one round; its RESULT line.
Json launch(const Args& a) {
  const std::string cmd = std::string("OMP_NUM_THREADS=1 ") + SINKLAB_MPIEXEC + " -np " + std::to_string(a.ranks) +
                          " --oversubscribe " + (geteuid() == 0 ? "--allow-run-as-root " : "") +
                          "/proc/" + std::to_string(getpid()) + "/exe --worker --config " + a.size.name +
                          " --ranks " + std::to_string(a.ranks) + " --steps " + std::to_string(a.steps) +
                          " --warmup " + std::to_string(a.warmup) + " --bucket-kb " + std::to_string(a.bucket_kb) +
                          " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("could not start: " + cmd);
  std::string out, result;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) {
    out += buf;
    if (std::string(buf).rfind("RESULT ", 0) == 0) result = std::string(buf + 7);
  }
  const int rc = pclose(p);
  if (rc != 0 || result.empty())
    throw std::runtime_error("the data-parallel side failed (status " + std::to_string(rc) + "): " + cmd + "\n" + out);
  return Json::parse(result);
}

// Ring all-reduce (what MPI and NCCL use for large buffers): 2(N-1)/N of the bytes cross each
// link, in 2(N-1) latency-bound steps.
double ring_allreduce_seconds(double bytes, int n, double bytes_per_s, double latency_s) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) / n * bytes / bytes_per_s + 2.0 * (n - 1) * latency_s;
}

int run(const Args& a) {
  const ModelSize& s = a.size;
  Trainer tr(s);
  const double grad_bytes = double(tr.elements()) * sizeof(float);
  std::printf("data_parallel: %s config (d %lld, %lld layers, T %lld, global batch %lld), %.2fM parameters, "
              "%.1f MB of gradients; load average %s\n",
              s.name.c_str(), static_cast<long long>(s.d), static_cast<long long>(s.layers),
              static_cast<long long>(s.T), static_cast<long long>(s.batch), tr.elements() / 1e6, grad_bytes / 1e6,
              bench::load_average().c_str());
#if !defined(SINKLAB_HAVE_MPI)
  std::printf("built without MPI (SINKLAB_MPI): only the one-process side\n");
  std::printf("1 process x %d threads: %.1f ms/step\n", a.ranks, 1e3 * one_process_step(tr, a));
  return 0;
#else
  std::vector<double> one;
  std::vector<Json> dp;
  for (int r = 0; r < a.rounds; ++r) {
    one.push_back(one_process_step(tr, a));
    dp.push_back(launch(a));
  }
  auto med = [&](const char* key) {
    std::vector<double> v;
    for (const auto& j : dp) v.push_back(j.at(key).get<double>());
    return bench::median_of(v);
  };
  const double t1 = bench::median_of(one), on = med("step_overlap"), off = med("step_no_overlap"),
               compute = med("compute"), reduce = med("allreduce"), wait_on = med("wait_overlap"),
               wait_off = med("wait_no_overlap"), backward = med("backward");
  const double tokens = double(s.batch * s.T);
  const int n = a.ranks;
  std::printf("\n%-44s %10s %10s %14s\n", "", "ms/step", "tokens/s", "comm wait ms");
  std::printf("%-44s %10.1f %10.0f %14s\n", ("1 process x " + std::to_string(n) + " threads").c_str(), 1e3 * t1,
              tokens / t1, "-");
  std::printf("%-44s %10.1f %10.0f %14.2f\n",
              (std::to_string(n) + " ranks x 1 thread, reduction overlapped").c_str(), 1e3 * on, tokens / on,
              1e3 * wait_on);
  std::printf("%-44s %10.1f %10.0f %14.2f\n", (std::to_string(n) + " ranks x 1 thread, not overlapped").c_str(),
              1e3 * off, tokens / off, 1e3 * wait_off);
  std::printf("%-44s %10.1f %10.0f %14s\n", (std::to_string(n) + " ranks x 1 thread, no reduction").c_str(),
              1e3 * compute, tokens / compute, "-");
  std::printf("\n%d gradient buckets of <= %lld KB, %d started during backward (backward %.1f ms)\n",
              dp.back().at("buckets").get<int>(), static_cast<long long>(a.bucket_kb),
              dp.back().at("overlapped").get<int>(), 1e3 * backward);
  std::printf("all-reduce of the whole gradient alone: %.2f ms (%.2f GB/s algorithm bandwidth)\n", 1e3 * reduce,
              grad_bytes / reduce / 1e9);
  std::printf("ratio %d ranks x 1 thread (overlapped) / 1 process x %d threads: %.2fx tokens/s\n", n, n, t1 / on);
  std::printf("overlap hides %.0f%% of the reduction's exposed time\n",
              wait_off > 0 ? 100.0 * (1 - wait_on / wait_off) : 0.0);

  // Weak scaling on paper: each rank keeps this run's per-rank batch and its measured compute;
  // the reduction is a ring all-reduce of the gradient, exposed in full (no overlap) or only
  // where it outlasts the backward pass (the best overlap can do).
  const double bw_local = 2.0 * (n - 1) / n * grad_bytes / std::max(reduce, 1e-9);
  struct Net {
    const char* name;
    double bytes_per_s, latency_s;
  } nets[] = {{"this host (shared memory, measured)", bw_local, 5e-6},
              {"10 GbE (1.25 GB/s, 50 us)", 1.25e9, 50e-6},
              {"100 Gb/s InfiniBand (12 GB/s, 5 us)", 12e9, 5e-6}};
  std::printf("\nmodel: tokens/s of N ranks, each with %lld rows and a compute step of %.1f ms (measured); "
              "ring all-reduce of %.1f MB\n",
              static_cast<long long>(s.batch / n), 1e3 * compute, grad_bytes / 1e6);
  std::printf("%-38s", "network \\ ranks");
  const int ranks[] = {1, 2, 4, 8, 16, 64};
  for (int r : ranks) std::printf(" %16d", r);
  std::printf("\n");
  for (const Net& net : nets) {
    std::printf("%-38s", net.name);
    for (int r : ranks) {
      const double ar = ring_allreduce_seconds(grad_bytes, r, net.bytes_per_s, net.latency_s);
      const double worst = compute + ar, best = compute + std::max(0.0, ar - backward);
      const double tok = double(s.batch / n * s.T) * r;
      char cell[40];
      std::snprintf(cell, sizeof cell, "%.3g-%.3g", tok / worst / 1e3, tok / best / 1e3);
      std::printf(" %16s", cell);
    }
    std::printf("\n");
  }
  std::printf("(each cell: no overlap - full overlap, thousands of tokens/s)\n");
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main("data_parallel", [&] {
    const Args a = parse(argc, argv);
    return a.worker ? worker(a) : run(a);
  });
}
