// The paired start of a study's run: every variant of a seed begins from the reference
// architecture's initialisation of that seed (experiment/pairing.hpp). `make` builds the reference
// from an Rng seeded with the run's seed; `model` takes every tensor it shares with it; the run's
// log gets the pairing line, and a shared tensor that differs fails the run naming the study.
//
//   examples::paired_start(run, model, "gradient_sinks", "the vanilla init of this seed",
//                          [&](Rng& r) { return Vanilla::Module<float>("", cfg, r); });
#pragma once
#include <string>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/experiment/pairing.hpp"
#include "sinklab/experiment/run.hpp"

namespace examples {

template <class Model, class MakeReference>
void paired_start(sinklab::experiment::Run& run, Model& model, const char* study, const std::string& reference,
                  MakeReference&& make) {
  sinklab::Rng rng(run.seed());
  auto ref = make(rng);
  const sinklab::experiment::Pairing pairing = sinklab::experiment::TensorBank::of(ref).apply(model);
  run.progress().print("[" + run.tag() + "] " + pairing.line() + " (" + reference + ")");
  SINKLAB_CHECK(pairing.ok(), study, ": ", run.tag(), ": the paired start failed: ", pairing.line());
}

}  // namespace examples
