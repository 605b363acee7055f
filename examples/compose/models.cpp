// examples/compose on the cpu: the variants of models.hpp, data-parallel under mpirun (each rank
// trains on its rows of every batch, gradients averaged).
#include "models.hpp"

#include "sinklab/dist/data_parallel.hpp"
#include "sinklab/dist/shard.hpp"
#include "sinklab/dist/world.hpp"

namespace {
using namespace sinklab;

struct AcrossRanks {
  dist::DataParallel<float> dp;
  explicit AcrossRanks(const std::vector<autodiff::Parameter<float>*>& params) : dp(dist::world(), params) {}
  data::TokenBatch shard(const data::TokenBatch& b) { return dist::shard(b, dist::world()); }
  double backward(autodiff::Tape<float>& tape, autodiff::Var<float> loss) { return dp.backward(tape, loss).loss; }
};
}  // namespace

std::vector<compose::Result> compose::train_variants(const Setup& s, const std::vector<std::string>& only) {
  return train_selected<cpu, AcrossRanks>(s, only);
}
