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
// every batch passed to Run::see_batch).
#pragma once
#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sinklab/core/parallel.hpp"
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
}  // namespace detail

class Matrix {
 public:
  // `settings`: everything that determines the results (written to run.json, compared on
  // --resume); `free_settings`: keys that may differ on --resume (threads, say; the lists of
  // variants and seeds may always change, so --resume can add runs to a finished matrix).
  Matrix(std::string experiment, const CommonFlags& flags, std::vector<std::string> variants, Json settings,
         int argc = 0, char** argv = nullptr, std::set<std::string> free_settings = {"threads"})
      : name_(std::move(experiment)), flags_(flags), variants_(std::move(variants)), out_(flags.out) {
    SINKLAB_CHECK(!variants_.empty(), name_, ": no variants to run");
    SINKLAB_CHECK(!flags_.seeds.empty(), name_, ": no seeds to run (--seeds)");
    if (flags_.threads > 0) set_num_threads(flags_.threads);
    settings["variants"] = variants_;
    settings["seeds"] = flags_.seeds;
    settings["steps"] = flags_.steps;
    settings["quick"] = flags_.quick;
    settings["threads"] = num_threads();
    const OutputMode mode = flags_.resume ? OutputMode::Resume : flags_.force ? OutputMode::Force : OutputMode::Fresh;
    // Which runs exist does not change any run's result: a resumed matrix may add seeds or variants.
    free_settings.insert({"variants", "seeds"});
    const Json old = prepare_output(out_, mode, name_, settings, free_settings);
    Json meta = provenance(name_, settings, argc, argv);
    if (!old.is_null()) {
      meta["started"] = old.value("started", meta["started"].get<std::string>());
      meta["resumed"] = old.value("resumed", Json::array());
      meta["resumed"].push_back(utc_now());
    }
    write_json(out_ / "run.json", meta);
    for (const auto& v : variants_) steps_[v] = flags_.steps;
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

    for (uint64_t seed : flags_.seeds) {
      std::vector<const RunResult*> of_seed;
      for (const auto& v : variants_) {
        const fs::path dir = run_dir(v, seed);
        if (fs::exists(dir / "result.json")) {
          results_.push_back(Run::load(dir));
          progress_.skip(steps_.at(v));
          progress_.print("[" + v + " s" + std::to_string(seed) + "] finished earlier; read from " + dir.string());
        } else {
          Run r(dir, v, seed, progress_, detail::stop_flag());
          write_json(dir / "run.json", Json{{"experiment", name_}, {"variant", v}, {"seed", seed}});
          try {
            body(r);
          } catch (const Interrupted& e) {
            interrupted_ = true;
            progress_.print("interrupted: " + std::string(e.what()) + "; " + std::to_string(results_.size()) +
                            " run(s) finished. Continue with the same flags and --resume.");
            return false;
          }
          SINKLAB_CHECK(fs::exists(dir / "result.json"), name_, ": the run ", r.tag(),
                        " returned without finishing (call experiment::train or Run::finish)");
          results_.push_back(r.result());
          progress_.print("[" + r.tag() + "] done in " + format_duration(r.result().seconds));
        }
        of_seed.push_back(&results_.back());
        if (detail::stop_flag().load()) {
          interrupted_ = true;
          progress_.print("interrupted after " + std::to_string(results_.size()) + " finished run(s). Continue with "
                          "the same flags and --resume.");
          return false;
        }
      }
      progress_.print(check_batches(seed, of_seed));
    }
    return true;
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
    std::vector<double> d;
    for (const auto* a : of(variant))
      for (const auto* b : of(ref))
        if (a->seed == b->seed && !a->diverged && !b->diverged) d.push_back(a->metric(metric) - b->metric(metric));
    return d;
  }

 private:
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
  std::map<std::string, int64_t> steps_;
  Progress progress_;
  std::deque<RunResult> results_;  // a deque: pointers to finished runs stay valid
  bool interrupted_ = false;
};

}  // namespace sinklab::experiment
