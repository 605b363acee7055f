// Downstream use of sinklab::mpi: dist::world() is MPI under mpirun and one process otherwise;
// DataParallel over it leaves a one-process gradient as it is. Exits non-zero on a mismatch.
#include <cstdio>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/world.hpp"

int main() {
  using namespace sinklab;
  autodiff::Parameter<float> w("w", Tensor<float>::full({3}, 2.0f));
  dist::DataParallel<float> dp(dist::world(), {&w});
  autodiff::Tape<float> tape;
  const auto r = dp.backward(tape, autodiff::sum(autodiff::square(tape.param(w))));
  const bool ok = r.loss == 12.0 && w.grad.data()[0] == 4.0f;
  std::printf("downstream_mpi: %d rank(s) (%s), loss %g, gradient %g\n", dist::world().size(),
              dist::world().backend().c_str(), r.loss, double(w.grad.data()[0]));
  return ok ? 0 : 1;
}
