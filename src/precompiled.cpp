// The body of sinklab::precompiled: every SINKLAB_EXTERN_TEMPLATE list of the headers, compiled
// here once (core/extern_template.hpp). Programs that link the target declare the same list
// `extern template` and skip instantiating and optimising those functions themselves.
#ifndef SINKLAB_INSTANTIATE
#error "src/precompiled.cpp is compiled with SINKLAB_INSTANTIATE (the sinklab::precompiled target)"
#endif
#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/attention.hpp"
#include "sinklab/autodiff/ops/clip.hpp"
#include "sinklab/autodiff/ops/glu.hpp"
#include "sinklab/autodiff/ops/heads.hpp"
#include "sinklab/autodiff/ops/mix.hpp"
#include "sinklab/autodiff/ops/norm.hpp"
#include "sinklab/autodiff/ops/rope.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/muon.hpp"
#include "sinklab/optim/sgd.hpp"
