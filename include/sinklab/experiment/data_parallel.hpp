// A matrix's run trained by every rank together (--distribute data under mpirun), as the
// shared optimisation step (experiment/step.hpp) sees it: prepare() gives this rank's rows of
// the batch, backward() averages the gradients over the ranks (dist::DataParallel) and agrees on
// the loss, a divergence and a stop. Matrix::run sets it for each run; the step functions of the
// examples need no change.
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

namespace sinklab::experiment {

class DataParallelRun {
 public:
  DataParallelRun(dist::Communicator& comm, const std::atomic<bool>& local_stop, bool announce)
      : comm_(&comm), local_stop_(&local_stop), announce_(announce) {}

  // The stop the ranks agreed on at the last step (what the run's loop checks).
  const std::atomic<bool>& agreed_stop() const { return agreed_stop_; }
  int64_t steps() const { return steps_; }
  dist::DataParallel<float>* reducer() const { return dp_.get(); }

  // Before the forward pass: this rank's rows of the global batch. At the run's first step the
  // parameters are broadcast from rank 0.
  template <class Batch>
  Batch prepare(const Batch& b, const std::vector<autodiff::Parameter<float>*>& params) {
    if (!dp_ || params_ != &params) {
      dp_ = std::make_unique<dist::DataParallel<float>>(*comm_, params);
      params_ = &params;
    }
    global_rows_ = b.x.size(0);
    return dist::shard(b, *comm_);
  }
  // The backward pass with the gradients averaged over the ranks; the loss averaged too.
  double backward(autodiff::Tape<float>& tape, autodiff::Var<float> loss) {
    SINKLAB_CHECK(dp_ != nullptr, "experiment::DataParallelRun: backward() before prepare()");
    const auto r = dp_->backward(tape, loss, local_stop_->load());
    agreed_stop_.store(r.stop);
    if (announce_) {
      std::printf("data-parallel: %d ranks x %d threads, global batch %lld = %d x %lld rows, %zu gradient buckets\n",
                  comm_->size(), num_threads(), static_cast<long long>(global_rows_), comm_->size(),
                  static_cast<long long>(global_rows_ / comm_->size()), dp_->buckets().size());
      std::fflush(stdout);
      announce_ = false;
    }
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
  int64_t global_rows_ = 0;
  int64_t steps_ = 0;
};

// The run the optimisation step reduces over ranks (null: train alone, the default).
inline DataParallelRun*& active_data_parallel() {
  static DataParallelRun* run = nullptr;
  return run;
}

}  // namespace sinklab::experiment
