// The optimisation step every example trains with, written once:
//
//   experiment::train(run, model, opt, spec, [&](Rng& data) {
//     const data::TokenBatch b = task.sample(data, batch);
//     run.see_batch(b.x);
//     return experiment::optimisation_step(tape, model, opt, b, sched, params, /*clip_norm=*/1.0);
//   }, evaluate);
//
// Forward with the loss on a fresh tape, backward, the gradients' global norm clipped (when
// clip_norm > 0), the learning rate set from the schedule at the optimizer's step count, and the
// update. Returns the loss.
//
// In a matrix run with --distribute data under mpirun, the same call trains on this rank's
// rows of the batch and averages the gradients over the ranks (experiment/data_parallel.hpp);
// the loss returned is then the mean over all ranks.
#pragma once
#include <type_traits>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/experiment/data_parallel.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/schedule.hpp"

namespace sinklab::experiment {

template <class T, class Device, class M, class O, class Batch>
double optimisation_step(autodiff::Tape<T, Device>& tape, M& model, O& opt, const Batch& b,
                         const optim::Schedule& sched, const std::vector<autodiff::Parameter<T, Device>*>& params,
                         double clip_norm) {
  constexpr bool reducible = std::is_same_v<T, float> && std::is_same_v<Device, cpu>;
  DataParallelRun* dp = active_data_parallel();
  SINKLAB_CHECK((!dp || reducible), "experiment: data-parallel training reduces float gradients on the cpu device; ",
                "this model trains in ", sizeof(T) == 8 ? "double" : "float", " on ", Device::name);
  Batch mine = b;
  if constexpr (reducible)
    if (dp) mine = dp->prepare(b, params);  // this rank's rows
  tape.clear();
  opt.zero_grad();
  auto loss = model.loss(tape, mine.x, mine.y);
  double value = 0;
  if constexpr (reducible)
    if (dp) value = dp->backward(tape, loss);  // gradients and loss averaged over the ranks
  if (!dp) {
    tape.backward(loss);
    value = static_cast<double>(loss.item());
  }
  if (clip_norm > 0) optim::clip_grad_norm(params, clip_norm);
  opt.set_lr_scale(sched.lr_scale(opt.step_count()));
  opt.step();
  return value;
}

}  // namespace sinklab::experiment
