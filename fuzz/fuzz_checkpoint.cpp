// The checkpoint loaders (io::load_parameters, io::load_optimizer_state) on an arbitrary file:
// a refused file must leave the model and the optimiser exactly as they were (all-or-nothing).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fuzz_target.hpp"
#include "sinklab/io/checkpoint.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/sgd.hpp"

namespace {

struct Tiny {
  sinklab::nn::Linear<float> a, b;
  Tiny() {
    sinklab::Rng rng(1);
    a = sinklab::nn::Linear<float>("a", 3, 4, rng, sinklab::nn::Init::normal(), /*with_bias=*/true);
    b = sinklab::nn::Linear<float>("b", 4, 2, rng);
  }
  template <class F>
  void parameters(F&& f) {
    a.parameters(f);
    b.parameters(f);
  }
};

template <class M>
std::vector<float> values(M& m) {
  std::vector<float> v;
  m.parameters([&](sinklab::autodiff::Parameter<float>& p) {
    for (float x : p.value.to_vector()) v.push_back(x);
  });
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace sinklab;
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sinklab_fuzz_checkpoint_" + std::to_string(::getpid()));
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));

  Tiny model;
  const std::vector<float> before = values(model);
  bool loaded = false;
  sinklab_fuzz::refused_is_fine([&] {
    io::load_parameters(model, file);
    loaded = true;
  });
  if (!loaded) sinklab_fuzz::require(values(model) == before, "a refused checkpoint changes no parameter");

  optim::AdamW<float> adam(nn::parameter_list<float>(model));
  sinklab_fuzz::refused_is_fine([&] { io::load_optimizer_state(adam, file); });
  optim::SGD<float> sgd(nn::parameter_list<float>(model), {.lr = 0.1, .momentum = 0.9});
  int64_t steps = sgd.step_count();
  bool sgd_loaded = false;
  sinklab_fuzz::refused_is_fine([&] {
    io::load_optimizer_state(sgd, file);
    sgd_loaded = true;
  });
  if (!sgd_loaded) sinklab_fuzz::require(sgd.step_count() == steps, "a refused state file changes no step count");
  return 0;
}
