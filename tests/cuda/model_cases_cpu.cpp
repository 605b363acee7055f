// The cpu's side of test_cuda_models (tests/model_cases.hpp), built by the host compiler.
#include <string>
#include <vector>

#include "model_cases.hpp"

namespace model_cases {
template std::vector<double> train_lm<GatedSink, double, cpu>(const std::string&, int);
template std::vector<float> train_lm<GatedSink, float, cpu>(const std::string&, int);
template std::vector<double> train_lm<Mixed, double, cpu>(const std::string&, int);
template std::vector<float> train_lm<Mixed, float, cpu>(const std::string&, int);
template std::vector<double> train_vit<double, cpu>(int);
template std::vector<float> train_vit<float, cpu>(int);

// A cpu GatedSink model (seeded differently from the GPU test's), and its logits on the test's
// ids: the cuda test copies its model's weights in with nn::copy_parameters in between.
GatedSink::Module<double> cpu_model() {
  Rng rng(2);
  return GatedSink::Module<double>("", config(), rng);
}
std::vector<double> cpu_logits(GatedSink::Module<double>& model) {
  autodiff::Tape<double> tape;
  return model.logits(tape, Tensor<int32_t>::from({kBatch, kLen}, token_ids(9))).value().to_vector();
}
}  // namespace model_cases
