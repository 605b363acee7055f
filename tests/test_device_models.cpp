// Models, optimisers and clipping on a device other than cpu: the models of model_cases.hpp built
// as Module<T, test_device> (counted_device.hpp: host memory, the CPU's kernels, every call
// counted) train step for step as on cpu — the same losses bit for bit — and their GEMMs, fused
// attention, gradient norms (one call for all parameters per step) and each optimiser's own update go
// through the device's backend. That nothing loops over host memory itself cannot be seen here
// (the test device's memory is the host's): test_device_seam checks the ops for it, and the GPU
// test (tests/cuda/test_cuda_models.cu) the whole models. nn::copy_parameters moves trained
// weights to a cpu model, where probes run; checkpoints of a device model go through host copies.
#include <doctest/doctest.h>

#include "counted_device.hpp"
#include "model_cases.hpp"
#include "temp_dir.hpp"

#include <string>
#include <vector>

#include "sinklab/io/checkpoint.hpp"

namespace {
using namespace sinklab;
using namespace model_cases;

TEST_CASE_TEMPLATE("a language model trains on a second device with the cpu's losses", Arch, GatedSink, Mixed) {
  for (const char* optimizer : {"adamw", "sgd", "muon"}) {
    INFO(optimizer);
    const std::vector<float> want = train_lm<Arch, float, cpu>(optimizer, 4);
    kernel_calls().clear();
    const std::vector<float> got = train_lm<Arch, float, test_device>(optimizer, 4);
    CHECK(got == want);
    CHECK(want.back() < want.front());
    // the model's work reached the device's backend: GEMMs, the fused attention, the gradient
    // norm each step, and each optimiser's own update
    Rng rng(11);
    typename Arch::template Module<float, cpu> shape_only("", config(), rng);
    const auto n_params = static_cast<int>(nn::parameter_list<float>(shape_only).size());
    CHECK(kernel_calls()["gemm"] + kernel_calls()["gemm_at"] > 0);
    CHECK(kernel_calls()["attention_fused_forward"] > 0);
    CHECK(kernel_calls()["attention_fused_backward"] > 0);
    const std::string opt = optimizer;
    if (opt == "sgd") CHECK(kernel_calls()[update_key<policy::SGDUpdate<float>>()] == 4 * n_params);
    if (opt == "adamw") CHECK(kernel_calls()[update_key<policy::AdamWUpdate<float>>()] == 4 * n_params);
    const int matrices = kernel_calls()[update_key<policy::MuonMomentum<float>>()] / 4;
    if (opt == "muon") {
      CHECK(matrices > 0);
      CHECK(kernel_calls()[update_key<policy::DecayedStep<float>>()] == 4 * matrices);
      CHECK(kernel_calls()[update_key<policy::AdamWUpdate<float>>()] == 4 * (n_params - matrices));
    }
    // the clipping's norm, one call for all parameters each step, and Newton–Schulz's
    // normalisation of each matrix's update
    CHECK(kernel_calls()["sum_of_squares_over"] == 4);
    CHECK(kernel_calls()["sum_of_squares"] == 4 * matrices);
  }
}

TEST_CASE("a ViT trains on a second device with the cpu's losses") {
  const std::vector<float> want = train_vit<float, cpu>(3);
  kernel_calls().clear();
  CHECK(train_vit<float, test_device>(3) == want);
  CHECK(want.back() < want.front());
  CHECK(kernel_calls()["attention_fused_backward"] == 3 * 2);  // 3 steps, 2 layers, on the device
  CHECK(kernel_calls()[update_key<policy::AdamWUpdate<float>>()] > 0);
}

TEST_CASE("nn::copy_parameters moves weights between devices and names a mismatch") {
  Rng rng_a(1), rng_b(2);
  GatedSink::Module<float, test_device> trained("", config(), rng_a);
  GatedSink::Module<float> copy("", config(), rng_b);
  nn::copy_parameters<float>(copy, trained);
  const std::vector<int32_t> ids = token_ids(9);
  autodiff::Tape<float, test_device> ta;
  autodiff::Tape<float> tb;
  const auto a = trained.logits(ta, Tensor<int32_t, test_device>::from({kBatch, kLen}, ids)).value().to_vector();
  const auto b = copy.logits(tb, Tensor<int32_t>::from({kBatch, kLen}, ids)).value().to_vector();
  CHECK(a == b);
  // probes run on the cpu copy, with the materialised attention
  nn::ModelProbe<float> probe;
  autodiff::Tape<float> tp;
  copy.logits(tp, Tensor<int32_t>::from({kBatch, kLen}, ids), &probe);
  REQUIRE(probe.layers.size() == 2);
  CHECK(probe.layers[0].attn.weights.defined());

  nn::ModelConfig wider = config();
  wider.d_model = 24;
  Rng rng_c(3);
  GatedSink::Module<float> other("", wider, rng_c);
  CHECK_THROWS_WITH_AS(nn::copy_parameters<float>(other, trained),
                       doctest::Contains("nn::copy_parameters: parameter 0 is 'embed.weight' of shape [19, 24] in the "
                                         "destination but 'embed.weight' of shape [19, 16] in the source"),
                       Error);
}

TEST_CASE("a device model's checkpoint and optimiser state restore the run on the device and on the cpu") {
  sinklab_test::TempDir dir;
  const auto ids = token_ids(3), targets = token_ids(4);
  auto step = [&]<class Dev>(auto& model, auto& opt, Dev) {
    autodiff::Tape<float, Dev> tape;
    auto loss = model.loss(tape, Tensor<int32_t, Dev>::from({kBatch, kLen}, ids),
                           Tensor<int32_t, Dev>::from({kBatch, kLen}, targets));
    opt.zero_grad();
    tape.backward(loss);
    opt.step();
    return loss.item();
  };
  Rng rng(1);
  GatedSink::Module<float, test_device> model("", config(), rng);
  optim::AdamW<float, test_device> opt(nn::parameter_list<float, test_device>(model), {.lr = 1e-2});
  step(model, opt, test_device{});
  step(model, opt, test_device{});
  io::save_parameters(model, dir.path / "model.safetensors");
  io::save_optimizer_state(opt, dir.path / "opt.safetensors");
  const float next = step(model, opt, test_device{});

  Rng other(2);
  GatedSink::Module<float, test_device> resumed("", config(), other);
  optim::AdamW<float, test_device> resumed_opt(nn::parameter_list<float, test_device>(resumed), {.lr = 1e-2});
  io::load_parameters(resumed, dir.path / "model.safetensors");
  io::load_optimizer_state(resumed_opt, dir.path / "opt.safetensors");
  CHECK(step(resumed, resumed_opt, test_device{}) == next);

  Rng third(3);
  GatedSink::Module<float> on_cpu("", config(), third);
  optim::AdamW<float> cpu_opt(nn::parameter_list<float>(on_cpu), {.lr = 1e-2});
  io::load_parameters(on_cpu, dir.path / "model.safetensors");
  io::load_optimizer_state(cpu_opt, dir.path / "opt.safetensors");
  CHECK(step(on_cpu, cpu_opt, cpu{}) == next);
}

}  // namespace
