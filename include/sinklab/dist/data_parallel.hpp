// Data-parallel training in the DDP style: every rank holds the whole model, computes the
// gradient of its own shard of the batch, and the gradients are averaged over ranks before
// the (identical) optimizer step on every rank.
//
//   dist::DataParallel<float> dp(dist::world(), params);   // parameters broadcast from rank 0
//   tape.clear(); opt.zero_grad();
//   auto loss = model.loss(tape, shard.x, shard.y);         // dist::shard(batch, comm)
//   const auto r = dp.backward(tape, loss);                 // backward + averaged gradients
//   opt.step();                                             // r.loss: the mean over ranks
//
// Gradients are reduced in buckets (consecutive parameters in the order their gradients become
// complete, about Options::bucket_elements each). A tape hook on the first leaf recorded for a
// parameter fires when its gradient is complete; a bucket whose gradients are all complete is
// started (MPI_Iallreduce) while the backward pass goes on producing earlier layers'
// gradients, so communication overlaps computation. Buckets start in one fixed order on every
// rank (collectives must match); the layout is taken from rank 0's first backward pass and
// broadcast. Every trainable parameter is reduced exactly once per step: one that the step did
// not use (a gate that is off) or whose hook never fired goes with the last buckets, after the
// backward pass.
//
// A failure on one rank (autodiff::NonFinite from the guard, any other error) does not leave
// the others waiting: the failing rank still takes part in the step's collectives, and then
// every rank throws the same kind of error naming the rank that failed.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/dist/communicator.hpp"

namespace sinklab::dist {

struct DataParallelOptions {
  int64_t bucket_elements = int64_t{1} << 19;  // 2 MiB of float gradients per bucket
  bool overlap = true;                         // false: every bucket starts after backward (for comparison)
};

// What one step's communication cost and did.
struct StepStats {
  double backward_seconds = 0;  // tape.backward, including the hooks that start buckets
  double wait_seconds = 0;      // after backward, waiting for the reductions: communication not hidden
  int64_t buckets = 0;
  int64_t buckets_overlapped = 0;  // started inside the backward pass
  int64_t elements = 0;            // gradient elements reduced
};

template <class T, class Device = cpu>
class DataParallel {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "DataParallel: float or double gradients");
  static_assert(Device::host_memory, "DataParallel: host-memory gradients (a device-memory variant pairs with NCCL)");

 public:
  struct Result {
    double loss = 0;    // the step's loss averaged over ranks
    bool stop = false;  // some rank asked to stop (Ctrl-C, SIGTERM) at this step
  };

  // Broadcasts rank 0's parameter values, so every rank starts from the same model.
  DataParallel(Communicator& comm, std::vector<autodiff::Parameter<T, Device>*> params, DataParallelOptions o = {})
      : comm_(&comm), opt_(o), params_(std::move(params)) {
    SINKLAB_CHECK(opt_.bucket_elements > 0, "dist::DataParallel: bucket_elements must be positive, got ",
                  opt_.bucket_elements);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      SINKLAB_CHECK(params_[i] != nullptr, "dist::DataParallel: parameter ", i, " is null");
      index_[params_[i]] = static_cast<int32_t>(i);
    }
    check_same_parameters();
    broadcast_parameters();
  }
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  Communicator& communicator() const { return *comm_; }
  const std::vector<autodiff::Parameter<T, Device>*>& parameters() const { return params_; }

  // Copies rank 0's parameter values to every rank (also after a restore, as a guard).
  void broadcast_parameters() {
    for (auto* p : params_) comm_->broadcast(p->value.data(), p->numel() * int64_t(sizeof(T)), 0);
  }

  // tape.backward(loss) with the gradients averaged over ranks as it runs; `stop` is this
  // rank's wish to stop after this step, agreed over ranks in the result.
  Result backward(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> loss, bool stop = false) {
    using Clock = std::chrono::steady_clock;
    stats_ = {};
    reduced_.assign(params_.size(), 0);
    if (comm_->size() == 1) {  // nothing to average: the plain backward pass, errors as they come
      const auto t0 = Clock::now();
      tape.backward(loss);
      stats_.backward_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      for (std::size_t i = 0; i < params_.size(); ++i) reduced_[i] = params_[i]->requires_grad ? 1 : 0;
      return {static_cast<double>(loss.item()), stop};
    }
    const int32_t n_nodes = static_cast<int32_t>(tape.size());
    // The first leaf of each parameter on this tape: its gradient is complete once it is visited.
    std::vector<int32_t> first(params_.size(), -1);
    for (int32_t id = 0; id < n_nodes; ++id)
      if (const auto* p = tape.bound_parameter(autodiff::Var<T, Device>{&tape, id})) {
        const auto it = index_.find(p);
        if (it != index_.end() && first[static_cast<std::size_t>(it->second)] < 0)
          first[static_cast<std::size_t>(it->second)] = id;
      }
    if (buckets_.empty()) plan_buckets(first);
    for (Bucket& b : buckets_) {
      b.waiting = static_cast<int32_t>(b.members.size());
      b.pending.reset();
    }
    next_ = 0;
    if (opt_.overlap)
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (first[i] >= 0 && bucket_of_[i] >= 0)
          tape.register_hook(autodiff::Var<T, Device>{&tape, first[i]},
                             [this, i](Tensor<T, Device>&) { ready(static_cast<int32_t>(i)); });

    const double local_loss = static_cast<double>(loss.item());
    std::string failure;
    double failure_kind = 0;  // 1: non-finite (a divergence), 2: any other error
    const auto t0 = Clock::now();
    try {
      tape.backward(loss);
    } catch (const autodiff::NonFinite& e) {
      failure = e.what(), failure_kind = 1;
    } catch (const std::exception& e) {
      failure = e.what(), failure_kind = 2;
    }
    const auto t1 = Clock::now();
    stats_.backward_seconds = std::chrono::duration<double>(t1 - t0).count();
    stats_.buckets_overlapped = next_;
    // Whatever did not start inside backward (unused parameters, overlap off, a failure) starts now.
    while (next_ < static_cast<int32_t>(buckets_.size())) launch(next_++);
    for (std::size_t b = 0; b < buckets_.size(); ++b) finish(buckets_[b]);
    stats_.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();

    double control[3] = {local_loss, failure_kind > 0 ? 1.0 : 0.0, stop ? 1.0 : 0.0};
    comm_->all_reduce_sum(control, 3);
    if (control[1] > 0) raise(failure, failure_kind);
    return {control[0] / comm_->size(), control[2] > 0};
  }

  // Times each trainable parameter was reduced in the last step (1 for every one).
  const std::vector<int32_t>& reductions() const { return reduced_; }
  const StepStats& last_step() const { return stats_; }
  // The bucket layout: parameter indices per bucket, in the order buckets start.
  std::vector<std::vector<int32_t>> buckets() const {
    std::vector<std::vector<int32_t>> r;
    for (const Bucket& b : buckets_) r.push_back(b.members);
    return r;
  }

 private:
  struct Bucket {
    std::vector<int32_t> members;  // parameter indices
    std::vector<int64_t> offsets;  // of each member in `flat`
    std::vector<T> flat;
    int32_t waiting = 0;  // members whose gradient is not complete yet
    std::unique_ptr<Pending> pending;
  };

  // Every rank must hold the same parameters, in the same order and shapes.
  void check_same_parameters() {
    double sig[2] = {static_cast<double>(params_.size()), 0};
    for (std::size_t i = 0; i < params_.size(); ++i)
      sig[1] += static_cast<double>(params_[i]->numel()) * static_cast<double>(i + 1);
    double mine[2] = {sig[0], sig[1]};
    comm_->broadcast(sig, sizeof sig, 0);
    double differs = (sig[0] != mine[0] || sig[1] != mine[1]) ? 1.0 : 0.0;
    comm_->all_reduce_max(&differs, 1);
    SINKLAB_CHECK(differs == 0, "dist::DataParallel: the ranks hold different parameters (", rank_text(*comm_),
                  " has ", params_.size(), ", rank 0 has ", static_cast<int64_t>(sig[0]),
                  ", or their sizes differ); every rank must build the same model");
  }

  // Buckets in the order gradients become complete on rank 0's tape (the latest-recorded
  // parameters first), unused parameters last; broadcast so every rank uses rank 0's layout.
  void plan_buckets(const std::vector<int32_t>& first) {
    std::vector<int32_t> order;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i]->requires_grad) order.push_back(static_cast<int32_t>(i));
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return first[a] > first[b]; });
    int64_t n = static_cast<int64_t>(order.size());
    comm_->broadcast(&n, sizeof n, 0);
    SINKLAB_CHECK(n == static_cast<int64_t>(order.size()), "dist::DataParallel: ", rank_text(*comm_), " trains ",
                  order.size(), " parameters, rank 0 trains ", n);
    comm_->broadcast(order.data(), n * int64_t(sizeof(int32_t)), 0);
    bucket_of_.assign(params_.size(), -1);
    for (int32_t i : order) {
      const int64_t numel = params_[static_cast<std::size_t>(i)]->numel();
      if (buckets_.empty() || (static_cast<int64_t>(buckets_.back().flat.size()) + numel > opt_.bucket_elements &&
                               !buckets_.back().members.empty()))
        buckets_.emplace_back();
      Bucket& b = buckets_.back();
      b.members.push_back(i);
      b.offsets.push_back(static_cast<int64_t>(b.flat.size()));
      b.flat.resize(b.flat.size() + static_cast<std::size_t>(numel));
      bucket_of_[static_cast<std::size_t>(i)] = static_cast<int32_t>(buckets_.size() - 1);
    }
  }

  // A parameter's gradient is complete: start every bucket, in order, whose gradients all are.
  void ready(int32_t i) {
    const int32_t b = bucket_of_[static_cast<std::size_t>(i)];
    --buckets_[static_cast<std::size_t>(b)].waiting;
    while (next_ < static_cast<int32_t>(buckets_.size()) && buckets_[static_cast<std::size_t>(next_)].waiting == 0)
      launch(next_++);
    // Give the transport a turn: MPI progresses non-blocking collectives inside MPI calls.
    for (int32_t k = 0; k < next_; ++k)
      if (auto& p = buckets_[static_cast<std::size_t>(k)].pending) p->test();
  }

  void launch(int32_t k) {
    Bucket& b = buckets_[static_cast<std::size_t>(k)];
    for (std::size_t m = 0; m < b.members.size(); ++m) {
      const auto* p = params_[static_cast<std::size_t>(b.members[m])];
      std::memcpy(b.flat.data() + b.offsets[m], p->grad.data(), static_cast<std::size_t>(p->numel()) * sizeof(T));
      ++reduced_[static_cast<std::size_t>(b.members[m])];
    }
    const int64_t n = static_cast<int64_t>(b.flat.size());
    if constexpr (std::is_same_v<T, float>) {
      b.pending = comm_->start_all_reduce_sum(b.flat.data(), n);
    } else {
      comm_->all_reduce_sum(b.flat.data(), n);  // double (gradient checks): blocking is enough
    }
    ++stats_.buckets;
    stats_.elements += n;
  }

  void finish(Bucket& b) {
    if (b.pending) b.pending->wait();
    b.pending.reset();
    const T scale = T(1) / static_cast<T>(comm_->size());
    for (std::size_t m = 0; m < b.members.size(); ++m) {
      auto* p = params_[static_cast<std::size_t>(b.members[m])];
      const T* src = b.flat.data() + b.offsets[m];
      T* dst = p->grad.data();
      for (int64_t j = 0; j < p->numel(); ++j) dst[j] = src[j] * scale;
    }
  }

  // Every rank throws; the message comes from the lowest rank that failed.
  [[noreturn]] void raise(const std::string& failure, double kind) {
    double who[2] = {kind > 0 ? -static_cast<double>(comm_->rank()) : -1e9, kind};
    comm_->all_reduce_max(who, 2);  // who[0]: minus the lowest failing rank; who[1]: the worst kind
    const int from = static_cast<int>(-who[0]);
    int64_t len = comm_->rank() == from ? static_cast<int64_t>(failure.size()) : 0;
    comm_->broadcast(&len, sizeof len, from);
    std::string text = comm_->rank() == from ? failure : std::string(static_cast<std::size_t>(len), ' ');
    if (len > 0) comm_->broadcast(text.data(), len, from);
    const std::string where = comm_->size() > 1 ? "on rank " + std::to_string(from) + " of " +
                                                      std::to_string(comm_->size()) + ": "
                                                : std::string();
    if (who[1] == 1) throw autodiff::NonFinite(where + text);  // every failing rank diverged
    throw Error(where + text);
  }

  Communicator* comm_;
  DataParallelOptions opt_;
  std::vector<autodiff::Parameter<T, Device>*> params_;
  std::unordered_map<const autodiff::Parameter<T, Device>*, int32_t> index_;
  std::vector<Bucket> buckets_;
  std::vector<int32_t> bucket_of_;  // -1: frozen (requires_grad false), never reduced
  std::vector<int32_t> reduced_;
  int32_t next_ = 0;  // the next bucket to start
  StepStats stats_;
};

}  // namespace sinklab::dist
