// The experiment harness in one include: run matrices of variants × seeds with paired starts,
// run directories with resume, progress lines, summaries over seeds, claims tables and gnuplot
// figures. Every reproduction in examples/ is built on it; a user's own study uses it the same way.
#pragma once
#include "sinklab/experiment/cli.hpp"
#include "sinklab/experiment/matrix.hpp"
#include "sinklab/experiment/pairing.hpp"
#include "sinklab/experiment/plots.hpp"
#include "sinklab/experiment/progress.hpp"
#include "sinklab/experiment/run.hpp"
#include "sinklab/experiment/run_dir.hpp"
#include "sinklab/experiment/stats.hpp"
#include "sinklab/experiment/table.hpp"
