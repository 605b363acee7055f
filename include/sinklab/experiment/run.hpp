// One run of a matrix (one variant, one seed) and the training loop every example shares.
//
//   experiment::train(run, model, opt, {.steps = 2000, .eval_every = 50},
//       [&](Rng& data) {                          // one optimisation step on a fresh batch
//         auto batch = task.sample(data, 64);
//         run.see_batch(batch.x);                 // hashed: the matrix checks pairing
//         tape.clear(); opt.zero_grad();
//         auto loss = model.loss(tape, batch.x, batch.y);
//         tape.backward(loss); opt.step();
//         return loss.item();
//       },
//       [&](int64_t step) { return io::LogRow{{"attn_sink", ...}, ...}; });   // evaluation
//
// The loop evaluates at step 0, every eval_every steps and at the end; appends each evaluation
// to metrics.jsonl and metrics.csv; saves a checkpoint (model, AdamW state, the data stream's
// position, the smoothed loss) at evaluations at most every checkpoint_seconds and whenever
// Ctrl-C is pressed; restarts from that checkpoint when the run directory has one, dropping
// rows logged after it, so an interrupted run continues to the same numbers as one that was
// never stopped. A non-finite loss (or one above LoopSpec::diverge_above), or the non-finite
// guard stopping a step (autodiff::NonFinite: a NaN or Inf in a value or a gradient, named by
// op and parameter), ends the run as diverged (recorded, not thrown; the matrix goes on with
// the next run): a divergence is a result. A diverged run keeps its last good checkpoint. At
// the end final.safetensors and result.json are written.
#pragma once
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/dist/communicator.hpp"
#include "sinklab/experiment/data_parallel.hpp"
#include "sinklab/experiment/progress.hpp"
#include "sinklab/experiment/run_dir.hpp"
#include "sinklab/io/checkpoint.hpp"
#include "sinklab/io/metrics_log.hpp"

namespace sinklab::experiment {

// Thrown out of a run when Ctrl-C (SIGINT/SIGTERM) arrived; the checkpoint is already saved.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A JSON value as a number: null (NaN in the logs), booleans and numbers; NaN otherwise.
inline double number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return NAN;
}

struct RunResult {
  std::string variant;
  uint64_t seed = 0;
  std::vector<Json> history;  // one object per evaluation: {"step": ..., "train_loss": ..., metrics}
  Json final;                 // the last evaluation plus what the run added at the end
  double seconds = 0;
  bool diverged = false;
  uint64_t batch_hash = 0;
  int64_t batches = 0;

  double metric(const std::string& name) const { return final.contains(name) ? number(final[name]) : NAN; }
};

class Run {
 public:
  static constexpr uint64_t kDataStream = 1;  // Rng(seed).fork(kDataStream): the batch stream

  Run(fs::path dir, std::string variant, uint64_t seed, Progress& progress, const std::atomic<bool>& stop)
      : dir_(std::move(dir)), variant_(std::move(variant)), seed_(seed), data_(Rng(seed).fork(kDataStream)),
        progress_(&progress), stop_(&stop) {
    fs::create_directories(dir_);
    result_.variant = variant_;
    result_.seed = seed_;
  }

  const fs::path& dir() const { return dir_; }
  const std::string& variant() const { return variant_; }
  uint64_t seed() const { return seed_; }
  std::string tag() const { return variant_ + " s" + std::to_string(seed_); }
  Progress& progress() { return *progress_; }
  bool stop_requested() const { return stop_->load(); }

  // This run is trained by every rank of `comm` together (--distribute data): rank 0 alone
  // evaluates and writes files, a restored checkpoint must be at the same step on every rank,
  // and the run stops when the ranks agreed to (`agreed_stop`, set by the optimisation step).
  void train_on(dist::Communicator& comm, const std::atomic<bool>& agreed_stop) {
    comm_ = &comm;
    stop_ = &agreed_stop;
    writes_ = comm.rank() == 0;
  }
  // Whether this process evaluates the run and writes its files (false on ranks other than 0 of
  // a data-parallel run).
  bool writes() const { return writes_; }

  // The training batches' random stream: the same for every variant of a seed.
  Rng& data() { return data_; }
  // Mixes a batch into the run's data hash (FNV-1a over its bytes; a batch on another device is
  // hashed from a host copy).
  template <class T, class Device>
  void see_batch(const Tensor<T, Device>& x) {
    const Tensor<T> c = x.template to_device<cpu>().contiguous();
    const auto* p = reinterpret_cast<const unsigned char*>(c.data());
    for (std::size_t i = 0; i < static_cast<std::size_t>(c.numel()) * sizeof(T); ++i)
      result_.batch_hash = (result_.batch_hash ^ p[i]) * 0x100000001b3ull;
    ++result_.batches;
  }

  void log(int64_t step, const io::LogRow& row) {
    Json j;
    j["step"] = step;
    for (const auto& [k, v] : row) j[k] = v.json();
    append(j);
  }

  // Restores the last checkpoint into model and optimizer; returns its step (0: none).
  template <class M, class O>
  int64_t restore(M& model, O& opt) {
    const int64_t step = restore_here(model, opt);
    if (comm_ == nullptr) return step;
    const int64_t root = dist::from_root(*comm_, step);
    double differs = root != step ? 1.0 : 0.0;
    comm_->all_reduce_max(&differs, 1);
    SINKLAB_CHECK(differs == 0, "experiment: ", tag(), ": rank 0 resumes at step ", root, " but ",
                  dist::rank_text(*comm_), " at step ", step, " from '", dir_.string(),
                  "': --out must be a folder every rank sees (one host, or a shared filesystem)");
    return step;
  }

  template <class M, class O>
  void checkpoint(M& model, O& opt, int64_t step) {
    if (!writes_) return;
    io::Metadata meta{{"experiment.step", std::to_string(step)},
                      {"experiment.data_counter", std::to_string(data_.counter())},
                      {"experiment.batch_hash", std::to_string(result_.batch_hash)},
                      {"experiment.batches", std::to_string(result_.batches)},
                      {"experiment.ema_loss", Json(ema_).dump()},
                      {"experiment.seconds", Json(seconds()).dump()},
                      {"experiment.variant", variant_},
                      {"experiment.seed", std::to_string(seed_)}};
    io::save_optimizer_state(opt, dir_ / "checkpoint.optimizer.safetensors", meta);
    io::save_parameters(model, dir_ / "checkpoint.safetensors", meta);
  }

  // Final weights and result.json; the run counts as done from here on.
  template <class M>
  void finish(M& model, const Json& extra = Json::object()) {
    result_.final = result_.history.empty() ? Json::object() : result_.history.back();
    for (const auto& [k, v] : extra.items()) result_.final[k] = v;
    result_.seconds = seconds();
    if (!writes_) return;
    io::save_parameters(model, dir_ / "final.safetensors",
                        {{"experiment.variant", variant_}, {"experiment.seed", std::to_string(seed_)}});
    Json r;
    r["variant"] = variant_;
    r["seed"] = seed_;
    r["seconds"] = result_.seconds;
    r["diverged"] = result_.diverged;
    r["batch_hash"] = std::to_string(result_.batch_hash);
    r["batches"] = result_.batches;
    r["final"] = result_.final;
    write_json(dir_ / "result.json", r);
    if (result_.diverged) return;  // the last good checkpoint stays, for a look or a restart
    std::error_code ec;
    fs::remove(dir_ / "checkpoint.safetensors", ec);
    fs::remove(dir_ / "checkpoint.optimizer.safetensors", ec);
  }

  // A finished run read back from its directory (--resume skips it).
  static RunResult load(const fs::path& dir) {
    const Json r = read_json(dir / "result.json");
    RunResult res;
    res.variant = r.at("variant").get<std::string>();
    res.seed = r.at("seed").get<uint64_t>();
    res.seconds = r.value("seconds", 0.0);
    res.diverged = r.value("diverged", false);
    res.batch_hash = std::stoull(r.value("batch_hash", std::string("0")));
    res.batches = r.value("batches", int64_t{0});
    res.final = r.at("final");
    res.history = read_history(dir / "metrics.jsonl");
    return res;
  }

  RunResult& result() { return result_; }
  double& ema_loss() { return ema_; }
  void mark_diverged() { result_.diverged = true; }
  double seconds() const {
    return seconds_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  // This process's restore from the run directory.
  template <class M, class O>
  int64_t restore_here(M& model, O& opt) {
    const fs::path ck = dir_ / "checkpoint.safetensors", ock = dir_ / "checkpoint.optimizer.safetensors";
    if (!fs::exists(ck) || !fs::exists(ock)) {
      reset_logs(-1);
      return 0;
    }
    const io::Metadata meta = io::load_parameters(model, ck);
    const io::Metadata ometa = io::load_optimizer_state(opt, ock);
    const int64_t step = std::stoll(meta.at("experiment.step"));
    SINKLAB_CHECK(ometa.count("experiment.step") && std::stoll(ometa.at("experiment.step")) == step,
                  "experiment: ", tag(), ": the checkpoint's model (step ", step,
                  ") and optimizer state disagree; delete '", ck.string(), "' to restart this run");
    data_.set_counter(std::stoull(meta.at("experiment.data_counter")));
    result_.batch_hash = std::stoull(meta.at("experiment.batch_hash"));
    result_.batches = std::stoll(meta.at("experiment.batches"));
    ema_ = std::stod(meta.at("experiment.ema_loss"));
    seconds_before_ = std::stod(meta.at("experiment.seconds"));
    reset_logs(step);
    return step;
  }

  static std::vector<Json> read_history(const fs::path& file) {
    std::vector<Json> rows;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) rows.push_back(Json::parse(line));
    return rows;
  }
  // Keeps the logged rows up to `step` (all of them dropped with step < 0) and rewrites both logs.
  void reset_logs(int64_t step) {
    if (!writes_) {  // the logs are rank 0's: this rank neither evaluates nor writes
      result_.history.clear();
      return;
    }
    std::vector<Json> keep;
    if (step >= 0 && fs::exists(dir_ / "metrics.jsonl"))
      for (auto& j : read_history(dir_ / "metrics.jsonl"))
        if (j.value("step", int64_t{-1}) <= step) keep.push_back(std::move(j));
    std::error_code ec;
    fs::remove(dir_ / "metrics.jsonl", ec);
    fs::remove(dir_ / "metrics.csv", ec);
    result_.history.clear();
    for (const auto& j : keep) append(j);
  }
  void append(const Json& j) {
    io::LogRow row;
    for (const auto& [k, v] : j.items()) {
      if (v.is_number_integer()) row.emplace_back(k, v.get<int64_t>());
      else if (v.is_number()) row.emplace_back(k, v.get<double>());
      else if (v.is_string()) row.emplace_back(k, v.get<std::string>());
      else if (v.is_boolean()) row.emplace_back(k, v.get<bool>());
      else row.emplace_back(k, NAN);
    }
    if (writes_) {
      io::JsonlLog(dir_ / "metrics.jsonl", true).log(row);
      io::CsvLog(dir_ / "metrics.csv", true).log(row);
    }
    result_.history.push_back(j);
  }

  fs::path dir_;
  std::string variant_;
  uint64_t seed_;
  Rng data_;
  Progress* progress_;
  const std::atomic<bool>* stop_;
  dist::Communicator* comm_ = nullptr;  // set when every rank trains this run together
  bool writes_ = true;
  RunResult result_;
  double ema_ = NAN, seconds_before_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

struct LoopSpec {
  int64_t steps = 1000;
  int64_t eval_every = 100;
  double checkpoint_seconds = 60;  // a checkpoint at an evaluation at most this often (and on Ctrl-C)
  double ema = 0.95;               // smoothing of the logged train loss
  // One report line per evaluation; default: the first few numbers of the evaluation's row.
  std::function<std::string(const io::LogRow&)> report{};
  // A training loss above this (an explosion, not a slow start) also ends the run as diverged.
  double diverge_above = std::numeric_limits<double>::infinity();
  // Figures measured once on the final model (post-training quantization, say), added to the
  // final evaluation in result.json; not called for a diverged run.
  std::function<Json()> at_end{};
};

inline std::string default_report(const io::LogRow& row) {
  std::string s;
  int shown = 0;
  for (const auto& [k, v] : row) {
    if (v.kind() == io::LogValue::Kind::Text || shown == 6) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.4g", shown ? " " : "", k.c_str(),
                  v.kind() == io::LogValue::Kind::Real ? v.real() : double(v.integer()));
    s += buf;
    ++shown;
  }
  return s;
}

template <class M, class O, class Step, class Eval>
void train(Run& run, M& model, O& opt, const LoopSpec& spec, Step&& step_fn, Eval&& eval_fn) {
  using Clock = std::chrono::steady_clock;
  Progress& progress = run.progress();
  const int64_t start = run.restore(model, opt);
  progress.skip(start);
  auto evaluate = [&](int64_t step) {
    if (!run.writes()) return;  // a data-parallel run is evaluated by rank 0
    progress.pause();
    io::LogRow metrics = eval_fn(step);
    io::LogRow row{{"train_loss", run.ema_loss()}};
    row.insert(row.end(), metrics.begin(), metrics.end());
    run.log(step, row);
    progress.print(progress.line(run.tag(), step, spec.steps, run.ema_loss()) + " | " +
                   (spec.report ? spec.report(metrics) : default_report(metrics)));
    progress.resume();
  };
  if (start == 0) evaluate(0);
  else progress.print("[" + run.tag() + "] resumed from the checkpoint at step " + std::to_string(start));
  auto last_checkpoint = Clock::now();
  progress.resume();
  for (int64_t step = start + 1; step <= spec.steps; ++step) {
    double loss = NAN;
    std::string why;
    try {
      DataParallelRun* dp = active_data_parallel();
      const int64_t dp_steps = dp ? dp->steps() : 0;
      loss = step_fn(run.data());
      SINKLAB_CHECK(!dp || dp->steps() > dp_steps, "experiment: ", run.tag(),
                    ": --distribute data, but this example's training step does not go through "
                    "experiment::optimisation_step, which splits each batch over the ranks and averages the "
                    "gradients; run it with --distribute runs (whole runs spread over the ranks)");
      if (!std::isfinite(loss) || loss > spec.diverge_above)
        why = "the loss is " + std::to_string(loss) +
              (std::isfinite(loss) ? " (above " + std::to_string(spec.diverge_above) + ")" : "");
    } catch (const autodiff::NonFinite& e) {
      why = e.what();
    }
    if (!why.empty()) {
      run.mark_diverged();
      progress.print("[" + run.tag() + "] diverged at step " + std::to_string(step) + ": " + why +
                     "; the run ends here (recorded as diverged; its last good checkpoint is kept)");
      progress.skip(spec.steps - step);
      run.finish(model, Json{{"diverged_at", step}, {"diverged_because", why}});
      return;
    }
    double& ema = run.ema_loss();
    ema = std::isnan(ema) ? loss : spec.ema * ema + (1 - spec.ema) * loss;
    progress.step(run.tag(), step, spec.steps, ema);
    const bool eval_now = step % spec.eval_every == 0 || step == spec.steps;
    if (eval_now) evaluate(step);
    if (run.stop_requested() && step < spec.steps) {
      run.checkpoint(model, opt, step);
      throw Interrupted(run.tag() + ": stopped at step " + std::to_string(step) + " (checkpoint saved)");
    }
    if (eval_now && step < spec.steps &&
        std::chrono::duration<double>(Clock::now() - last_checkpoint).count() >= spec.checkpoint_seconds) {
      progress.pause();
      run.checkpoint(model, opt, step);
      last_checkpoint = Clock::now();
      progress.resume();
    }
  }
  Json extra = Json::object();
  if (spec.at_end && run.writes()) {
    progress.pause();
    extra = spec.at_end();
    progress.resume();
  }
  run.finish(model, extra);
}

}  // namespace sinklab::experiment
