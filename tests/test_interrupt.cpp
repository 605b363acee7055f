// A run stopped by a real SIGINT or SIGTERM, sent by another process at a random step, resumes
// to the same parameters, bit for bit, as a run that was never stopped — for SGD with momentum,
// Muon (with AdamW for the vectors) and AdamW state alike. The matrix runs in a child process
// that reports each finished step through a pipe; the parent signals it, waits for it to save
// and exit, and starts it again with --resume until the matrix is complete.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/sgd.hpp"

using namespace sinklab;
using namespace sinklab::experiment;
using autodiff::Parameter;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kVariants{"sgd", "muon", "adamw"};
constexpr int64_t kSteps = 60;

// y = tanh(x·W1)·W2 fitted to a fixed target: two matrices for Muon, a bias for AdamW's part.
struct Net {
  Parameter<float> w1, w2, b;
  explicit Net(uint64_t seed) {
    Rng rng(seed);
    w1 = Parameter<float>("w1", rng.normal<float>({6, 8}, 0.f, 0.4f));
    w2 = Parameter<float>("w2", rng.normal<float>({8, 3}, 0.f, 0.4f));
    b = Parameter<float>("b", Tensor<float>::zeros({3}));
  }
  template <class F>
  void parameters(F&& f) {
    f(w1);
    f(w2);
    f(b);
  }
  autodiff::Var<float> forward(autodiff::Tape<float>& t, const Tensor<float>& x) {
    using namespace autodiff;
    return add(matmul(tanh(matmul(t.constant(x), t.param(w1))), t.param(w2)), t.param(b));
  }
};

// One run: the optimiser named by the variant; after each step, one byte to `report_fd` (the
// variant's index) and a short pause, so a signal can land anywhere in the run.
template <class Opt>
void train_with(Run& run, Net& net, Opt& opt, int report_fd) {
  autodiff::Tape<float> tape;
  const Tensor<float> target = Rng(77).normal<float>({6, 3});
  const char id = static_cast<char>(std::find(kVariants.begin(), kVariants.end(), run.variant()) - kVariants.begin());
  train(run, net, opt, {.steps = kSteps, .eval_every = 10, .checkpoint_seconds = 1e9},
        [&](Rng& data) {
          Tensor<float> x = data.normal<float>({16, 6});
          run.see_batch(x);
          autodiff::Tape<float> t2;
          const Tensor<float> y = autodiff::matmul(t2.constant(x), t2.constant(target)).value();
          tape.clear();
          opt.zero_grad();
          auto loss = autodiff::mean(autodiff::square(autodiff::sub(net.forward(tape, x), tape.constant(y))));
          tape.backward(loss);
          opt.step();
          if (report_fd >= 0) {
            [[maybe_unused]] auto n = ::write(report_fd, &id, 1);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          return loss.item();
        },
        [&](int64_t) { return io::LogRow{{"w1_0", double(net.w1.value.data()[0])}}; });
}

void run_matrix(const fs::path& out, bool resume, int report_fd) {
  CommonFlags f;
  f.out = out.string();
  f.seeds = {5};
  f.steps = kSteps;
  f.resume = resume;
  Matrix m("interrupt", f, kVariants, Json{{"net", "6-8-3"}});
  const bool done = m.run([&](Run& r) {
    Net net(r.seed());
    auto params = [&] {
      std::vector<Parameter<float>*> ps;
      net.parameters([&](Parameter<float>& p) { ps.push_back(&p); });
      return ps;
    };
    if (r.variant() == "sgd") {
      optim::SGD<float> opt(params(), {.lr = 0.05, .momentum = 0.9});
      train_with(r, net, opt, report_fd);
    } else if (r.variant() == "muon") {
      optim::MuonAdamW<float> opt(params(), {.lr = 0.02}, {.lr = 0.01});
      train_with(r, net, opt, report_fd);
    } else {
      optim::AdamW<float> opt(params(), {.lr = 0.01});
      train_with(r, net, opt, report_fd);
    }
  });
  if (!done && report_fd >= 0) ::_exit(3);  // interrupted, checkpoint saved
}

std::vector<float> final_values(const fs::path& run_dir) {
  const auto f = io::SafetensorsFile::read(run_dir / "final.safetensors");
  std::vector<float> v;
  for (const char* name : {"w1", "w2", "b"})
    for (float x : f.get<float>(name).to_vector()) v.push_back(x);
  return v;
}

}  // namespace

TEST_CASE("a run killed by a real SIGINT/SIGTERM at a random step resumes bit-exactly (SGD, Muon, AdamW)") {
  const std::string tag = std::to_string(::getpid());
  const fs::path ref = fs::temp_directory_path() / ("sinklab_interrupt_ref_" + tag);
  const fs::path out = fs::temp_directory_path() / ("sinklab_interrupt_" + tag);
  fs::remove_all(ref);
  fs::remove_all(out);
  run_matrix(ref, false, -1);  // uninterrupted, in this process

  std::random_device rd;
  const unsigned seed = rd();
  MESSAGE("kill steps drawn with seed ", seed);
  std::mt19937 pick(seed);
  std::set<int> interrupted;  // variant indices stopped at least once
  int launches = 0, signals = 0;
  for (bool finished = false; !finished;) {
    REQUIRE(++launches <= 8);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(fds[0]);
      try {
        set_num_threads(1);  // only the forking thread exists in the child
        run_matrix(out, launches > 1, fds[1]);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    // Signal the child at a random step of a run whose optimiser has not been stopped yet.
    const int sig = launches % 2 ? SIGTERM : SIGINT;
    int target_variant = -1, at = 0, seen = 0;
    bool sent = false;
    char id;
    while (::read(fds[0], &id, 1) == 1) {
      if (sent) continue;
      if (id != target_variant) {
        target_variant = id;
        seen = 0;
        at = std::uniform_int_distribution<int>(2, kSteps - 5)(pick);
      }
      if (!interrupted.count(id) && ++seen == at) {
        ::kill(child, sig);
        sent = true;
        ++signals;
        interrupted.insert(id);
      }
    }
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CAPTURE(launches);
    if (sent) {
      CHECK(WEXITSTATUS(status) == 3);  // stopped cleanly, checkpoint written
    } else {
      CHECK(WEXITSTATUS(status) == 0);
      finished = true;
    }
  }
  CHECK(signals == 3);  // each optimiser's run was stopped once and resumed
  for (const auto& v : kVariants) {
    CAPTURE(v);
    const fs::path a = ref / "runs" / v / "seed5", b = out / "runs" / v / "seed5";
    CHECK(final_values(b) == final_values(a));  // bit for bit
    CHECK(!fs::exists(b / "checkpoint.safetensors"));
  }
  fs::remove_all(ref);
  fs::remove_all(out);
}
