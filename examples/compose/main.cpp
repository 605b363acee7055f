// Compose your own: four architectures from policies, each a few `using` lines (models.cpp),
// trained the same way on byte-level text, with a comparison table at the end. This file is the
// command line, the text and the table; models.cpp is the one to edit, and the only one that
// recompiles after an architecture edit.
//
//   compose [--steps N] [--seed S] [--d-model D] [--layers L] [--heads H] [--seq-len T]
//           [--batch B] [--lr LR] [--text brown|builtin|FILE] [--brown-files K]
//           [--only vanilla,gated,vga,exo] [--device cpu|cuda] [--smoke]
//
// Text: the Brown corpus when it is present (scripts/fetch-data.sh), else a built-in paragraph;
// the program says which. The last 10% of the bytes are held out for the validation loss.
// --smoke runs a few tiny steps on the built-in paragraph (the CTest smoke test). --device cuda
// trains the same models on the first GPU (a build with the CUDA backend; one process).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "../common/cli_checks.hpp"
#include "../common/error_line.hpp"
#include "compose.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/data/brown.hpp"
#include "sinklab/data/tokenizer.hpp"
#include "sinklab/dist/world.hpp"
#include "sinklab/experiment/cli.hpp"
#include "sinklab/io/files.hpp"

using namespace sinklab;

namespace {

const char* kBuiltinText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way - in short, the period was so far like the present period, that some of its "
    "noisiest authorities insisted on its being received, for good or for evil, in the superlative degree "
    "of comparison only.\n";

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"sinklab compose: four attention architectures from policies, trained on byte-level text"};
  compose::Setup s;
  std::string text_opt = "auto";
  std::size_t brown_files = 40;
  bool smoke = false;
  std::string device = "cpu";
  std::vector<std::string> only;
  app.add_option("--steps", s.steps, "training steps per variant")->check(examples::Positive);
  app.add_option("--seed", s.seed, "random seed (initialisation and batches)");
  app.add_option("--d-model", s.d_model, "model width")->check(examples::Positive);
  app.add_option("--layers", s.layers, "transformer layers")->check(examples::Positive);
  app.add_option("--heads", s.heads, "attention heads")->check(examples::Positive);
  app.add_option("--seq-len", s.seq_len, "bytes per training window")->check(examples::Positive);
  app.add_option("--batch", s.batch, "windows per step")->check(examples::Positive);
  app.add_option("--lr", s.lr, "peak AdamW learning rate")->check(examples::Positive);
  app.add_option("--text", text_opt, "'brown', 'builtin', a text file, or 'auto' (Brown if present)");
  app.add_option("--brown-files", brown_files, "Brown corpus files to read (0 = all 500)");
  app.add_option("--only", only, "run only these variants (vanilla, gated, vga, exo)")
      ->delimiter(',')
      ->check(CLI::IsMember(compose::kVariants));
  app.add_option("--device", device, "where the models train: cpu, or cuda (the first GPU; needs a build with the CUDA "
                                     "backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--smoke", smoke, "a few tiny steps on the built-in text (seconds; for CTest)");
  if (int rc = sinklab::experiment::parse(app, argc, argv); rc >= 0) return rc;
  sinklab::dist::Communicator& comm = sinklab::dist::world();  // stdout is rank 0's (experiment::parse)
  if (smoke) {
    s.steps = 3;
    s.seq_len = 16;
    s.batch = 2;
    s.log_every = 1;
    s.d_model = 16;
    s.layers = 1;
    s.heads = 2;
    if (text_opt == "auto") text_opt = "builtin";
  }
  SINKLAB_CHECK(s.d_model % s.heads == 0, "--heads ", s.heads, " does not divide --d-model ", s.d_model);
#if !defined(SINKLAB_EXAMPLE_CUDA)
  SINKLAB_CHECK(device == "cpu", "--device cuda needs a build with the CUDA backend (configure with SINKLAB_CUDA=ON, "
                                 "or AUTO where the CUDA Toolkit is found); this build has none");
#endif
  SINKLAB_CHECK(device == "cpu" || comm.size() == 1, "--device cuda trains in one process; run it without mpirun");

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
    SINKLAB_CHECK(!text.empty(), "--text '", text_opt, "' is empty; give a file with some text in it");
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
              static_cast<long long>(s.d_model), static_cast<long long>(s.layers),
              static_cast<long long>(s.heads));
  if (comm.size() > 1)
    std::printf("compose: %d ranks x %d threads (%s), each on %lld of every batch's %lld rows\n", comm.size(),
                sinklab::num_threads(), comm.backend().c_str(), static_cast<long long>(s.batch / comm.size()),
                static_cast<long long>(s.batch));

#if defined(SINKLAB_EXAMPLE_CUDA)
  const std::vector<compose::Result> results =
      device == "cuda" ? compose::train_variants_cuda(s, only) : compose::train_variants(s, only);
#else
  const std::vector<compose::Result> results = compose::train_variants(s, only);
#endif

  std::printf("\n%-36s %10s %10s %10s %10s %10s\n", "variant", "params", "first", "train", "val", "ms/step");
  bool finite = true;
  for (const compose::Result& r : results) {
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

int main(int argc, char** argv) {
  try {
    // Stop at the first NaN/Inf in a value or gradient, naming the op or parameter.
    sinklab::autodiff::CheckFinite guard;
    return run(argc, argv);
  } catch (const std::exception& e) {
    examples::print_error("compose", e);
    sinklab::dist::end_all_ranks_on_error(1);
    return 1;
  }
}
