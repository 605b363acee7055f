// A tiny next-byte model (embedding → MLP → logits) trained with AdamW on a short text:
// the smallest end-to-end run of sinklab (tensors, autodiff, optimiser, schedule), and of
// data-parallel training: under `mpirun -np N` each rank takes 1/N of every batch and
// dist::DataParallel averages the gradients (in one process it is the plain backward pass).
//   train_tiny [--steps N] [--seed S] [--lr LR]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "common/cli_checks.hpp"
#include "common/error_line.hpp"
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/dist/world.hpp"
#include "sinklab/experiment/cli.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

static const char* kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair.";

static int run(int argc, char** argv) {
  CLI::App app{"sinklab: train a tiny next-byte model and print its loss falling"};
  int steps = 400;
  uint64_t seed = 0;
  double lr = 3e-3;
  int context = 4;
  app.add_option("--steps", steps, "training steps")->check(examples::Positive);
  app.add_option("--seed", seed, "random seed");
  app.add_option("--lr", lr, "peak learning rate")->check(examples::Positive);
  app.add_option("--context", context, "bytes of context")->check(CLI::Range(1, 16));
  if (int rc = sinklab::experiment::parse(app, argc, argv); rc >= 0) return rc;
  dist::Communicator& comm = dist::world();  // stdout is rank 0's (experiment::parse)

  const std::string text(kText);
  const int64_t n = static_cast<int64_t>(text.size()) - context;
  const int64_t d = 32, hidden = 128, batch = 64;
  Rng rng(seed);
  nn::Embedding<float> emb("emb", 256, d, rng, nn::Init::normal(0.1));
  nn::Linear<float> up("up", context * d, hidden, rng, nn::Init::fan_in(context * d), true);
  nn::Linear<float> down("down", hidden, 256, rng, nn::Init::fan_in(hidden), true);
  std::vector<Parameter<float>*> params;
  auto collect = [&](Parameter<float>& p) { params.push_back(&p); };
  emb.parameters(collect);
  up.parameters(collect);
  down.parameters(collect);
  optim::AdamW<float> opt(params, {.lr = lr, .weight_decay = 0.01});
  dist::DataParallel<float> dp(comm, params);  // every rank starts from rank 0's parameters
  optim::Schedule sched({.decay = optim::Decay::Cosine, .warmup_steps = steps / 20, .total_steps = steps,
                         .min_lr_ratio = 0.1});

  std::printf("train_tiny: %lld parameters, %d steps, batch %lld, %d bytes of context\n",
              static_cast<long long>(nn::parameter_count<float>(emb) + nn::parameter_count<float>(up) +
                                     nn::parameter_count<float>(down)),
              steps, static_cast<long long>(batch), context);
  if (comm.size() > 1)
    std::printf("train_tiny: %d ranks x %d threads (%s), each on %lld of the batch's %lld rows\n", comm.size(),
                num_threads(), comm.backend().c_str(), static_cast<long long>(batch / comm.size()),
                static_cast<long long>(batch));
  Tape<float> tape;
  Rng data = rng.fork(1);
  struct Batch {
    Tensor<int32_t> x, y;  // context bytes, the byte after them
  } all{Tensor<int32_t>::empty({batch, context}), Tensor<int32_t>::empty({batch})};
  auto& ids = all.x;
  auto& next = all.y;
  const auto t0 = std::chrono::steady_clock::now();
  double avg = 0;
  for (int step = 1; step <= steps; ++step) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t at = data.randint(0, n);
      for (int c = 0; c < context; ++c) ids(b, c) = static_cast<unsigned char>(text[at + c]);
      next(b) = static_cast<unsigned char>(text[at + context]);
    }
    const Batch mine = dist::shard(all, comm);  // this rank's rows
    tape.clear();
    opt.zero_grad();
    auto h = reshape(emb(tape, mine.x), {mine.x.size(0), context * d});
    auto loss = cross_entropy(down(tape, gelu(up(tape, h))), mine.y);
    const double l = dp.backward(tape, loss).loss;  // gradients and loss averaged over the ranks
    opt.set_lr_scale(sched.lr_scale(step - 1));
    opt.step();
    avg = step == 1 ? l : 0.9 * avg + 0.1 * l;
    if (step == 1 || step % 50 == 0 || step == steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %5d  loss %.4f  (smoothed %.4f)  %.1f s\n", step, l, avg, secs);
    }
  }
  std::printf("done: the loss fell from ln(256) = %.3f to %.3f\n", std::log(256.0), avg);
  return 0;
}

int main(int argc, char** argv) {
  try {
    // Stop at the first NaN/Inf in a value or gradient, naming the op or parameter.
    sinklab::autodiff::CheckFinite guard;
    return run(argc, argv);
  } catch (const std::exception& e) {
    examples::print_error("train_tiny", e);
    sinklab::dist::end_all_ranks_on_error(1);
    return 1;
  }
}
