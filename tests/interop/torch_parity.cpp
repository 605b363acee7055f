// The whole model against PyTorch (tests/scripts/torch_parity.sh drives it):
//
//   torch_parity export DIR   for each decoder variant: fixed random weights, a batch, and what
//                             sinklab computes from them (logits, loss, every parameter's gradient)
//                             → DIR/<variant>.safetensors (self-describing) and
//                               DIR/<variant>.expected.safetensors
//   torch_parity check DIR    loads DIR/<variant>.roundtrip.safetensors (written back from the
//                             PyTorch module by scripts/sinklab_torch.py) into a fresh model and
//                             requires the same logits, bit for bit
//   torch_parity llama DIR    imports the Hugging Face Llama checkpoint in DIR (written by
//                             sinklab_torch.py llama-fixture) and compares its logits
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sinklab/interop/llama.hpp"
#include "sinklab/io/checkpoint.hpp"
#include "sinklab/nn/transformer.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {

template <class M>
void randomise(M& m, uint64_t seed) {
  Rng rng(seed);
  m.parameters([&](autodiff::Parameter<float>& p) {
    const bool vector_gain = p.value.rank() == 1 && p.name.find("norm") != std::string::npos &&
                             p.name.find("bias") == std::string::npos;
    Tensor<float> r = rng.normal<float>(p.shape(), 0.0f, vector_gain ? 0.1f : 0.2f);
    for (int64_t i = 0; vector_gain && i < r.numel(); ++i) r.data()[i] += 1.0f;
    p.value.copy_from(r);
  });
}

const Tensor<int32_t> kIds = Tensor<int32_t>::from({2, 7}, {1, 5, 9, 2, 12, 0, 3, 3, 10, 7, 5, 11, 4, 8});
const Tensor<int32_t> kTargets = Tensor<int32_t>::from({2, 7}, {5, 9, 2, 12, 0, 3, -100, 10, 7, 5, 11, 4, 8, 6});

nn::ModelConfig base_config() {
  nn::ModelConfig c;
  c.vocab = 13;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  return c;
}

// The work for one model type, given the command.
template <class Model>
int run(const std::string& command, const fs::path& dir, const std::string& name, const nn::ModelConfig& cfg) {
  Rng rng(7);
  typename Model::template Module<float> m("", cfg, rng);
  const fs::path expected = dir / (name + ".expected.safetensors");
  if (command == "export") {
    randomise(m, 11);
    autodiff::Tape<float> t1;
    const Tensor<float> logits = m.logits(t1, kIds).value().clone();
    autodiff::Tape<float> t2;
    auto loss = m.loss(t2, kIds, kTargets);
    t2.backward(loss);
    io::save_parameters(m, dir / (name + ".safetensors"));
    io::SafetensorsWriter w;
    w.add("ids", kIds).add("targets", kTargets).add("logits", logits).add("loss", loss.value());
    m.parameters([&](autodiff::Parameter<float>& p) { w.add("grad." + p.name, p.grad); });
    w.write(expected);
    std::printf("%s: %lld parameters, loss %.6f\n", name.c_str(), static_cast<long long>(nn::parameter_count<float>(m)),
                static_cast<double>(loss.value().data()[0]));
    return 0;
  }
  // check: the model PyTorch wrote back computes the same logits.
  io::load_parameters(m, dir / (name + ".roundtrip.safetensors"));
  autodiff::Tape<float> t;
  const std::vector<float> got = m.logits(t, kIds).value().to_vector();
  const std::vector<float> want = io::SafetensorsFile::read(expected).get<float>("logits").to_vector();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
  std::printf("%s: round trip through PyTorch, %zu of %zu logits differ\n", name.c_str(), differ, got.size());
  return differ == 0 ? 0 : 1;
}

using RMS = nn::PreNorm<norm::RMS>;
template <class Score = score::Softmax, class Gate = gate::None, class Value = value::Identity>
using Attn = attn::Attention<Score, Gate, Value>;
using G1 = gate::FromInput<gate::per_channel, gate::on_output>;
using VGAValues = gate::FromValue<gate::per_head, gate::on_values>;
using VGAOutput = gate::FromValue<gate::per_head, gate::on_output>;

int run_all(const std::string& command, const fs::path& dir) {
  int failures = 0;
  auto one = [&](auto tag, const std::string& name, nn::ModelConfig cfg) {
    using Model = typename decltype(tag)::type;
    failures += run<Model>(command, dir, name, cfg);
  };
  auto cfg = base_config;
  auto with = [](auto f) {
    nn::ModelConfig c = base_config();
    f(c);
    return c;
  };
  one(std::type_identity<nn::Transformer<RMS, Attn<>, ffn::SwiGLU>>{}, "vanilla", cfg());
  one(std::type_identity<nn::Transformer<RMS, Attn<>, ffn::SwiGLU>>{}, "gqa_qknorm_tied_zloss", with([](auto& c) {
        c.kv_heads = 2;
        c.qk_norm = true;
        c.tie_embeddings = true;
        c.z_loss = 1e-2;
        c.rope_theta = 500.0;
      }));
  one(std::type_identity<nn::Transformer<RMS, Attn<score::Softmax, G1>, ffn::SwiGLU>>{}, "g1_gate", cfg());
  one(std::type_identity<nn::Transformer<RMS, Attn<score::Softmax, VGAValues>, ffn::SwiGLU>>{}, "vga_on_values",
      with([](auto& c) { c.kv_heads = 2; }));
  one(std::type_identity<nn::Transformer<RMS, Attn<score::Softmax, VGAOutput>, ffn::SwiGLU>>{}, "vga_on_output",
      with([](auto& c) { c.kv_heads = 2; }));
  one(std::type_identity<nn::Transformer<RMS, Attn<score::Softmax, gate::None, value::VScale>, ffn::SwiGLU>>{},
      "vscale", cfg());
  one(std::type_identity<nn::Transformer<RMS, Attn<score::SoftmaxSink>, ffn::SwiGLU>>{}, "learnable_sink", cfg());
  one(std::type_identity<nn::Transformer<nn::PreNorm<norm::GatedNorm<norm::RMS, 8>>, Attn<>, ffn::SwiGLU>>{},
      "gated_norm", cfg());
  one(std::type_identity<nn::Transformer<nn::PreNorm<norm::PreAffineRMS>, Attn<>, ffn::SwiGLU>>{}, "pre_affine_clip",
      with([](auto& c) { c.residual_clip = 1.5; }));
  one(std::type_identity<nn::Transformer<nn::PreNorm<norm::DyT>, Attn<>, ffn::SwiGLU>>{}, "dyt",
      with([](auto& c) { c.embed_scale = 2.0; }));
  return failures;
}

// The imported Llama against the logits PyTorch computed on the same weights.
int run_llama(const fs::path& dir) {
  const nn::ModelConfig cfg = interop::llama_config(dir);
  Rng rng(0);
  interop::Llama::Module<float> model("", cfg, rng);
  interop::load_llama(model, dir);
  const io::SafetensorsFile expected = io::SafetensorsFile::read(dir / "expected.safetensors");
  autodiff::Tape<float> t;
  const std::vector<float> got = model.logits(t, expected.get<int32_t>("ids")).value().to_vector();
  const std::vector<float> want = expected.get<float>("logits").to_vector();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  const double rel = diff / scale;
  std::printf("llama import: %lld layers, %lld/%lld heads, logits max relative difference %.2e (tolerance 1e-5)\n",
              static_cast<long long>(cfg.layers), static_cast<long long>(cfg.heads),
              static_cast<long long>(cfg.kv_heads), rel);
  return rel <= 1e-5 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: torch_parity export|check|llama DIR";
  if (argc != 3) {
    std::fprintf(stderr, "%s\n", usage.c_str());
    return 2;
  }
  const std::string command = argv[1];
  const fs::path dir = argv[2];
  try {
    if (command == "export") {
      fs::create_directories(dir);
      return run_all(command, dir) ? 1 : 0;
    }
    if (command == "check") return run_all(command, dir) ? 1 : 0;
    if (command == "llama") return run_llama(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_parity %s: %s\n", command.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "torch_parity: unknown command '%s'\n%s\n", command.c_str(), usage.c_str());
  return 2;
}
