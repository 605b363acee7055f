// The process's communicator: MPI when the program was built with it (SINKLAB_HAVE_MPI, from
// CMake's sinklab::mpi) and an MPI launcher started it (mpirun, mpiexec, srun); one process
// otherwise. Nothing changes for a program run the ordinary way, and the same binary scales
// out under `mpirun -np N`.
#pragma once
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/dist/communicator.hpp"
#if defined(SINKLAB_HAVE_MPI)
#include "sinklab/dist/mpi.hpp"
#endif

namespace sinklab::dist {

// The number of processes an MPI launcher says it started (0: no launcher). OpenMPI sets
// OMPI_COMM_WORLD_SIZE, MPICH and Slurm's PMI set PMI_SIZE.
inline int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return std::getenv("PMIX_RANK") ? 1 : 0;
}

namespace detail {
// Ranks on one host share its cores. Unless OMP_NUM_THREADS says otherwise, a rank takes its
// share of the host's cores, and never more than it may run on: 1 thread per rank when mpirun
// binds each to a core (its default for 2 ranks), 1 for 3 ranks on 2 cores (bound to the
// socket, each would otherwise start 2), 8 for 2 ranks on 16 cores with --bind-to none.
inline void share_host_cores() {
  if (std::getenv("OMP_NUM_THREADS")) return;
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  if (local <= 1) return;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : num_threads();
  const int host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(std::max(1, std::min(cpus, host / local)));
}

inline std::unique_ptr<Communicator> make_world() {
  const int launched = launcher_size();
#if defined(SINKLAB_HAVE_MPI)
  if (launched > 0) {
    share_host_cores();
    return std::make_unique<MpiCommunicator>();
  }
#else
  SINKLAB_CHECK(launched <= 1, "dist::world: this program was started by an MPI launcher as one of ", launched,
                " processes, but it was built without MPI, so each would run the whole job alone. Install "
                "libopenmpi-dev and configure with -DSINKLAB_MPI=ON (and link sinklab::mpi), or run it without "
                "mpirun");
#endif
  return std::make_unique<SingleProcess>();
}
}  // namespace detail

// Created on first use and kept to the end of the program (MPI is finalised then).
inline Communicator& world() {
  static const std::unique_ptr<Communicator> w = detail::make_world();
  return *w;
}

// For a program's top-level error handler, after it printed the error: under an MPI launch of
// several processes, ends every rank (MPI_Abort), since the others would wait for this one in
// their next collective; otherwise returns.
inline void end_all_ranks_on_error(int code) {
  if (launcher_size() > 1) world().abort(code);
}

}  // namespace sinklab::dist
