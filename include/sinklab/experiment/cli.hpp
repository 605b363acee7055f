// The flags every experiment shares, so all examples read alike:
//
//   --out DIR  --seeds 0,1,2  --steps N  --threads N  --resume  --force  --summarize  --quick
//   --distribute runs|data   (under mpirun: whole runs per rank, or every run data-parallel)
//   --precision fp32|bf16    (the matrix products of every tape a run creates; docs/precision.md)
//
//   experiment::CommonFlags flags{.out = "out/vga", .steps = 2000};
//   CLI::App app{"..."};
//   experiment::add_common_flags(app, flags);
//   app.add_option("--batch", batch, "...")->check(CLI::PositiveNumber)->capture_default_str();
//   if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
//   if (flags.quick) experiment::preset(app, "--steps", flags.steps, 300);   // unless given
//
// Defaults show in --help (capture_default_str); a value out of range names the flag, the
// value and the range, and points to --help.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sinklab/dist/world.hpp"

namespace sinklab::experiment {

struct CommonFlags {
  std::string out = "out/experiment";
  std::vector<uint64_t> seeds{0, 1, 2};
  int64_t steps = 1000;
  int threads = 0;      // 0: the library's default
  bool resume = false;  // continue an interrupted matrix in --out
  bool force = false;   // replace a previous run directory in --out
  bool summarize = false;  // read the finished runs in --out, train none
  bool quick = false;   // the example's few-minutes preset
  bool check_finite = true;  // stop a run at the first NaN/Inf in a value or gradient (autodiff::CheckFinite)
  std::string distribute = "runs";  // under mpirun: "runs" (seeds over ranks) or "data" (data-parallel runs)
  std::string precision = "fp32";   // "bf16": bf16 operands, fp32 sums in every tape's matrix products
};

inline void add_common_flags(CLI::App& app, CommonFlags& f) {
  app.add_option("--out", f.out, "output directory (refuses a non-empty one unless --resume or --force)")
      ->capture_default_str();
  app.add_option("--seeds,--seed", f.seeds, "seeds, comma-separated; each seed is one paired run of every variant")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--steps", f.steps, "training steps per run")->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 4096))->capture_default_str();
  auto* resume = app.add_flag("--resume", f.resume,
                              "continue the matrix in --out: finished runs are kept, an unfinished one restarts from "
                              "its last checkpoint");
  auto* force = app.add_flag("--force", f.force, "replace the previous run directory in --out")->excludes(resume);
  app.add_flag("--summarize", f.summarize,
               "train nothing: read the runs of --variants x --seeds that finished in --out and write the summaries "
               "and figures from them (runs not finished there are named and left out)")
      ->excludes(force);
  app.add_flag("--quick", f.quick, "a few-minutes preset (smaller model and fewer steps; explicit flags still win)");
  app.add_option("--distribute", f.distribute,
                 "under mpirun -np N: 'runs' gives each rank whole seeds; 'data' trains every run on all ranks, "
                 "each on 1/N of every batch (the batch must split evenly)")
      ->check(CLI::IsMember({"runs", "data"}))
      ->capture_default_str();
  app.add_option("--precision", f.precision,
                 "float matrix products of every tape the runs create: fp32, or bf16 operands with fp32 sums "
                 "(autocast: the projections and the attention's products; weights, norms, softmax, losses and the "
                 "optimizer stay fp32)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_flag("!--no-check-finite", f.check_finite,
               "do not scan values and gradients for NaN/Inf (by default the first one ends the run as diverged, "
               "naming the op or parameter)");
}

// Sets `value` to `preset` unless the user gave `flag` on the command line.
template <class V, class P>
void preset(const CLI::App& app, const std::string& flag, V& value, const P& preset_value) {
  if (app.count(flag) == 0) value = static_cast<V>(preset_value);
}

// Parses; returns -1 to go on, or the exit code (0 after --help, 2 after an error, which is
// printed with the flag's name and a pointer to --help). Under mpirun, rank 0 alone writes to
// stdout from here on (every rank's errors still reach stderr).
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun with --help for every flag, its range and its default.\n",
                 app.get_name().empty() ? "error" : app.get_name().c_str(), e.what());
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  if (dist::launcher_size() > 1 && dist::world().rank() != 0) std::freopen("/dev/null", "w", stdout);
  return -1;
}

}  // namespace sinklab::experiment
