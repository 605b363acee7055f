// The post-training quantization the language-model studies report on a trained model: W8A8,
// W4A4 with INT4 and with FP4 (E2M1), each without and with SmoothQuant (quant/model.hpp), as
// the Δ validation loss of each, keyed "ptq_<case>_dloss" (w8a8, w8a8_sq, w4a4_int4, …).
#pragma once
#include <string>

#include "sinklab/experiment/experiment.hpp"
#include "sinklab/quant/model.hpp"

namespace examples {

struct PtqCase {
  const char* key;
  sinklab::quant::Scheme scheme;
  bool smoothquant;
};
inline constexpr PtqCase kPtqCases[] = {
    {"w8a8", sinklab::quant::Scheme::w8a8, false},           {"w8a8_sq", sinklab::quant::Scheme::w8a8, true},
    {"w4a4_int4", sinklab::quant::Scheme::w4a4_int4, false}, {"w4a4_int4_sq", sinklab::quant::Scheme::w4a4_int4, true},
    {"w4a4_fp4", sinklab::quant::Scheme::w4a4_fp4, false},   {"w4a4_fp4_sq", sinklab::quant::Scheme::w4a4_fp4, true},
};

template <class Model, class Batches>
sinklab::experiment::Json ptq_deltas(Model& model, const Batches& calibration, const Batches& validation) {
  sinklab::experiment::Json j;
  for (const PtqCase& q : kPtqCases) {
    const sinklab::quant::PtqResult r =
        sinklab::quant::evaluate_ptq(model, calibration, validation, {.scheme = q.scheme, .smoothquant = q.smoothquant});
    j[std::string("ptq_") + q.key + "_dloss"] = r.delta_loss();
  }
  return j;
}

}  // namespace examples
