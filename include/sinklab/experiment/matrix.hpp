// A run matrix: variants × seeds, paired, resumable, interruptible.
//
//   experiment::Matrix m("vga_bigram_backcopy", flags, {"vanilla", "vga"}, settings, argc, argv);
//   m.run([&](experiment::Run& run) { ... build the variant, experiment::train(run, ...) ... });
//   for (const RunResult* r : m.of("vga")) ...          // finished runs, in seed order
//   m.layer_table("sink", layers, m.variants(), 3)        // metric L<l>_sink by variant and layer
//   if (m.interrupted()) return 130;                    // after writing what is done
//
// Runs go seed by seed, every variant of a seed in the order given, so a variant can start
// from another's result (a retrofit from the vanilla run's final weights). With --resume a
// finished run (result.json present) is read back instead of run; an unfinished one restarts
// from its last checkpoint (see run.hpp). Ctrl-C (SIGINT) or SIGTERM stops the run in
// progress at its next step with a checkpoint, and run() returns false; a second Ctrl-C kills
// at once. After each seed the matrix checks that its variants saw the same batches (a hash of
// every batch passed to Run::see_batch). With --summarize nothing trains: the finished runs
// listed are read back (the settings checked as on --resume), the unfinished ones are named and
// left out, and run.json is left as it was — so runs kept from several matrices, with uneven
// seeds per variant, can be summarised together.
//
// Under `mpirun -np N` (a build with MPI), the same program spreads the matrix over the ranks
// (CommonFlags::distribute): `runs` gives each rank whole seeds (all variants of a seed stay on
// one rank, so a variant may still start from another's result), `data` trains every run on
// all ranks together, each on 1/N of every batch (experiment/data_parallel.hpp). Rank 0 alone
// prepares --out and writes the files of data-parallel runs; --out must be a folder every rank
// sees (one host, or a shared filesystem), which is checked. After run() every rank holds every
// result; the ranks other than 0 then leave the program (exit status 0, or 130 when the matrix
// was interrupted), so that only rank 0 goes on to write summaries and figures. A matrix made
// after that runs on rank 0 alone. An error on any rank ends every rank (MPI_Abort) with the
// error printed by the rank it happened on, instead of leaving the others waiting.
#pragma once
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/dist/world.hpp"
#include "sinklab/experiment/data_parallel.hpp"
#include "sinklab/experiment/cli.hpp"
#include "sinklab/experiment/run.hpp"
#include "sinklab/experiment/stats.hpp"
#include "sinklab/experiment/table.hpp"

namespace sinklab::experiment {

namespace detail {
inline std::atomic<bool>& stop_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline void on_stop_signal(int sig) {
  stop_flag().store(true);
  std::signal(sig, SIG_DFL);  // a second Ctrl-C ends the program at once
}
// Set on rank 0 once the other ranks have left after a distributed matrix.
inline bool& ranks_left() {
  static bool left = false;
  return left;
}
inline dist::Communicator& matrix_communicator() {
  static dist::SingleProcess alone;
  return ranks_left() ? static_cast<dist::Communicator&>(alone) : dist::world();
}
// Sets the data-parallel run the optimisation step sees, for one scope.
struct ActiveDataParallel {
  explicit ActiveDataParallel(DataParallelRun* r) { active_data_parallel() = r; }
  ~ActiveDataParallel() { active_data_parallel() = nullptr; }
};
}  // namespace detail

class Matrix {
 public:
  // `settings`: everything that determines the results (written to run.json, compared on
  // --resume); `free_settings`: keys that may differ on --resume (threads, say; the lists of
  // variants and seeds may always change, so --resume can add runs to a finished matrix).
  Matrix(std::string experiment, const CommonFlags& flags, std::vector<std::string> variants, Json settings,
         int argc = 0, char** argv = nullptr, std::set<std::string> free_settings = {"threads"})
      : name_(std::move(experiment)),
        flags_(flags),
        variants_(std::move(variants)),
        out_(flags.out),
        comm_(&detail::matrix_communicator()) {
    SINKLAB_CHECK(!variants_.empty(), name_, ": no variants to run");
    SINKLAB_CHECK(!flags_.seeds.empty(), name_, ": no seeds to run (--seeds)");
    SINKLAB_CHECK(flags_.distribute == "runs" || flags_.distribute == "data", name_, ": --distribute '",
                  flags_.distribute, "' (expected 'runs' or 'data')");
    SINKLAB_CHECK(flags_.precision == "fp32" || flags_.precision == "bf16", name_, ": --precision '", flags_.precision,
                  "' (expected 'fp32' or 'bf16')");
    SINKLAB_CHECK(!flags_.summarize || comm_->size() == 1, name_, ": --summarize trains nothing; run it as one "
                  "process, not under mpirun -np ", comm_->size());
    if (flags_.threads > 0) set_num_threads(flags_.threads);
    settings["variants"] = variants_;
    settings["seeds"] = flags_.seeds;
    settings["steps"] = flags_.steps;
    settings["quick"] = flags_.quick;
    settings["threads"] = num_threads();
    if (flags_.precision != "fp32") settings["precision"] = flags_.precision;  // fp32 matrices keep their old settings
    const OutputMode mode = flags_.summarize ? OutputMode::Summarize
                            : flags_.resume  ? OutputMode::Resume
                            : flags_.force   ? OutputMode::Force
                                             : OutputMode::Fresh;
    // Which runs exist does not change any run's result: a resumed matrix may add seeds or variants.
    free_settings.insert({"variants", "seeds"});
    dist::on_root(*comm_, [&] {
      const Json old = prepare_output(out_, mode, name_, settings, free_settings);
      if (mode == OutputMode::Summarize) return;  // the folder describes the runs it holds
      Json meta = provenance(name_, settings, argc, argv);
      // The keys --resume lets differ, so tools that merge runs (scripts/keep-runs.sh) compare
      // the rest by the same rule.
      meta["free_settings"] = free_settings;
      meta["ranks"] = comm_->size();
      if (comm_->size() > 1) meta["distribute"] = flags_.distribute;
      if (!old.is_null()) {
        meta["started"] = old.value("started", meta["started"].get<std::string>());
        meta["resumed"] = old.value("resumed", Json::array());
        meta["resumed"].push_back(utc_now());
      }
      write_json(out_ / "run.json", meta);
    });
    for (const auto& v : variants_) steps_[v] = flags_.steps;
    if (detail::ranks_left() && dist::world().size() > 1)
      progress_.print(name_ + ": the other ranks left after the previous matrix; this one runs on rank 0 alone "
                              "(start one job per matrix to spread each)");
    if (comm_->size() == 1) return;
    if (data_parallel()) {
      progress_.set_quiet(comm_->rank() != 0);
      progress_.print(name_ + ": " + std::to_string(comm_->size()) + " ranks x " + std::to_string(num_threads()) +
                      " threads (" + comm_->backend() + "), --distribute data: every run on all ranks, each on 1/" +
                      std::to_string(comm_->size()) + " of every batch");
    } else {
      if (comm_->rank() == 0)
        progress_.print(name_ + ": " + std::to_string(comm_->size()) + " ranks x " + std::to_string(num_threads()) +
                        " threads (" + comm_->backend() + "), --distribute runs: seed i runs on rank i mod " +
                        std::to_string(comm_->size()));
      if (static_cast<int>(flags_.seeds.size()) < comm_->size() && comm_->rank() == 0)
        progress_.print(name_ + ": " + std::to_string(flags_.seeds.size()) + " seed(s) for " +
                        std::to_string(comm_->size()) + " ranks: some ranks have nothing to do (--distribute data "
                        "would use them all)");
    }
  }

  const std::string& name() const { return name_; }
  const fs::path& out() const { return out_; }
  const std::vector<std::string>& variants() const { return variants_; }
  const std::vector<uint64_t>& seeds() const { return flags_.seeds; }
  Progress& progress() { return progress_; }
  bool interrupted() const { return interrupted_; }
  fs::path run_dir(const std::string& variant, uint64_t seed) const {
    return out_ / "runs" / variant / ("seed" + std::to_string(seed));
  }
  // Training steps of one variant when it differs from --steps (for the progress line's ETA).
  void set_steps(const std::string& variant, int64_t steps) { steps_[variant] = steps; }

  template <class Body>
  bool run(Body&& body) {
    int64_t total = 0;
    for (const auto& v : variants_) total += steps_.at(v) * static_cast<int64_t>(flags_.seeds.size());
    progress_.set_total(total);
    detail::stop_flag().store(false);
    auto old_int = std::signal(SIGINT, detail::on_stop_signal);
    auto old_term = std::signal(SIGTERM, detail::on_stop_signal);
    struct Restore {
      decltype(old_int) i, t;
      ~Restore() {
        std::signal(SIGINT, i);
        std::signal(SIGTERM, t);
      }
    } restore{old_int, old_term};
    autodiff::CheckFinite guard(flags_.check_finite);
    autodiff::DefaultPrecision precision(flags_.precision == "bf16" ? kernels::Precision::bf16 : kernels::Precision::fp32);

    if (comm_->size() == 1) return run_seeds(body);
    bool done = false;
    try {
      done = run_seeds(body);
      if (!data_parallel()) done = gather();
    } catch (const std::exception& e) {
      // One rank failing alone must not leave the others in a collective: end them all.
      std::fprintf(stderr, "%s: error on %s: %s\n", name_.c_str(), dist::rank_text(*comm_).c_str(), e.what());
      std::fflush(stderr);
      comm_->abort(1);
    }
    detail::ranks_left() = true;
    if (comm_->rank() != 0) {  // rank 0 alone goes on to the summaries
      std::fflush(stdout);
      std::exit(done ? 0 : 130);
    }
    return done;
  }

  const std::deque<RunResult>& results() const { return results_; }
  std::vector<const RunResult*> of(const std::string& variant) const {
    std::vector<const RunResult*> r;
    for (const auto& x : results_)
      if (x.variant == variant) r.push_back(&x);
    return r;
  }
  // A final metric of every finished run of a variant (seed order).
  std::vector<double> finals(const std::string& variant, const std::string& metric) const {
    std::vector<double> xs;
    for (const auto* r : of(variant)) xs.push_back(r->metric(metric));
    return xs;
  }
  // A final metric's spread over the seeds of a variant; a diverged run counts in n but not in the
  // statistics (its figures describe a broken model).
  Spread spread(const std::string& variant, const std::string& metric) const {
    std::vector<double> xs;
    for (const auto* r : of(variant)) xs.push_back(r->diverged ? NAN : r->metric(metric));
    return summarize(xs);
  }
  int diverged(const std::string& variant) const {
    int n = 0;
    for (const auto* r : of(variant)) n += r->diverged;
    return n;
  }
  // The studies' per-layer metrics are named L<l>_<name> (layer l from 0).
  static std::string layer_metric(int64_t layer, const std::string& name) {
    return std::string("L") + std::to_string(layer) + "_" + name;
  }
  // Markdown: a per-layer metric's mean over seeds, a row per variant and a column per layer.
  std::string layer_table(const std::string& name, int64_t layers, const std::vector<std::string>& variants,
                          int precision = 3) const {
    std::vector<std::string> head = {"variant"};
    for (int64_t l = 0; l < layers; ++l) head.push_back("layer " + std::to_string(l + 1));
    Table t(head);
    for (const auto& v : variants) {
      std::vector<std::string> row = {v};
      for (int64_t l = 0; l < layers; ++l) row.push_back(fixed(spread(v, layer_metric(l, name)).mean, precision));
      t.row(row);
    }
    return t.markdown();
  }
  // Per seed, metric(variant) − metric(ref): the paired comparison, over the seeds both finished
  // without diverging.
  std::vector<double> paired(const std::string& variant, const std::string& ref, const std::string& metric) const {
    return paired_by(variant, ref, [&](const RunResult& a, const RunResult& b) { return a.metric(metric) - b.metric(metric); });
  }
  // Per seed, f(variant's run, ref's run) over the same seeds: a ratio, or a comparison of
  // quantities each run derives from several metrics.
  template <class F>
  std::vector<double> paired_by(const std::string& variant, const std::string& ref, F&& f) const {
    std::vector<double> d;
    for (const auto* a : of(variant))
      for (const auto* b : of(ref))
        if (a->seed == b->seed && !a->diverged && !b->diverged) d.push_back(f(*a, *b));
    return d;
  }

 private:
  bool data_parallel() const { return comm_->size() > 1 && flags_.distribute == "data"; }
  // Under --distribute runs, the seeds this rank runs.
  bool mine(std::size_t seed_index) const {
    return data_parallel() || static_cast<int>(seed_index % static_cast<std::size_t>(comm_->size())) == comm_->rank();
  }

  template <class Body>
  bool run_seeds(Body& body) {
    for (std::size_t si = 0; si < flags_.seeds.size(); ++si) {
      const uint64_t seed = flags_.seeds[si];
      if (!mine(si)) {
        for (const auto& v : variants_) progress_.skip(steps_.at(v));
        continue;
      }
      std::vector<const RunResult*> of_seed;
      for (const auto& v : variants_) {
        const fs::path dir = run_dir(v, seed);
        bool finished = fs::exists(dir / "result.json");
        if (data_parallel()) finished = dist::from_root(*comm_, finished);  // one decision for all ranks
        if (finished) {
          results_.push_back(Run::load(dir));
          progress_.skip(steps_.at(v));
          progress_.print("[" + v + " s" + std::to_string(seed) + "] finished earlier; read from " + dir.string());
        } else if (flags_.summarize) {
          progress_.skip(steps_.at(v));
          progress_.print("[" + v + " s" + std::to_string(seed) + "] not finished in " + out_.string() +
                          ": left out of the summaries (--summarize trains nothing)");
          continue;
        } else {
          Run r(dir, v, seed, progress_, detail::stop_flag());
          std::unique_ptr<DataParallelRun> shared;
          if (data_parallel()) {
            // The batch split is announced at the matrix's first data-parallel step.
            const bool announce = comm_->rank() == 0 && !announced_;
            shared = std::make_unique<DataParallelRun>(*comm_, detail::stop_flag(), announce);
            announced_ = true;
            r.train_on(*comm_, shared->agreed_stop());
          }
          detail::ActiveDataParallel active(shared.get());
          if (r.writes()) write_json(dir / "run.json", Json{{"experiment", name_}, {"variant", v}, {"seed", seed}});
          try {
            body(r);
          } catch (const Interrupted& e) {
            interrupted_ = true;
            progress_.print("interrupted: " + std::string(e.what()) + "; " + std::to_string(results_.size()) +
                            " run(s) finished. Continue with the same flags and --resume.");
            return false;
          }
          SINKLAB_CHECK(!r.writes() || fs::exists(dir / "result.json"), name_, ": the run ", r.tag(),
                        " returned without finishing (call experiment::train or Run::finish)");
          if (data_parallel()) comm_->barrier();  // the next run may read this one's files (a retrofit)
          results_.push_back(r.result());
          progress_.print("[" + r.tag() + "] done in " + format_duration(r.result().seconds));
        }
        of_seed.push_back(&results_.back());
        bool stop = detail::stop_flag().load();
        if (data_parallel()) {  // a signal that reached some ranks only: they all stop here
          double any = stop ? 1.0 : 0.0;
          comm_->all_reduce_max(&any, 1);
          stop = any > 0;
        }
        if (stop) {
          interrupted_ = true;
          progress_.print("interrupted after " + std::to_string(results_.size()) + " finished run(s). Continue with "
                          "the same flags and --resume.");
          return false;
        }
      }
      progress_.print(check_batches(seed, of_seed));
    }
    SINKLAB_CHECK(!flags_.summarize || !results_.empty(), name_, ": --summarize: none of the runs of --variants x "
                  "--seeds has finished in '", out_.string(), "'");
    return true;
  }

  // --distribute runs: after every rank finished its seeds (or was stopped), each reads every
  // finished run from --out, in the matrix's order.
  bool gather() {
    double stopped = interrupted_ ? 1.0 : 0.0;
    comm_->all_reduce_max(&stopped, 1);
    interrupted_ = stopped > 0;
    results_.clear();
    for (std::size_t si = 0; si < flags_.seeds.size(); ++si)
      for (const auto& v : variants_) {
        const fs::path dir = run_dir(v, flags_.seeds[si]);
        if (fs::exists(dir / "result.json")) {
          results_.push_back(Run::load(dir));
          if (!mine(si))
            progress_.print("[" + v + " s" + std::to_string(flags_.seeds[si]) + "] done on rank " +
                            std::to_string(si % static_cast<std::size_t>(comm_->size())) + " in " +
                            format_duration(results_.back().seconds));
          continue;
        }
        SINKLAB_CHECK(interrupted_, name_, ": the run ", v, " s", flags_.seeds[si], " finished on rank ",
                      si % static_cast<std::size_t>(comm_->size()), " but ", (dir / "result.json").string(),
                      " is not visible on ", dist::rank_text(*comm_),
                      ": --out must be a folder every rank sees (one host, or a shared filesystem)");
      }
    return !interrupted_;
  }

  // Runs of one seed that took the same number of batches must have seen the same batches.
  static std::string check_batches(uint64_t seed, const std::vector<const RunResult*>& runs) {
    std::map<int64_t, std::vector<const RunResult*>> by_count;
    for (const auto* r : runs)
      if (r->batches > 0 && !r->diverged) by_count[r->batches].push_back(r);
    std::string s = "data, seed " + std::to_string(seed) + ":";
    if (by_count.empty()) return s + " no batches recorded";
    for (const auto& [n, rs] : by_count) {
      std::vector<std::string> differ;
      for (const auto* r : rs)
        if (r->batch_hash != rs.front()->batch_hash) differ.push_back(r->variant);
      s += " " + std::to_string(n) + " batches, " +
           (differ.empty() ? "identical for " + std::to_string(rs.size()) + "/" + std::to_string(rs.size()) +
                                 " variants"
                           : "WARNING: differ for " + std::to_string(differ.size()) + " of " +
                                 std::to_string(rs.size()) + " variants");
    }
    return s;
  }

  std::string name_;
  CommonFlags flags_;
  std::vector<std::string> variants_;
  fs::path out_;
  dist::Communicator* comm_;
  std::map<std::string, int64_t> steps_;
  Progress progress_;
  std::deque<RunResult> results_;  // a deque: pointers to finished runs stay valid
  bool interrupted_ = false;
  bool announced_ = false;  // the data-parallel batch split was printed
};

}  // namespace sinklab::experiment
