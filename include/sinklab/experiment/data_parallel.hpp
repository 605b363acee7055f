// A matrix's run trained by every rank together (--distribute data under mpirun), as the
// shared optimisation step sees it: the step splits the batch it is given over the ranks,
// averages the gradients (dist::DataParallel) and agrees on the loss, a divergence and a stop.
// Matrix::run sets it for each run; the step functions of the examples need no change.
#pragma once
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/schedule.hpp"

namespace sinklab::experiment {

class DataParallelRun {
 public:
  DataParallelRun(dist::Communicator& comm, const std::atomic<bool>& local_stop, bool announce)
      : comm_(&comm), local_stop_(&local_stop), announce_(announce) {}

  // The stop the ranks agreed on at the last step (what the run's loop checks).
  const std::atomic<bool>& agreed_stop() const { return agreed_stop_; }
  int64_t steps() const { return steps_; }
  dist::DataParallel<float>* reducer() const { return dp_.get(); }

  template <class M, class O, class Batch>
  double step(autodiff::Tape<float>& tape, M& model, O& opt, const Batch& b, const optim::Schedule& sched,
              const std::vector<autodiff::Parameter<float>*>& params, double clip_norm) {
    if (!dp_ || params_ != &params) {  // the run's first step: parameters broadcast from rank 0
      dp_ = std::make_unique<dist::DataParallel<float>>(*comm_, params);
      params_ = &params;
    }
    const Batch local = dist::shard(b, *comm_);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, local.x, local.y);
    const auto r = dp_->backward(tape, loss, local_stop_->load());
    agreed_stop_.store(r.stop);
    if (announce_) {
      std::printf("data-parallel: %d ranks x %d threads, global batch %lld = %d x %lld rows, %zu gradient buckets\n",
                  comm_->size(), num_threads(), static_cast<long long>(b.x.size(0)), comm_->size(),
                  static_cast<long long>(local.x.size(0)), dp_->buckets().size());
      std::fflush(stdout);
      announce_ = false;
    }
    if (clip_norm > 0) optim::clip_grad_norm(params, clip_norm);
    opt.set_lr_scale(sched.lr_scale(opt.step_count()));
    opt.step();
    ++steps_;
    return r.loss;
  }

 private:
  dist::Communicator* comm_;
  const std::atomic<bool>* local_stop_;
  bool announce_;
  std::atomic<bool> agreed_stop_{false};
  std::unique_ptr<dist::DataParallel<float>> dp_;
  const void* params_ = nullptr;
  int64_t steps_ = 0;
};

// The run the optimisation step reduces over ranks (null: train alone, the default).
inline DataParallelRun*& active_data_parallel() {
  static DataParallelRun* run = nullptr;
  return run;
}

}  // namespace sinklab::experiment
