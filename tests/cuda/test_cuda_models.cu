// Whole models on the GPU by a device choice: the models of tests/model_cases.hpp built as
// Module<T, cuda> train as the same models on cpu (every optimiser, clipping, a ViT), trained
// weights move to a cpu model with nn::copy_parameters, and a probe of a cuda model is refused
// with a message (probes run on a cpu copy). In double the devices agree to 1e-8 of each loss
// over five steps; in float to 2e-3 (summation orders differ, and AdamW amplifies them near
// zero gradients). The cpu's side is built by the host compiler (model_cases_cpu.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model_cases.hpp"
#include "sinklab/cuda/backend.cuh"

using namespace sinklab;
using namespace model_cases;

namespace model_cases {  // computed by the host compiler (model_cases_cpu.cpp)
extern template std::vector<double> train_lm<GatedSink, double, cpu>(const std::string&, int);
extern template std::vector<float> train_lm<GatedSink, float, cpu>(const std::string&, int);
extern template std::vector<double> train_lm<Mixed, double, cpu>(const std::string&, int);
extern template std::vector<float> train_lm<Mixed, float, cpu>(const std::string&, int);
extern template std::vector<double> train_vit<double, cpu>(int);
extern template std::vector<float> train_vit<float, cpu>(int);
GatedSink::Module<double> cpu_model();
std::vector<double> cpu_logits(GatedSink::Module<double>& model);
}  // namespace model_cases

namespace {

template <class T>
void check_losses(const std::vector<T>& want, const std::vector<T>& got) {
  const double tol = std::is_same_v<T, double> ? 1e-8 : 2e-3;
  REQUIRE(want.size() == got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("step ", i, ": cpu ", want[i], ", cuda ", got[i]);
    CHECK(std::abs(static_cast<double>(want[i]) - static_cast<double>(got[i])) <=
          tol * std::max(1.0, std::abs(static_cast<double>(want[i]))));
  }
  CHECK(want.back() < want.front());
}

TEST_CASE_TEMPLATE("Module<T, cuda>: language models train as on the cpu with every optimiser", T, double, float) {
  for (const char* optimizer : {"adamw", "sgd", "muon"}) {
    INFO(optimizer);
    check_losses(train_lm<GatedSink, T, cpu>(optimizer, 5), train_lm<GatedSink, T, cuda>(optimizer, 5));
    check_losses(train_lm<Mixed, T, cpu>(optimizer, 5), train_lm<Mixed, T, cuda>(optimizer, 5));
  }
}

TEST_CASE_TEMPLATE("Module<T, cuda>: a ViT trains as on the cpu", T, double, float) {
  check_losses(train_vit<T, cpu>(4), train_vit<T, cuda>(4));
}

TEST_CASE("Module<T, cuda>: weights move to a cpu model; probes of a cuda model are refused") {
  Rng rng(1);
  GatedSink::Module<double, cuda> model("", config(), rng);
  const auto ids = Tensor<int32_t, cuda>::from({kBatch, kLen}, token_ids(9));
  autodiff::Tape<double, cuda> tape;
  const std::vector<double> logits = model.logits(tape, ids).value().to_vector();
  GatedSink::Module<double> copy = cpu_model();  // other weights until the copy
  nn::copy_parameters<double>(copy, model);
  const std::vector<double> on_cpu = cpu_logits(copy);
  REQUIRE(on_cpu.size() == logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) CHECK(std::abs(on_cpu[i] - logits[i]) <= 1e-9);

  nn::ModelProbe<double, cuda> probe;
  autodiff::Tape<double, cuda> probed;
  CHECK_THROWS_WITH_AS(model.logits(probed, ids, &probe), doctest::Contains("runs on the cpu device"), std::exception);
}

}  // namespace
