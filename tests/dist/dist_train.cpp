// The program the MPI tests launch (tests/scripts/dist_mpi.sh): a small gated transformer
// trained through experiment::Matrix and experiment::optimisation_step exactly as the examples
// train, so `mpirun -np 2 dist_train --distribute data|runs` exercises the same path they do.
//
//   dist_train --out DIR [--batch 8] [--seeds 0,1] [--steps 20] [--distribute runs|data]
//   dist_train --compare DIR_A DIR_B --tolerance T   every run's final parameters and loss
//
// Failure injection for the tests: --fail-rank R --fail-at S --fail-how kill|throw|stop makes
// rank R, at step S of its first run, kill itself (SIGKILL), throw an error, or raise the
// stop flag as Ctrl-C would (on that rank alone).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sinklab/data/token_batch.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/io/safetensors.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {

using Attn = attn::Attention<score::Softmax, gate::FromInput<gate::per_head, gate::on_output>>;
using Model = nn::Transformer<nn::PreNorm<norm::RMS>, Attn, ffn::SwiGLU, pos::RoPE>;

struct Failure {
  int rank = -1;
  int64_t at = 0;
  std::string how = "throw";
};

// A token stream with structure to learn: each token is the previous one plus a small step.
data::TokenBatch sample(Rng& rng, int64_t B, int64_t T, int32_t vocab) {
  data::TokenBatch b{Tensor<int32_t>::empty({B, T}), Tensor<int32_t>::empty({B, T})};
  for (int64_t r = 0; r < B; ++r) {
    int32_t tok = static_cast<int32_t>(rng.randint(0, vocab));
    for (int64_t t = 0; t < T; ++t) {
      b.x.data()[r * T + t] = tok;
      tok = static_cast<int32_t>((tok + 1 + rng.randint(0, 3)) % vocab);
      b.y.data()[r * T + t] = tok;
    }
  }
  return b;
}

int train(const experiment::CommonFlags& flags, int64_t batch, const Failure& fail, int argc, char** argv) {
  nn::ModelConfig cfg;
  cfg.vocab = 37;
  cfg.d_model = 32;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.kv_heads = 4;
  const int64_t T = 16;
  experiment::Matrix m("dist_train", flags, {"gated"}, experiment::Json{{"batch", batch}, {"d", cfg.d_model}}, argc,
                       argv);
  const int rank = dist::world().rank();
  bool first_run = true;
  const bool done = m.run([&](experiment::Run& run) {
    Rng init(run.seed() * 7 + 1);
    Model::Module<float> model("", cfg, init);
    std::vector<autodiff::Parameter<float>*> params;
    model.parameters([&](autodiff::Parameter<float>& p) { params.push_back(&p); });
    optim::AdamW<float> opt(params, {.lr = 3e-3});
    const optim::Schedule sched(optim::ScheduleOptions{});
    autodiff::Tape<float> tape;
    const bool inject = first_run && rank == fail.rank;
    first_run = false;
    int64_t step = 0;
    experiment::train(
        run, model, opt, {.steps = flags.steps, .eval_every = 5, .checkpoint_seconds = 1e9},
        [&](Rng& data) {
          ++step;
          if (inject && step == fail.at) {
            if (fail.how == "kill") std::raise(SIGKILL);
            if (fail.how == "throw") throw Error("dist_train: the failure injected at step " + std::to_string(step));
            if (fail.how == "stop") experiment::detail::stop_flag().store(true);
          }
          const data::TokenBatch b = sample(data, batch, T, cfg.vocab);
          run.see_batch(b.x);
          return experiment::optimisation_step(tape, model, opt, b, sched, params, 1.0);
        },
        [&](int64_t) { return io::LogRow{{"w0", double(params.front()->value.data()[0])}}; });
  });
  return done ? 0 : 130;
}

// Every run's final parameters and final train loss in `a` against `b`.
int compare(const fs::path& a, const fs::path& b, double tol) {
  double worst = 0, worst_loss = 0;
  int runs = 0;
  for (const auto& e : fs::recursive_directory_iterator(a / "runs")) {
    if (e.path().filename() != "final.safetensors") continue;
    const fs::path rel = fs::relative(e.path(), a);
    const auto fa = io::SafetensorsFile::read(e.path()), fb = io::SafetensorsFile::read(b / rel);
    for (const auto& entry : fa.entries()) {
      const auto va = fa.get<float>(entry.name).to_vector(), vb = fb.get<float>(entry.name).to_vector();
      if (va.size() != vb.size()) {
        std::fprintf(stderr, "compare: %s: '%s' has %zu vs %zu values\n", rel.c_str(), entry.name.c_str(), va.size(),
                     vb.size());
        return 1;
      }
      double scale = 0;
      for (float x : va) scale = std::max(scale, double(std::fabs(x)));
      for (std::size_t i = 0; i < va.size(); ++i)
        worst = std::max(worst, std::fabs(double(va[i]) - double(vb[i])) / std::max(scale, 1e-12));
    }
    const auto ra = experiment::read_json(e.path().parent_path() / "result.json");
    const auto rb = experiment::read_json(b / rel.parent_path() / "result.json");
    const double la = ra["final"]["train_loss"].get<double>(), lb = rb["final"]["train_loss"].get<double>();
    worst_loss = std::max(worst_loss, std::fabs(la - lb) / std::max(std::fabs(la), 1e-12));
    ++runs;
  }
  std::printf("compare: %d run(s); largest parameter difference %.3g (relative to the tensor's largest value), "
              "final train loss %.3g (relative); tolerance %.3g\n",
              runs, worst, worst_loss, tol);
  if (runs == 0) {
    std::fprintf(stderr, "compare: no final.safetensors under %s/runs\n", a.c_str());
    return 1;
  }
  return worst <= tol && worst_loss <= tol ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  experiment::CommonFlags flags{.out = "out/dist_train", .seeds = {0, 1}, .steps = 20};
  int64_t batch = 8;
  Failure fail;
  std::vector<std::string> cmp;
  double tol = 0;
  CLI::App app{"dist_train: the data-parallel tests' training program"};
  experiment::add_common_flags(app, flags);
  app.add_option("--batch", batch, "global batch (rows per step, over all ranks)")->capture_default_str();
  app.add_option("--fail-rank", fail.rank, "the rank that fails (-1: none)")->capture_default_str();
  app.add_option("--fail-at", fail.at, "the step of its first run at which it fails")->capture_default_str();
  app.add_option("--fail-how", fail.how, "kill, throw or stop")
      ->check(CLI::IsMember({"kill", "throw", "stop"}))
      ->capture_default_str();
  app.add_option("--compare", cmp, "compare two output folders instead of training")->expected(2);
  app.add_option("--tolerance", tol, "largest relative difference --compare accepts")->capture_default_str();
  if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
  try {
    if (!cmp.empty()) return compare(cmp[0], cmp[1], tol);
    return train(flags, batch, fail, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_train: %s\n", e.what());
    return 1;
  }
}
