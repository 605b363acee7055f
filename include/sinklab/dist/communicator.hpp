// The communicator interface of data-parallel training, and the single-process one every
// program gets unless it opts in to MPI (dist/mpi.hpp) or NCCL (sinklab/dist/nccl.hpp, with
// the CUDA backend).
//
//   dist::Communicator& c = dist::world();       // dist/world.hpp: MPI under mpirun, else one process
//   c.all_reduce_sum(grad.data(), grad.numel());  // in place, the same on every rank
//   auto pending = c.start_all_reduce_sum(p, n);  // overlapped: do other work, then
//   pending->wait();
//
// Buffers live in the memory of the communicator's device (host memory for MPI, device memory
// for NCCL). Every rank must call the collectives in the same order with the same sizes; a
// size that differs is reported by the MPI implementation as an error, not silently truncated.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "sinklab/core/error.hpp"

namespace sinklab::dist {

// A collective started without waiting for it (MPI_Iallreduce, an NCCL stream operation).
class Pending {
 public:
  virtual ~Pending() = default;
  // Lets the transport progress; true once the result is in the buffer.
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single", "mpi" or "nccl", for the banner programs print at start.
  virtual std::string backend() const = 0;

  // Sum over ranks, in place.
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  virtual void all_reduce_sum(double* data, int64_t n) = 0;
  // Maximum over ranks, in place (agreement on flags: "any rank failed", "any rank was stopped").
  virtual void all_reduce_max(double* data, int64_t n) = 0;
  // The sum started; `data` must stay alive and untouched until the request completes.
  virtual std::unique_ptr<Pending> start_all_reduce_sum(float* data, int64_t n) = 0;
  // Root's bytes copied to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with `code` (after the caller printed why): a rank that fails
  // alone must not leave the others waiting in a collective forever.
  [[noreturn]] virtual void abort(int code) = 0;
};

// One process: every collective is the identity. The default, so programs that never ask for
// more run exactly as before.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_max(double*, int64_t) override {}
  std::unique_ptr<Pending> start_all_reduce_sum(float*, int64_t) override { return std::make_unique<Done>(); }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  struct Done final : Pending {
    bool test() override { return true; }
    void wait() override {}
  };
};

// "rank 1 of 4" — how messages name a process.
inline std::string rank_text(const Communicator& c) {
  return "rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size());
}

// Rank 0's value of `x`, on every rank: decisions taken from what rank 0 sees (a file that
// exists, a checkpoint's step), so that no rank takes another branch and waits forever.
template <class X>
X from_root(Communicator& c, X x) {
  c.broadcast(&x, sizeof x, 0);
  return x;
}

// Runs f on rank 0 only (preparing an output folder, writing a summary) and gives its outcome
// to every rank: an exception there is rethrown on every rank, as sinklab::Error with its text.
template <class F>
void on_root(Communicator& c, F&& f) {
  if (c.size() == 1) return static_cast<void>(f());  // exceptions keep their type
  std::string failure;
  if (c.rank() == 0) {
    try {
      f();
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "unknown error";
    }
  }
  int64_t len = from_root(c, static_cast<int64_t>(failure.size()));
  if (len == 0) return;
  failure.resize(static_cast<std::size_t>(len));
  c.broadcast(failure.data(), len, 0);
  throw Error(failure);
}

}  // namespace sinklab::dist
