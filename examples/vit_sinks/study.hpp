// examples/vit_sinks: what its translation units share. The four architectures are built in
// arch_plain.cpp (vanilla, registers) and arch_gated.cpp (the G1 gate, with and without
// registers), so the two compile in parallel; fit.hpp trains and measures one run; main.cpp holds
// the command line, the matrix, the tables, the claims and the figures.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sinklab/data/fashion_mnist.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/vit.hpp"

namespace vit_sinks {

struct Settings {
  // A ViT small enough for two cores: 28×28 images in 4×4 patches (7×7 = 49 patch tokens + CLS),
  // pre-norm LayerNorm, GELU MLP (4·d), 4 registers when a variant has them.
  int64_t d_model = 64, layers = 6, heads = 4, patch = 4, registers = 4, batch = 128;
  // AdamW with linear warmup and cosine decay to 0, clipped at 1 (the DeiT/ViT recipe, scaled down).
  double lr = 1e-3, weight_decay = 0.05, warmup = 0.05, clip = 1.0;
  int64_t eval_every = 250;
  int64_t test_images = 0;    // test images for the accuracy (0: all 10 000)
  int64_t probe_images = 64;  // test images whose attention the per-layer metrics read
  // Dense probe: a linear classifier per patch token of the frozen final model, trained on
  // dense_train training images and scored on dense_test test images.
  int64_t dense_train = 6000, dense_test = 2000, dense_steps = 1500;
  double dense_lr = 1e-2;
  double foreground = 0.2;  // a patch whose mean pixel is at least this is foreground (else background)
  std::string data_dir;     // Fashion-MNIST folder (default: the cache, then Debian's package)
  bool smoke = false, plots = true;
};

// vanilla, gated (G1: σ(X·W_g) per channel on each head's output, W_g = 0, bias 2), registers,
// gated_registers.
struct Variant {
  std::string name;
  bool gate = false, registers = false;
};
Variant parse_variant(const std::string& name);  // throws on a name it cannot read

struct Data {
  sinklab::data::ImageDataset train, test;
  sinklab::Tensor<float> probe;  // [probe_images, 28, 28]: the first test images
};

struct Context {
  const Settings* s = nullptr;
  const Data* d = nullptr;
  sinklab::nn::VitConfig cfg;
  int64_t steps = 0;
};

// Trains one run of the matrix (any variant) and records everything the study reports.
void run(sinklab::experiment::Run& run, const Context& c);

namespace detail {
bool run_plain(sinklab::experiment::Run& r, const Context& c, const Variant& v);
bool run_gated(sinklab::experiment::Run& r, const Context& c, const Variant& v);
}  // namespace detail

}  // namespace vit_sinks
