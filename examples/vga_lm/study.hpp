// examples/vga_lm: what its translation units share (the study itself is described at the top of
// main.cpp). The models and one run's training and evaluation are in fit.hpp, instantiated once
// per family and layout by arch_encoder.cpp, arch_encoder_post.cpp and arch_decoder.cpp (so they
// compile in parallel and an architecture edit recompiles one of them); main.cpp holds the
// command line, the matrix, the tables, the claims and the figures.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/lm_study.hpp"
#include "../common/sentences.hpp"
#include "sinklab/data/masked_lm.hpp"
#include "sinklab/data/word_lm.hpp"
#include "sinklab/experiment/experiment.hpp"
#include "sinklab/nn/layers.hpp"

namespace vga_lm {

using namespace sinklab;
using experiment::Json;

inline const std::vector<std::string> kPretrain = {"vanilla", "register", "sink", "iga", "vga", "iga_output", "vga_output"};
inline const std::vector<std::string> kRetrofit = {"finetune", "retrofit_vga"};
inline std::vector<std::string> all_variants() {
  std::vector<std::string> v = kPretrain;
  v.insert(v.end(), kRetrofit.begin(), kRetrofit.end());
  return v;
}
inline bool is_retrofit(const std::string& v) { return std::find(kRetrofit.begin(), kRetrofit.end(), v) != kRetrofit.end(); }

// [CLS]/BOS, [MASK], and with --sep a [SEP] after every sentence; the words (<unk> first) follow.
// Without --sep there are two specials, as before [SEP] existed, so those runs are unchanged.
constexpr int32_t kFirst = 0, kMask = 1, kSep = 2;

struct Settings {
  std::string family = "both";
  std::vector<std::string> variants = all_variants();
  std::string block = "pre";  // pre | post (the encoder only: BERT's post-LN layout)
  bool sep = false;           // a [SEP] token after every sentence (never masked, never a target)
  // Defaults: ~0.1 s per step on 2 cores (measured 0.103 s), so one 1500-step run takes ~2.7 min with its
  // evaluations and the full matrix (2 families x 7 variants x 3 seeds + 12 short retrofits) ~2 h.
  int64_t d_model = 128, layers = 4, heads = 4, seq_len = 64, batch = 16, vocab = 4096, registers = 4;
  double lr = 3e-3, weight_decay = 0.1, beta2 = 0.98, warmup = 0.05, clip = 1.0, min_lr_ratio = 0.1;
  double retrofit_fraction = 0.05, retrofit_lr = 1e-3;
  std::string retrofit_init = "preserve";
  std::string init = "normal";  // --init (examples/common/lm_flags.hpp)
  std::vector<std::string> corpus = {"brown"};
  std::string preset;
  int64_t eval_every = 100, eval_batch = 16, val_batches = 8, probe_batches = 2, calib_batches = 4;
  uint64_t eval_seed = 20250923;
  std::string text_file, brown_dir;
  bool smoke = false, plots = true;
};

inline int32_t specials(const Settings& s) { return s.sep ? 3 : 2; }

inline Json settings_json(const Settings& s, const std::string& family, const std::string& text_source) {
  return Json{{"family", family},         {"block", s.block}, {"sep", s.sep},
              {"d_model", s.d_model},
              {"layers", s.layers},       {"heads", s.heads},
              {"seq_len", s.seq_len},     {"batch", s.batch},
              {"vocab", s.vocab},         {"registers", s.registers},
              {"lr", s.lr},               {"weight_decay", s.weight_decay},
              {"beta2", s.beta2},         {"warmup", s.warmup},
              {"clip", s.clip},           {"min_lr_ratio", s.min_lr_ratio},
              {"retrofit_fraction", s.retrofit_fraction},
              {"retrofit_lr", s.retrofit_lr},
              {"retrofit_init", s.retrofit_init}, {"init", s.init},
              {"eval_every", s.eval_every}, {"eval_batch", s.eval_batch},
              {"val_batches", s.val_batches}, {"probe_batches", s.probe_batches},
              {"calib_batches", s.calib_batches}, {"eval_seed", s.eval_seed},
              {"text", text_source}};
}

// The corpus: --text, the built-in smoke sentences or --corpus (examples/common/sentences.hpp), split
// and tokenised by data::make_word_lm (with --sep, kSep after every sentence); windows start with kFirst.
struct Corpus : data::WordLmCorpus {
  std::string source;
};

inline Corpus load_corpus(const Settings& s) {
  const examples::Sentences text = examples::load_corpus("vga_lm", s.corpus, s.text_file, s.brown_dir, s.smoke);
  Corpus c{data::make_word_lm(text.lines, {.vocab = s.vocab, .specials = specials(s), .sentence_end = s.sep ? kSep : -1}),
           text.source};
  return c;
}

struct Task {
  bool encoder = false;
  int64_t T = 0, vocab = 0;
  const std::vector<int32_t>* train = nullptr;
  data::MaskedLmOptions mlm;

  // A training batch from `rng` (the run's data stream): random windows, masked for the encoder.
  data::TokenBatch sample(Rng& rng, int64_t batch) const {
    return finish(data::sample_lm_windows(*train, rng, batch, T, kFirst), rng);
  }
  data::TokenBatch finish(data::TokenBatch b, Rng& rng) const {
    if (!encoder) return b;
    return data::mask_tokens(b.x, rng, mlm);  // x keeps [CLS] at 0; targets at the selected positions
  }
};

using EvalData = examples::LmEvalData;  // validation and calibration batches (no probe batch)

inline EvalData make_eval_data(const Task& task, const std::vector<int32_t>& val, const Settings& s) {
  EvalData e;
  Rng mask_rng(s.eval_seed, 1);
  for (auto& b : data::consecutive_lm_windows(val, task.T, s.eval_batch, s.val_batches, kFirst))
    e.validation.push_back(task.finish(std::move(b), mask_rng));
  Rng calib(s.eval_seed, 2);
  for (int64_t i = 0; i < s.calib_batches; ++i) e.calibration.push_back(task.sample(calib, s.eval_batch));
  return e;
}

struct FamilyCtx {
  const Settings* s = nullptr;
  Task task;
  EvalData ev;
  nn::ModelConfig cfg;
  int64_t pretrain_steps = 0, retrofit_steps = 0;
  const experiment::Matrix* matrix = nullptr;
};

// What one run costs: seconds per training step of the vanilla model (one warm-up step, then the
// mean of three), per evaluation, and for the final evaluation with W8A8.
struct Timing {
  double step = 0, eval = 0, final_eval = 0;
  double run(int64_t steps, int64_t eval_every) const {
    return step * double(steps) + eval * double(steps / eval_every) + final_eval;
  }
};

// Per family (arch_encoder.cpp: bidirectional, pre- or post-norm by --block, the latter in
// arch_encoder_post.cpp; arch_decoder.cpp: causal): one run of any variant, the measured cost of a
// run, and the vanilla model's parameter count.
void run_encoder(experiment::Run& run, const FamilyCtx& c);
void run_encoder_post_norm(experiment::Run& run, const FamilyCtx& c);
void run_decoder(experiment::Run& run, const FamilyCtx& c);
Timing time_encoder(const FamilyCtx& c);
Timing time_encoder_post_norm(const FamilyCtx& c);
Timing time_decoder(const FamilyCtx& c);
int64_t vanilla_parameters(const FamilyCtx& c);

}  // namespace vga_lm
