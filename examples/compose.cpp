// Compose your own: four architectures from policies, each a few `using` lines, trained the
// same way on byte-level text, with a comparison table at the end.
//
//   compose [--steps N] [--seed S] [--d-model D] [--layers L] [--heads H] [--seq-len T]
//           [--batch B] [--lr LR] [--text brown|builtin|FILE] [--brown-files K]
//           [--only vanilla,gated,vga,exo] [--smoke]
//
// Text: the Brown corpus when it is present (scripts/fetch-data.sh), else a built-in paragraph;
// the program says which. The last 10% of the bytes are held out for the validation loss.
// --smoke runs a few tiny steps on the built-in paragraph (the CTest smoke test).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sinklab/data/brown.hpp"
#include "sinklab/data/split.hpp"
#include "sinklab/data/tokenizer.hpp"
#include "sinklab/io/files.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/schedule.hpp"

using namespace sinklab;

// ---- the architectures -------------------------------------------------------------------
using Block = nn::PreNorm<norm::RMS>;
using GatedBlock = nn::PreNorm<norm::GatedNorm<norm::RMS>>;

using Softmax = attn::Attention<>;
using G1 = attn::Attention<score::Softmax, gate::FromInput<gate::per_channel, gate::on_output>>;
using VGA = attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>, value::VScale>;
using ExoMix = mix::ExoFormer<mix::per_element, mix::Dynamic>;

using Vanilla = nn::Transformer<Block, Softmax, ffn::SwiGLU>;
using GatedAttention = nn::Transformer<GatedBlock, G1, ffn::SwiGLU>;
using VgaVScale = nn::Transformer<Block, VGA, ffn::SwiGLU>;
using ExoFormer = nn::Transformer<Block, G1, ffn::SwiGLU, pos::RoPE, tokens::None, ExoMix>;
// --------------------------------------------------------------------------------------------

namespace {

const char* kBuiltinText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way - in short, the period was so far like the present period, that some of its "
    "noisiest authorities insisted on its being received, for good or for evil, in the superlative degree "
    "of comparison only.\n";

struct Setup {
  int steps = 300;
  uint64_t seed = 0;
  int64_t seq_len = 64, batch = 16;
  double lr = 3e-3;
  int log_every = 50;
  std::vector<int32_t> train, val;
};

struct Result {
  std::string name;
  int64_t params = 0;
  double first = 0, last = 0, val = 0, ms_per_step = 0;
};

// Mean loss over (up to 8) consecutive held-out windows, without building a backward graph.
template <class M>
double evaluate(M& model, const Setup& s) {
  data::TokenStreamBatcher val(s.val, s.seq_len, s.seed);
  autodiff::no_grad ng;
  autodiff::Tape<float> tape;
  double total = 0;
  int n = 0;
  for (const auto& b : val.sequential(s.batch, 8)) {
    tape.clear();
    total += model.loss(tape, b.x, b.y).item();
    ++n;
  }
  return total / std::max(n, 1);
}

template <class Model>
Result train(const std::string& name, const nn::ModelConfig& cfg, const Setup& s) {
  Rng rng(s.seed);
  typename Model::template Module<float> model("", cfg, rng);
  optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = s.lr, .beta2 = 0.95, .weight_decay = 0.0});
  optim::Schedule sched({.decay = optim::Decay::Cosine,
                         .warmup_steps = std::max(1, s.steps / 20),
                         .total_steps = s.steps,
                         .min_lr_ratio = 0.1});
  data::TokenStreamBatcher batches(s.train, s.seq_len, s.seed + 1);  // same batches for every variant
  autodiff::Tape<float> tape;

  Result r{name, nn::parameter_count<float>(model)};
  std::printf("\n== %s: %lld parameters\n", name.c_str(), static_cast<long long>(r.params));
  double smooth = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step <= s.steps; ++step) {
    const data::TokenBatch b = batches.sample(s.batch);
    tape.clear();
    opt.zero_grad();
    auto loss = model.loss(tape, b.x, b.y);
    tape.backward(loss);
    opt.set_lr_scale(sched.lr_scale(step - 1));
    opt.step();
    const double l = loss.item();
    smooth = step == 1 ? l : 0.9 * smooth + 0.1 * l;
    if (step == 1) r.first = l;
    if (step == 1 || step % s.log_every == 0 || step == s.steps)
      std::printf("  step %5d  loss %.4f  (smoothed %.4f)\n", step, l, smooth);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.last = smooth;
  r.ms_per_step = 1e3 * secs / s.steps;
  r.val = evaluate(model, s);
  std::printf("  validation loss %.4f  (%.1f ms/step)\n", r.val, r.ms_per_step);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sinklab compose: four attention architectures from policies, trained on byte-level text"};
  Setup s;
  nn::ModelConfig cfg;
  cfg.d_model = 64;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.qk_norm = true;
  std::string text_opt = "auto";
  std::size_t brown_files = 40;
  bool smoke = false;
  std::vector<std::string> only;
  app.add_option("--steps", s.steps, "training steps per variant")->check(CLI::PositiveNumber);
  app.add_option("--seed", s.seed, "random seed (initialisation and batches)");
  app.add_option("--d-model", cfg.d_model, "model width")->check(CLI::PositiveNumber);
  app.add_option("--layers", cfg.layers, "transformer layers")->check(CLI::PositiveNumber);
  app.add_option("--heads", cfg.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", s.seq_len, "bytes per training window")->check(CLI::PositiveNumber);
  app.add_option("--batch", s.batch, "windows per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", s.lr, "peak AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--text", text_opt, "'brown', 'builtin', a text file, or 'auto' (Brown if present)");
  app.add_option("--brown-files", brown_files, "Brown corpus files to read (0 = all 500)");
  app.add_option("--only", only, "run only these variants (vanilla, gated, vga, exo)")
      ->delimiter(',')
      ->check(CLI::IsMember({"vanilla", "gated", "vga", "exo"}));
  app.add_flag("--smoke", smoke, "a few tiny steps on the built-in text (seconds; for CTest)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    s.steps = 3;
    s.seq_len = 16;
    s.batch = 2;
    s.log_every = 1;
    cfg.d_model = 16;
    cfg.layers = 1;
    cfg.heads = 2;
    if (text_opt == "auto") text_opt = "builtin";
  }

  std::string text, source;
  if (text_opt == "builtin") {
    text = kBuiltinText;
    source = "the built-in paragraph";
  } else if (text_opt == "brown" || text_opt == "auto") {
    try {
      text = data::load_brown_text(std::nullopt, {.max_files = brown_files});
      source = "the Brown corpus (" + (brown_files ? std::to_string(brown_files) : std::string("all")) + " files)";
    } catch (const Error&) {
      if (text_opt == "brown") throw;
      text = kBuiltinText;
      source = "the built-in paragraph (the Brown corpus was not found; scripts/fetch-data.sh gets it)";
    }
  } else {
    text = io::read_file_text(text_opt);
    source = "'" + text_opt + "'";
  }
  // Short texts repeat so that both splits hold whole windows.
  while (static_cast<int64_t>(text.size()) < 20 * (s.seq_len + 1)) text += text;
  const auto ids = data::ByteTokenizer().encode(text);
  const auto cut = static_cast<std::ptrdiff_t>(ids.size() * 9 / 10);
  s.train.assign(ids.begin(), ids.begin() + cut);
  s.val.assign(ids.begin() + cut, ids.end());
  s.log_every = std::max(1, std::min(s.log_every, s.steps / 6));
  std::printf("compose: %zu bytes of %s; %d steps of %lld × %lld bytes; d_model %lld, %lld layers, %lld heads\n",
              text.size(), source.c_str(), s.steps, static_cast<long long>(s.batch), static_cast<long long>(s.seq_len),
              static_cast<long long>(cfg.d_model), static_cast<long long>(cfg.layers),
              static_cast<long long>(cfg.heads));

  auto wanted = [&](const char* key) { return only.empty() || std::find(only.begin(), only.end(), key) != only.end(); };
  std::vector<Result> results;
  if (wanted("vanilla")) results.push_back(train<Vanilla>("vanilla (softmax, RMSNorm, SwiGLU)", cfg, s));
  if (wanted("gated")) results.push_back(train<GatedAttention>("gated attention G1 + GatedNorm", cfg, s));
  if (wanted("vga")) results.push_back(train<VgaVScale>("VGA + V-scale", cfg, s));
  if (wanted("exo")) results.push_back(train<ExoFormer>("ExoFormer, dynamic element mixing", cfg, s));

  std::printf("\n%-36s %10s %10s %10s %10s %10s\n", "variant", "params", "first", "train", "val", "ms/step");
  bool finite = true;
  for (const Result& r : results) {
    std::printf("%-36s %10lld %10.4f %10.4f %10.4f %10.1f\n", r.name.c_str(), static_cast<long long>(r.params), r.first,
                r.last, r.val, r.ms_per_step);
    finite = finite && std::isfinite(r.last) && std::isfinite(r.val);
  }
  std::printf("(train: smoothed training loss at the end; val: mean loss on held-out windows; ln 256 = %.3f)\n",
              std::log(256.0));
  if (!finite) {
    std::fprintf(stderr, "compose: a loss is not finite\n");
    return 1;
  }
  return 0;
}
