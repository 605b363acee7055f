// The MPI communicator (OpenMPI from Debian, or any MPI-3 library): collectives on a private
// duplicate of MPI_COMM_WORLD, errors returned and thrown as sinklab::Error naming the
// operation and the rank instead of MPI's default of aborting with a code.
//
// Only compiled where <mpi.h> is found: CMake's sinklab::mpi target (SINKLAB_MPI=AUTO|ON|OFF)
// defines SINKLAB_HAVE_MPI and links MPI::MPI_CXX. Programs normally get it through
// dist::world(), which starts MPI only when an MPI launcher (mpirun, srun) started the process.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "sinklab/core/error.hpp"
#include "sinklab/dist/communicator.hpp"

namespace sinklab::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI unless the program already did (then it is also left for the program to
  // finalise). Only the thread that constructed the communicator may call it (FUNNELED): the
  // library's worker threads compute, the main thread communicates.
  MpiCommunicator() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  MPI_Comm native() const { return comm_; }

  void all_reduce_sum(float* data, int64_t n) override { reduce(data, n, MPI_FLOAT, MPI_SUM); }
  void all_reduce_sum(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_SUM); }
  void all_reduce_max(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_MAX); }

  std::unique_ptr<Pending> start_all_reduce_sum(float* data, int64_t n) override {
    SINKLAB_CHECK(n >= 0 && n <= INT_MAX, "dist::MpiCommunicator: an overlapped all-reduce of ", n,
                  " elements (at most 2^31-1 per call; use smaller gradient buckets)");
    auto p = std::make_unique<Request>(this);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_, &p->req),
          "MPI_Iallreduce");
    return p;
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (int64_t done = 0; done < bytes;) {
      const int chunk = static_cast<int>(std::min<int64_t>(bytes - done, kChunk));
      check(MPI_Bcast(p + done, chunk, MPI_BYTE, root, comm_), "MPI_Bcast");
      done += chunk;
    }
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(comm_, code);
    std::exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  static constexpr int64_t kChunk = int64_t{1} << 30;  // MPI counts are int

  struct Request final : Pending {
    explicit Request(MpiCommunicator* c) : comm(c) {}
    ~Request() override {
      if (req != MPI_REQUEST_NULL) MPI_Wait(&req, MPI_STATUS_IGNORE);  // never free a buffer MPI still writes
    }
    bool test() override {
      if (req == MPI_REQUEST_NULL) return true;
      int done = 0;
      comm->check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      return done != 0;
    }
    void wait() override {
      if (req != MPI_REQUEST_NULL) comm->check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    MpiCommunicator* comm;
    MPI_Request req = MPI_REQUEST_NULL;
  };

  void reduce(void* data, int64_t n, MPI_Datatype type, MPI_Op op) {
    int bytes = 0;
    MPI_Type_size(type, &bytes);
    auto* p = static_cast<char*>(data);
    for (int64_t done = 0; done < n;) {
      const int chunk = static_cast<int>(std::min<int64_t>(n - done, kChunk));
      check(MPI_Allreduce(MPI_IN_PLACE, p + done * bytes, chunk, type, op, comm_), "MPI_Allreduce");
      done += chunk;
    }
  }
  void check(int code, const char* what) const {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    throw Error(std::string("dist::MpiCommunicator: ") + what + " failed on " + rank_text(*this) + ": " +
                std::string(text, static_cast<std::size_t>(len)));
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool owns_mpi_ = false;
};

}  // namespace sinklab::dist
