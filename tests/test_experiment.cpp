// The experiment harness: summary statistics, tables and verdicts, the output-directory guard,
// paired starts, and a run that is killed or interrupted and resumed ending on exactly the
// numbers of a run that never stopped.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
using namespace sinklab::experiment;
using autodiff::Parameter;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("sinklab_test_experiment_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// y = x·W + b fitted to a fixed linear target, plus a parameter only some variants have.
struct Toy {
  Parameter<float> w, b, extra;
  bool has_extra = false;
  Toy(uint64_t seed, bool extra_param) : has_extra(extra_param) {
    Rng rng(seed);
    Tensor<float> wt = Tensor<float>::empty({4, 3});
    rng.fill_normal(wt, 0.f, 0.5f);
    w = Parameter<float>("w", wt);
    b = Parameter<float>("b", Tensor<float>::zeros({3}));
    if (extra_param) extra = Parameter<float>("gate.weight", Tensor<float>::full({3}, 0.25f));
  }
  template <class F>
  void parameters(F&& f) {
    f(w);
    f(b);
    if (has_extra) f(extra);
  }
};

Tensor<float> target_w() {
  Tensor<float> t = Tensor<float>::empty({4, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = 0.1f * float(i % 5) - 0.2f;
  return t;
}

struct ToyTrainer {
  int64_t steps = 40, kill_at = -1, signal_at = -1, poison_at = -1;
  double diverge_above = std::numeric_limits<double>::infinity();
  int at_end_calls = 0;
  double eval_loss(Toy& m, const Tensor<float>& x, const Tensor<float>& y) {
    autodiff::no_grad off;
    autodiff::Tape<float> tape;
    auto d = autodiff::sub(autodiff::add(autodiff::matmul(tape.constant(x), tape.param(m.w)), tape.param(m.b)),
                           tape.constant(y));
    return autodiff::mean(autodiff::square(d)).item();
  }
  void operator()(Run& run) {
    Toy m(run.seed(), run.variant() != "plain");
    if (run.variant() != "plain") TensorBank::of(*std::make_unique<Toy>(run.seed(), false)).apply(m);
    std::vector<Parameter<float>*> ps;
    m.parameters([&](Parameter<float>& p) { ps.push_back(&p); });
    optim::AdamW<float> opt(ps, {.lr = 0.05});
    autodiff::Tape<float> tape;
    const Tensor<float> tw = target_w();
    Rng er(99);
    Tensor<float> ex = Tensor<float>::empty({8, 4});
    er.fill_normal(ex, 0.f, 1.f);
    autodiff::Tape<float> t1;
    const Tensor<float> ey = autodiff::matmul(t1.constant(ex), t1.constant(tw)).value();
    int64_t step = 0;
    train(run, m, opt,
          {.steps = steps, .eval_every = 5, .checkpoint_seconds = 0, .diverge_above = diverge_above,
           .at_end = [&] {
             const double w = m.w.value.data()[0];
             return Json{{"at_end", ++at_end_calls}, {"w_final", w}, {"L0_w", w}, {"L1_w", 2 * w}};
           }},
          [&](Rng& data) {
            step = static_cast<int64_t>(opt.step_count()) + 1;
            if (step == kill_at) throw std::runtime_error("killed");
            if (step == signal_at) std::raise(SIGINT);
            if (step == poison_at) m.w.value.data()[0] = std::numeric_limits<float>::quiet_NaN();
            Tensor<float> x = Tensor<float>::empty({16, 4});
            data.fill_normal(x, 0.f, 1.f);
            run.see_batch(x);
            autodiff::Tape<float> t2;
            const Tensor<float> y = autodiff::matmul(t2.constant(x), t2.constant(tw)).value();
            tape.clear();
            opt.zero_grad();
            auto d = autodiff::sub(autodiff::add(autodiff::matmul(tape.constant(x), tape.param(m.w)), tape.param(m.b)),
                                   tape.constant(y));
            auto loss = autodiff::mean(autodiff::square(d));
            tape.backward(loss);
            opt.step();
            return loss.item();
          },
          [&](int64_t) { return io::LogRow{{"eval_loss", eval_loss(m, ex, ey)}, {"w0", double(m.w.value.data()[0])}}; });
  }
};

struct WrongShape {
  Parameter<float> w{"w", Tensor<float>::zeros({3, 4})};
  template <class F>
  void parameters(F&& f) {
    f(w);
  }
};

CommonFlags flags_for(const fs::path& out) {
  CommonFlags f;
  f.out = out.string();
  f.seeds = {3, 4};
  f.steps = 40;
  return f;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("summarize: mean, sample sd, min, max; non-finite values counted but left out") {
  const Spread s = summarize({1, 2, 3, 4, NAN});
  CHECK(s.n == 5);
  CHECK(s.n_finite == 4);
  CHECK(s.mean == doctest::Approx(2.5));
  CHECK(s.sd == doctest::Approx(1.2909944487));
  CHECK(s.min == 1);
  CHECK(s.max == 4);
  CHECK(s.str(2) == "2.50 ± 1.29 (1.00..4.00) [1 non-finite]");
  CHECK(summarize({7}).str(1) == "7.0");
  CHECK(summarize({7}).sd == 0);
  CHECK(summarize({}).str() == "n/a");
  CHECK(summarize({NAN}).short_str() == "n/a");
}

TEST_CASE("paired_difference: clear only when every seed agrees in sign and |mean| >= sd; otherwise inconclusive") {
  const auto up = experiment::paired_difference({0.2, 0.3, 0.25});
  CHECK(up.clear());
  CHECK(up.sign() == 1);
  CHECK(up.positive == 3);
  CHECK(up.str(2) == "0.25 ± 0.05, 3/3 seeds > 0");
  CHECK(experiment::paired_difference({-0.2, -0.3, NAN}).sign() == -1);
  // One seed against the others, a tie, a mean inside its sd, a single seed: inconclusive.
  CHECK(experiment::paired_difference({0.2, 0.3, -0.1}).sign() == 0);
  CHECK(experiment::paired_difference({0.2, 0.0, 0.3}).sign() == 0);
  CHECK(experiment::paired_difference({0.01, 0.5, 0.02}).sign() == 0);  // mean 0.18 < sd 0.28
  CHECK(experiment::paired_difference({0.4}).sign() == 0);
  CHECK(experiment::paired_difference({0.4}).str(1) == "0.4, 1/1 seed > 0");
  CHECK(experiment::paired_difference({-0.005, 0.004, -0.012}).str(3) == "-0.004 ± 0.008, 2/3 seeds < 0");
  CHECK(experiment::paired_difference({}).str() == "n/a");
  CHECK(std::string(experiment::to_string(experiment::Verdict::Inconclusive)) == "inconclusive");
}

TEST_CASE("fit_line: least squares through finite pairs; too few points or a constant x give no slope") {
  const LineFit f = fit_line({0, 1, 2, 3, NAN}, {1, 3, 5, 7, 100});
  CHECK(f.n == 4);
  CHECK(f.slope == doctest::Approx(2.0));
  CHECK(f.intercept == doctest::Approx(1.0));
  CHECK(f.r2 == doctest::Approx(1.0));
  const LineFit g = fit_line({0, 1, 2, 3}, {0, 2, 0, 2});  // slope 0.4, r² 0.2
  CHECK(g.slope == doctest::Approx(0.4));
  CHECK(g.r2 == doctest::Approx(0.2));
  CHECK(std::isnan(fit_line({1}, {1}).slope));
  CHECK(std::isnan(fit_line({2, 2, 2}, {1, 2, 3}).slope));
}

TEST_CASE("Table: markdown escapes cells, aligned text, rows must match the header") {
  Table t({"variant", "Attn_<s>"});
  t.row({"a|b", "0.9"});
  CHECK(t.markdown() == "| variant | Attn_&lt;s&gt; |\n|---|---:|\n| a\\|b | 0.9 |\n");
  CHECK(t.text() == "variant  Attn_<s>\na|b           0.9\n");
  CHECK_THROWS_AS(t.row({"only one"}), Error);
  CHECK(verdict_at_least(0.9, 0.8, 0.5) == Verdict::Reproduced);
  CHECK(verdict_at_least(0.6, 0.8, 0.5) == Verdict::Partly);
  CHECK(verdict_at_least(0.4, 0.8, 0.5) == Verdict::Not);
  CHECK(verdict_at_most(0.1, 0.2, 0.5) == Verdict::Reproduced);
  CHECK(verdict_at_most(0.3, 0.2, 0.5) == Verdict::Partly);
  const std::string c = claims_table({{"sink forms", "~1", "0.91", Verdict::Reproduced, "≥ 0.8"}});
  CHECK(c.find("| sink forms | ~1 | 0.91 | reproduced | ≥ 0.8 |") != std::string::npos);
  const std::string u = claims_table({{"gate removes the sink", "0.01", "no sink formed", Verdict::Untestable, "-"}});
  CHECK(u.find("| untestable here |") != std::string::npos);
  CHECK(fixed(0.12345) == "0.123");
  CHECK(fixed(2.0, 1) == "2.0");
  CHECK(fixed(NAN) == "n/a");
}

TEST_CASE("prepare_output: refuses a non-empty directory, --force replaces only a run directory") {
  const fs::path d = fresh_dir("guard");
  const Json settings{{"lr", 0.1}, {"threads", 2}};
  CHECK(prepare_output(d, OutputMode::Fresh, "exp", settings).is_null());
  CHECK(fs::is_directory(d));
  std::ofstream(d / "notes.txt") << "mine";
  CHECK_THROWS_WITH_AS(prepare_output(d, OutputMode::Fresh, "exp", settings),
                       doctest::Contains("is not empty; pass --resume"), Error);
  CHECK_THROWS_WITH_AS(prepare_output(d, OutputMode::Force, "exp", settings), doctest::Contains("has none"), Error);
  CHECK(fs::exists(d / "notes.txt"));  // nothing was deleted
  write_json(d / "run.json", provenance("exp", settings));
  CHECK_THROWS_WITH_AS(prepare_output(d, OutputMode::Resume, "other", settings), doctest::Contains("holds a run of 'exp'"),
                       Error);
  CHECK_THROWS_WITH_AS(prepare_output(d, OutputMode::Resume, "exp", Json{{"lr", 0.2}, {"threads", 2}}),
                       doctest::Contains("lr: was 0.1, now 0.2"), Error);
  CHECK(prepare_output(d, OutputMode::Resume, "exp", Json{{"lr", 0.1}, {"threads", 8}}, {"threads"})["settings"]["lr"] ==
        0.1);
  prepare_output(d, OutputMode::Force, "exp", settings);
  CHECK(fs::is_empty(d));
  fs::remove_all(d);
}

TEST_CASE("TensorBank: variants start from the reference's tensors by name; shapes must agree") {
  Toy ref(1, false), var(2, true);
  const TensorBank bank = TensorBank::of(ref);
  CHECK(var.w.value.data()[0] != ref.w.value.data()[0]);
  const Pairing p = bank.apply(var);
  CHECK(p.shared == 2);
  CHECK(p.identical == 2);
  CHECK(p.ok());
  CHECK(p.own == std::vector<std::string>{"gate.weight"});
  CHECK(p.line() == "init: 2/2 shared tensors identical to the reference; own: gate.weight");
  for (int64_t i = 0; i < ref.w.numel(); ++i) CHECK(var.w.value.data()[i] == ref.w.value.data()[i]);
  CHECK(var.extra.value.data()[0] == 0.25f);  // its own init kept

  WrongShape wrong;
  CHECK_THROWS_WITH_AS(bank.apply(wrong), doctest::Contains("tensor 'w' has shape"), Error);
}

TEST_CASE("Matrix: paired runs see the same batches; a killed run resumes to the same final numbers") {
  const fs::path a = fresh_dir("uninterrupted"), b = fresh_dir("killed");
  std::vector<std::string> variants{"plain", "gated"};
  const Json settings{{"lr", 0.05}};

  ToyTrainer trainer;
  {
    Matrix m("toy", flags_for(a), variants, settings);
    CHECK(m.run(std::ref(trainer)));
    REQUIRE(m.results().size() == 4);
    // Every variant of a seed saw the same 40 batches; the seeds differ.
    CHECK(m.of("plain")[0]->batch_hash == m.of("gated")[0]->batch_hash);
    CHECK(m.of("plain")[0]->batch_hash != m.of("plain")[1]->batch_hash);
    CHECK(m.of("plain")[0]->batches == 40);
    // Reading the matrix: per-seed paired differences, spreads over seeds.
    const auto d = m.paired("gated", "plain", "w_final");
    REQUIRE(d.size() == 2);
    CHECK(d[1] == m.of("gated")[1]->metric("w_final") - m.of("plain")[1]->metric("w_final"));
    const auto q = m.paired_by("gated", "plain", [](const RunResult& a, const RunResult& b) {
      return a.metric("w_final") / b.metric("w_final");
    });
    REQUIRE(q.size() == 2);
    CHECK(q[0] == m.of("gated")[0]->metric("w_final") / m.of("plain")[0]->metric("w_final"));
    CHECK(m.spread("plain", "w_final").n_finite == 2);
    CHECK(m.spread("plain", "w_final").mean == doctest::Approx((m.finals("plain", "w_final")[0] + m.finals("plain", "w_final")[1]) / 2));
    CHECK(m.diverged("plain") == 0);
    // Per-layer metrics L<l>_<name>: a row per variant, a column per layer, means over seeds.
    CHECK(Matrix::layer_metric(1, "w") == "L1_w");
    const std::string lt = m.layer_table("w", 2, {"gated"}, 4);
    CHECK(lt.find("| variant | layer 1 | layer 2 |") != std::string::npos);
    CHECK(lt.find("| gated | " + fixed(m.spread("gated", "w_final").mean, 4) + " | " +
                  fixed(2 * m.spread("gated", "w_final").mean, 4) + " |") != std::string::npos);
    CHECK(fs::exists(m.run_dir("gated", 4) / "final.safetensors"));
    CHECK(!fs::exists(m.run_dir("gated", 4) / "checkpoint.safetensors"));
    CHECK(read(m.out() / "run.json").find("\"experiment\": \"toy\"") != std::string::npos);
  }

  // Killed at step 23 of the first run (the last checkpoint is at step 20): the exception ends the
  // matrix; the run directory keeps rows up to 20 plus whatever was logged after it.
  ToyTrainer killer;
  killer.kill_at = 23;
  {
    Matrix m("toy", flags_for(b), variants, settings);
    CHECK_THROWS_WITH(m.run(std::ref(killer)), "killed");
  }
  CHECK(fs::exists(b / "runs/plain/seed3/checkpoint.safetensors"));
  // Without --resume or --force the directory is refused.
  CHECK_THROWS_AS(Matrix("toy", flags_for(b), variants, settings), Error);
  // A changed setting is refused on --resume.
  CommonFlags rf = flags_for(b);
  rf.resume = true;
  CHECK_THROWS_WITH_AS(Matrix("toy", rf, variants, Json{{"lr", 0.01}}), doctest::Contains("lr: was 0.05"), Error);

  // Interrupted by SIGINT during the second variant of seed 3 (after resuming the first).
  ToyTrainer interrupted;
  interrupted.signal_at = 12;
  int calls = 0;
  {
    Matrix m("toy", rf, variants, settings);
    CHECK_FALSE(m.run([&](Run& r) {
      ++calls;
      if (r.variant() == "plain") ToyTrainer{}(r);
      else interrupted(r);
    }));
    CHECK(m.interrupted());
    CHECK(m.results().size() == 1);
  }
  CHECK(calls == 2);
  CHECK(fs::exists(b / "runs/gated/seed3/checkpoint.safetensors"));

  // Resume again: the finished run is read back, not re-run; the rest complete.
  calls = 0;
  Matrix m("toy", rf, variants, settings);
  CHECK(m.run([&](Run& r) {
    ++calls;
    trainer(r);
  }));
  CHECK(calls == 3);
  Matrix again_a("toy", [&] { auto f = flags_for(a); f.resume = true; return f; }(), variants, settings);
  again_a.run([&](Run&) { FAIL("every run of the uninterrupted matrix is finished"); });
  for (const auto& v : variants)
    for (uint64_t s : {3, 4}) {
      const auto* x = again_a.of(v)[s - 3];
      const auto* y = m.of(v)[s - 3];
      CAPTURE(v);
      CAPTURE(s);
      CHECK(x->metric("eval_loss") == y->metric("eval_loss"));  // bit for bit
      CHECK(x->metric("w0") == y->metric("w0"));
      CHECK(x->batch_hash == y->batch_hash);
      CHECK(read(again_a.run_dir(v, s) / "metrics.jsonl") == read(m.run_dir(v, s) / "metrics.jsonl"));
      CHECK(read(again_a.run_dir(v, s) / "metrics.csv") == read(m.run_dir(v, s) / "metrics.csv"));
      CHECK(x->history.size() == 9);  // steps 0, 5, ..., 40
    }
  CHECK(read(b / "run.json").find("\"resumed\"") != std::string::npos);
  // More seeds or variants may be added to a finished matrix on --resume; only they run.
  {
    CommonFlags more = rf;
    more.seeds = {3, 4, 5};
    Matrix bigger("toy", more, variants, settings);
    calls = 0;
    CHECK(bigger.run([&](Run& r) {
      ++calls;
      CHECK(r.seed() == 5);
      trainer(r);
    }));
    CHECK(calls == 2);
    CHECK(bigger.results().size() == 6);
  }

  // Dynamics over seeds: one row per logged step with mean, min and max.
  write_dynamics(a / "dyn.csv", again_a.of("plain"), {"eval_loss"});
  const std::string dyn = read(a / "dyn.csv");
  CHECK(dyn.rfind("step,eval_loss_mean,eval_loss_min,eval_loss_max\n", 0) == 0);
  CHECK(std::count(dyn.begin(), dyn.end(), '\n') == 10);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("Matrix --summarize: finished runs are read back, unfinished ones left out, nothing trains") {
  const fs::path d = fresh_dir("summarize");
  const std::vector<std::string> variants{"plain", "gated"};
  const Json settings{{"lr", 0.05}};
  ToyTrainer trainer;
  {  // plain in seeds 3 and 4, gated in seed 3 only: uneven seeds, as runs kept from two matrices
    Matrix plain("toy", flags_for(d), {"plain"}, settings);
    CHECK(plain.run(std::ref(trainer)));
    CommonFlags f = flags_for(d);
    f.resume = true;
    f.seeds = {3};
    Matrix gated("toy", f, {"gated"}, settings);
    CHECK(gated.run(std::ref(trainer)));
  }
  const std::string meta = read(d / "run.json");
  CommonFlags s = flags_for(d);
  s.summarize = true;
  Matrix m("toy", s, variants, settings);
  CHECK(m.run([&](Run&) { FAIL("--summarize trains nothing"); }));
  CHECK(m.of("plain").size() == 2);
  REQUIRE(m.of("gated").size() == 1);
  CHECK(m.of("gated")[0]->seed == 3);
  CHECK(m.paired("gated", "plain", "w_final").size() == 1);
  CHECK(!fs::exists(m.run_dir("gated", 4)));
  CHECK(read(d / "run.json") == meta);  // the folder still describes the runs it holds
  // The settings are checked as on --resume; a folder without the runs listed is refused.
  CHECK_THROWS_WITH_AS(Matrix("toy", s, variants, Json{{"lr", 0.01}}),
                       doctest::Contains("--summarize: the settings differ"), Error);
  CommonFlags missing = s;
  missing.seeds = {9};
  Matrix none("toy", missing, variants, settings);
  CHECK_THROWS_WITH_AS(none.run([&](Run&) {}), doctest::Contains("none of the runs"), Error);
  CommonFlags elsewhere = s;
  elsewhere.out = fresh_dir("summarize_empty").string();
  CHECK_THROWS_WITH_AS(Matrix("toy", elsewhere, variants, settings), doctest::Contains("holds no runs to summarize"),
                       Error);
  fs::remove_all(d);
}

TEST_CASE("train: a loss above diverge_above ends the run as diverged; at_end adds to the final result") {
  const fs::path d = fresh_dir("diverge");
  CommonFlags f = flags_for(d);
  f.seeds = {3};
  ToyTrainer exploding;
  exploding.diverge_above = 0.0;  // every loss is above it: the run diverges at step 1
  Matrix m("toy", f, {"plain"}, Json::object());
  CHECK(m.run(std::ref(exploding)));
  const RunResult& r = *m.of("plain")[0];
  CHECK(r.diverged);
  CHECK(r.metric("diverged_at") == 1);
  CHECK(exploding.at_end_calls == 0);  // nothing is measured on a diverged model
  CHECK(std::isnan(r.metric("w_final")));
  CHECK(m.diverged("plain") == 1);
  CHECK(m.spread("plain", "w_final").n == 1);
  CHECK(m.spread("plain", "w_final").n_finite == 0);
  CHECK(m.paired("plain", "plain", "w_final").empty());  // a diverged run pairs with nothing

  CommonFlags g = flags_for(fresh_dir("at_end"));
  g.seeds = {3};
  ToyTrainer fine;
  Matrix n("toy", g, {"plain"}, Json::object());
  CHECK(n.run(std::ref(fine)));
  CHECK(fine.at_end_calls == 1);
  CHECK_FALSE(n.of("plain")[0]->diverged);
  CHECK(n.of("plain")[0]->metric("at_end") == 1);
  CHECK(std::isfinite(n.of("plain")[0]->metric("w_final")));
  CHECK(n.of("plain")[0]->metric("eval_loss") >= 0);  // the last evaluation is still there
  // Read back from disk, the added figures are part of the final result.
  CHECK(Run::load(n.run_dir("plain", 3)).metric("at_end") == 1);
  fs::remove_all(d);
  fs::remove_all(n.out());
}

TEST_CASE("Progress: plain lines when piped, ETA over the whole matrix") {
  Progress p(100, false);
  p.step("v s0", 1, 50, 2.0);
  CHECK(p.done() == 1);
  const std::string l = p.line("v s0", 1, 50, 2.0);
  CHECK(l.rfind("[v s0] step 1/50 loss 2.0000", 0) == 0);
  CHECK(format_duration(3725) == "1h02m");
  CHECK(format_duration(75) == "1m15s");
  CHECK(format_duration(NAN) == "?");
}

TEST_CASE("Matrix: a NaN ends a run as diverged, naming the parameter; the matrix goes on, the checkpoint stays") {
  for (bool guard : {true, false}) {
    CAPTURE(guard);
    const fs::path d = fresh_dir(guard ? "nonfinite" : "nonfinite_unguarded");
    ToyTrainer poisoned;
    poisoned.poison_at = 17;  // the last checkpoint before it is at step 15
    CommonFlags f = flags_for(d);
    f.check_finite = guard;
    Matrix m("toy", f, {"plain", "gated"}, Json{{"lr", 0.05}});
    CHECK(m.run([&](Run& r) {
      if (r.variant() == "plain" && r.seed() == 3) poisoned(r);
      else ToyTrainer{}(r);
    }));
    REQUIRE(m.results().size() == 4);
    CHECK(m.diverged("plain") == 1);
    CHECK(m.diverged("gated") == 0);
    const RunResult* r = m.of("plain")[0];
    CHECK(r->diverged);
    CHECK(r->final.at("diverged_at").get<int64_t>() == 17);
    const std::string why = r->final.at("diverged_because").get<std::string>();
    // With the guard the parameter is named; without it only the loss shows the NaN.
    CHECK(why.find(guard ? "parameter 'w'" : "the loss is nan") != std::string::npos);
    CHECK(fs::exists(m.run_dir("plain", 3) / "checkpoint.safetensors"));
    CHECK(fs::exists(m.run_dir("plain", 3) / "result.json"));
    fs::remove_all(d);
  }
}

TEST_CASE("Matrix --precision bf16: every tape a run creates multiplies in bf16, recorded in run.json; fp32 afterwards") {
  const fs::path d = fresh_dir("precision");
  CommonFlags f = flags_for(d);
  f.precision = "bf16";
  Matrix m("toy", f, {"plain"}, Json{{"lr", 0.05}});
  int runs = 0;
  CHECK(m.run([&](Run& r) {
    autodiff::Tape<float> tape;
    CHECK(tape.precision() == kernels::Precision::bf16);
    ++runs;
    ToyTrainer{}(r);
  }));
  CHECK(runs == 2);
  CHECK(autodiff::Tape<float>{}.precision() == kernels::Precision::fp32);
  CHECK(read_json(d / "run.json")["settings"]["precision"] == "bf16");
  // A matrix in fp32 leaves the key out, so run directories from before the flag still resume.
  const fs::path d32 = fresh_dir("precision32");
  Matrix m32("toy", flags_for(d32), {"plain"}, Json{{"lr", 0.05}});
  CHECK_FALSE(read_json(d32 / "run.json")["settings"].contains("precision"));
  fs::remove_all(d);
  fs::remove_all(d32);
}
