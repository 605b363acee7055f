// Per-sample sink location: attention inflow and sink matching against a known hub; the issue's
// reference case "a one-hot attention matrix has sink score 1 and stable rank 1".
#include <doctest/doctest.h>

#include "sinklab/probe/sink_match.hpp"
#include "sinklab/probe/spectral.hpp"

using namespace sinklab;
using doctest::Approx;

TEST_CASE_TEMPLATE("sink_match: a head that reads each sequence's hub matches it; uniform attention ties to key 0", T,
                   float, double) {
  const int64_t B = 3, H = 2, L = 4;
  const auto hub = Tensor<int32_t>::from({B}, {1, 3, 0});
  Tensor<T> A = Tensor<T>::zeros({B, H, L, L});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      A(b, 0, i, hub(b)) = T(1);                     // head 0: every query on the hub
      for (int64_t j = 0; j < L; ++j) A(b, 1, i, j) = T(0.25);  // head 1: uniform
    }
  const Tensor<int64_t> inflow = probe::attention_inflow(A);
  CHECK(inflow.shape() == Shape{B, H});
  for (int64_t b = 0; b < B; ++b) {
    CHECK(inflow(b, 0) == hub(b));
    CHECK(inflow(b, 1) == 0);
  }
  const probe::SinkMatch m = probe::sink_match(A, hub);
  CHECK(m.match_rate[0] == Approx(1.0));
  CHECK(m.strength[0] == Approx(1.0));
  CHECK(m.match_rate[1] == Approx(1.0 / 3));
  CHECK(m.strength[1] == Approx(0.25));
  // A sink that moves between sequences keeps its full strength per sequence; the batch-mean
  // column of sink_score dilutes it (hubs 1, 3, 0: each key holds a third of the mass at most).
  const probe::PerHead inflow_peak = probe::inflow_strength(A);
  CHECK(inflow_peak[0] == Approx(1.0));
  CHECK(inflow_peak[1] == Approx(0.25));
  CHECK(probe::sink_score(A).score[0] == Approx(1.0 / 3));

  CHECK_THROWS_WITH_AS(probe::sink_match(A, Tensor<int32_t>::from({2}, {0, 1})), doctest::Contains("expected [3]"), Error);
  CHECK_THROWS_WITH_AS(probe::sink_match(A, Tensor<int32_t>::from({3}, {0, 1, 4})), doctest::Contains("target 4"), Error);
}

TEST_CASE("a one-hot attention matrix has sink score 1 and stable rank 1") {
  const int64_t L = 7;
  Tensor<double> A = Tensor<double>::zeros({1, 1, L, L});
  for (int64_t i = 0; i < L; ++i) A(0, 0, i, 0) = 1.0;
  CHECK(probe::sink_score(A).score[0] == Approx(1.0));
  CHECK(probe::stable_rank(A.view({L, L})) == Approx(1.0));
  // Attending to oneself instead (the identity) has stable rank L and sink score 1/L.
  Tensor<double> I = Tensor<double>::zeros({1, 1, L, L});
  for (int64_t i = 0; i < L; ++i) I(0, 0, i, i) = 1.0;
  CHECK(probe::sink_score(I).score[0] == Approx(1.0 / L));
  CHECK(probe::stable_rank(I.view({L, L})) == Approx(double(L)));
}
