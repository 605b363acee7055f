// The experiment harness in one include: run matrices of variants × seeds with paired starts,
// run directories with resume, progress lines, summaries over seeds, claims tables and gnuplot
// figures. Every reproduction in examples/ is built on it; a user's own study uses it the same way:
//
//   experiment::CommonFlags flags;                       // --out --seeds --steps --threads --resume --force --quick
//   CLI::App app{"my study"};
//   experiment::add_common_flags(app, flags);
//   if (int rc = experiment::parse(app, argc, argv); rc >= 0) return rc;
//   experiment::Matrix m("my_study", flags, {"vanilla", "vga"}, Json{{"lr", lr}}, argc, argv);
//   m.run([&](experiment::Run& run) {                     // seeds outer, variants inner; finished runs skipped
//     Rng rng(run.seed()), ref_rng(run.seed());
//     auto model = build(run.variant(), rng);
//     auto ref = build("vanilla", ref_rng);             // the reference's initial tensors, by name
//     run.progress().print(experiment::TensorBank::of(ref).apply(model).line());   // paired start
//     experiment::train(run, model, opt, {.steps = flags.steps, .eval_every = 100},
//                       [&](Rng& data) { auto b = sample(data); run.see_batch(b.x); return step(b); },
//                       [&](int64_t step) { return io::LogRow{{"val_loss", validate(model)}}; });
//   });
//   experiment::summarize(m.finals("vga", "val_loss"));   // mean ± sd, min..max over seeds
//
// examples/vga_bigram_backcopy/ is the complete version (claims, figures, snapshots).
#pragma once
#include "sinklab/experiment/cli.hpp"
#include "sinklab/experiment/matrix.hpp"
#include "sinklab/experiment/pairing.hpp"
#include "sinklab/experiment/plots.hpp"
#include "sinklab/experiment/progress.hpp"
#include "sinklab/experiment/run.hpp"
#include "sinklab/experiment/run_dir.hpp"
#include "sinklab/experiment/stats.hpp"
#include "sinklab/experiment/step.hpp"
#include "sinklab/experiment/table.hpp"
