// Each rank's share of a batch. Every rank draws the same global batch from the run's seeded
// stream and keeps its own rows, so N ranks with B rows each see exactly the samples one
// process sees with N·B — the property that makes data-parallel results comparable with
// single-process ones (tests/dist.cmake's dist_mpi_data_parallel, tests/dist/dist_train.cpp).
#pragma once
#include <cstdint>

#include "sinklab/core/error.hpp"
#include "sinklab/dist/communicator.hpp"

namespace sinklab::dist {

struct Rows {
  int64_t begin = 0, end = 0;
};

// Rank r's rows of n: [r·n/size, (r+1)·n/size). n must split evenly, so that every rank's
// mean loss weighs its rows as the global mean does.
inline Rows shard_rows(int64_t n, const Communicator& c) {
  SINKLAB_CHECK(n % c.size() == 0, "dist::shard: a batch of ", n, " rows does not split evenly over ", c.size(),
                " ranks; choose a batch that is a multiple of the rank count");
  const int64_t each = n / c.size();
  return {c.rank() * each, (c.rank() + 1) * each};
}

// A batch struct's own rows along axis 0 of its inputs `x` and targets `y` (TokenBatch,
// image batches), as views of the global batch.
template <class Batch>
Batch shard(const Batch& b, const Communicator& c) {
  if (c.size() == 1) return b;
  SINKLAB_CHECK(b.y.size(0) == b.x.size(0), "dist::shard: inputs have ", b.x.size(0), " rows but targets ",
                b.y.size(0));
  const Rows r = shard_rows(b.x.size(0), c);
  Batch s = b;
  s.x = b.x.slice(0, r.begin, r.end);
  s.y = b.y.slice(0, r.begin, r.end);
  return s;
}

}  // namespace sinklab::dist
