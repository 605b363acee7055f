// The NCCL communicator: collectives between GPUs (NVLink, PCIe, InfiniBand), for data-parallel
// training with the CUDA backend. Bootstrapped over a host communicator (MPI under mpirun),
// which carries NCCL's unique id from rank 0; one GPU per rank (by default the rank's index
// among the ranks of its host, modulo the GPUs it sees).
//
//   dist::NcclCommunicator gpu(dist::world());
//   gpu.all_reduce_sum(device_ptr, n);
//
// Collectives run on a stream of the communicator's own; a blocking call waits for it, an
// overlapped one (start_all_reduce_sum) records an event that Pending waits on. Buffers should
// be device memory; host buffers (the small control values of dist::DataParallel: the loss, a
// failure flag) are staged through a device scratch buffer, so every dist algorithm runs on it.
//
// Only with the CUDA backend and NCCL (target sinklab::nccl, SINKLAB_HAVE_NCCL).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "sinklab/core/error.hpp"
#include "sinklab/dist/communicator.hpp"

namespace sinklab::dist {

class NcclCommunicator final : public Communicator {
 public:
  // `device` < 0: the rank's index on its host (OMPI_COMM_WORLD_LOCAL_RANK, else the rank)
  // modulo the number of visible GPUs.
  explicit NcclCommunicator(Communicator& bootstrap, int device = -1) : boot_(&bootstrap) {
    int devices = 0;
    cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    SINKLAB_CHECK(devices > 0, "dist::NcclCommunicator: no CUDA device on ", rank_text(bootstrap));
    if (device < 0) device = local_rank(bootstrap) % devices;
    SINKLAB_CHECK(device < devices, "dist::NcclCommunicator: device ", device, " requested on ", rank_text(bootstrap),
                  ", which sees ", devices, " GPU(s)");
    device_ = device;
    cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id{};
    if (bootstrap.rank() == 0) nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap.broadcast(&id, sizeof id, 0);
    nccl(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()), "ncclCommInitRank");
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda(cudaMalloc(&scratch_, kScratch), "cudaMalloc");
  }
  ~NcclCommunicator() override {
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }
  std::string backend() const override { return "nccl"; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  void all_reduce_sum(float* d, int64_t n) override { reduce(d, n, ncclFloat32, ncclSum); }
  void all_reduce_sum(double* d, int64_t n) override { reduce(d, n, ncclFloat64, ncclSum); }
  void all_reduce_max(double* d, int64_t n) override { reduce(d, n, ncclFloat64, ncclMax); }

  std::unique_ptr<Pending> start_all_reduce_sum(float* d, int64_t n) override {
    SINKLAB_CHECK(!is_host(d), "dist::NcclCommunicator: an overlapped all-reduce needs device memory");
    nccl(ncclAllReduce(d, d, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    auto p = std::make_unique<Event>(this);
    cuda(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming), "cudaEventCreate");
    cuda(cudaEventRecord(p->done, stream_), "cudaEventRecord");
    return p;
  }

  void broadcast(void* d, int64_t bytes, int root) override {
    staged(d, bytes, [&](void* dev) {
      nccl(ncclBroadcast(dev, dev, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    });
  }
  void barrier() override {
    double one = 1;
    all_reduce_sum(&one, 1);
  }
  [[noreturn]] void abort(int code) override {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    boot_->abort(code);
    std::exit(code);  // the bootstrap's abort does not return; this keeps [[noreturn]] honest
  }

 private:
  static constexpr int64_t kScratch = int64_t{1} << 20;  // staging for host buffers

  struct Event final : Pending {
    explicit Event(NcclCommunicator* c) : c(c) {}
    ~Event() override {
      if (done) cudaEventSynchronize(done), cudaEventDestroy(done);
    }
    bool test() override {
      const cudaError_t e = cudaEventQuery(done);
      if (e == cudaErrorNotReady) return false;
      c->cuda(e, "cudaEventQuery");
      return true;
    }
    void wait() override { c->cuda(cudaEventSynchronize(done), "cudaEventSynchronize"); }
    NcclCommunicator* c;
    cudaEvent_t done = nullptr;
  };

  static int local_rank(const Communicator& boot) {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char* v = std::getenv(var)) return std::atoi(v);
    return boot.rank();
  }
  static bool is_host(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return true;
    }
    return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
  }
  // Runs op on a device copy of a host buffer (or on the buffer itself), then waits.
  template <class Op>
  void staged(void* d, int64_t bytes, Op&& op) {
    if (!is_host(d)) {
      op(d);
    } else {
      SINKLAB_CHECK(bytes <= kScratch, "dist::NcclCommunicator: a host buffer of ", bytes,
                    " bytes (host buffers are staged through ", kScratch, " bytes; use device memory)");
      cuda(cudaMemcpyAsync(scratch_, d, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
      op(scratch_);
      cuda(cudaMemcpyAsync(d, scratch_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_), "cudaMemcpy");
    }
    cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void reduce(void* d, int64_t n, ncclDataType_t type, ncclRedOp_t op) {
    const int64_t bytes = n * (type == ncclFloat64 ? 8 : 4);
    staged(d, bytes, [&](void* dev) {
      nccl(ncclAllReduce(dev, dev, static_cast<size_t>(n), type, op, comm_, stream_), "ncclAllReduce");
    });
  }
  void cuda(cudaError_t e, const char* what) const {
    SINKLAB_CHECK(e == cudaSuccess, "dist::NcclCommunicator: ", what, " failed on ", rank_text(*boot_), ": ",
                  cudaGetErrorString(e));
  }
  void nccl(ncclResult_t r, const char* what) const {
    SINKLAB_CHECK(r == ncclSuccess, "dist::NcclCommunicator: ", what, " failed on ", rank_text(*boot_), ": ",
                  ncclGetErrorString(r));
  }

  Communicator* boot_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace sinklab::dist
