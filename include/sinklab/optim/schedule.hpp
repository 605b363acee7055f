// Learning-rate schedules as a multiplier of the base lr: linear warmup, then constant, linear
// decay, cosine decay, or warmup-stable-decay (WSD: constant, then a decay over the last
// fraction of training). Same convention as PyTorch's LambdaLR / Hugging Face schedules:
// lr_scale(step) is the scale for the update with 0-based index `step`; warmup rises linearly
// from 0 at step 0 to 1 at step warmup_steps, and decays reach min_lr_ratio at total_steps
// (and stay there after it).
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>

#include "sinklab/core/error.hpp"

namespace sinklab::optim {

enum class Decay { Constant, Linear, Cosine, WSD };
// Shape of the WSD decay phase. OneMinusSqrt is 1 − √progress (Hägele et al., 2024).
enum class WsdShape { Linear, Cosine, OneMinusSqrt };

struct ScheduleOptions {
  Decay decay = Decay::Constant;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // needed by every decay but Constant; includes the warmup
  double min_lr_ratio = 0;  // scale at the end of the decay, in [0, 1]
  double decay_fraction = 0.2;  // WSD: fraction of total_steps spent decaying, in (0, 1]
  WsdShape wsd_shape = WsdShape::Linear;
};

inline const char* decay_name(Decay d) {
  switch (d) {
    case Decay::Constant: return "constant";
    case Decay::Linear: return "linear";
    case Decay::Cosine: return "cosine";
    case Decay::WSD: return "wsd";
  }
  return "?";
}

inline void check_schedule(const ScheduleOptions& o) {
  SINKLAB_CHECK(o.warmup_steps >= 0, "optim::Schedule: warmup_steps ", o.warmup_steps, ", expected >= 0");
  if (o.decay == Decay::Constant) return;
  const char* kind = decay_name(o.decay);
  SINKLAB_CHECK(o.total_steps > o.warmup_steps, "optim::Schedule(", kind, "): total_steps ", o.total_steps,
                " must exceed warmup_steps ", o.warmup_steps, " so that there is a decay phase");
  SINKLAB_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "optim::Schedule(", kind, "): min_lr_ratio ",
                o.min_lr_ratio, ", expected in [0, 1]");
  if (o.decay == Decay::WSD) {
    SINKLAB_CHECK(o.decay_fraction > 0 && o.decay_fraction <= 1, "optim::Schedule(wsd): decay_fraction ",
                  o.decay_fraction, ", expected in (0, 1]");
    const double decay_start = static_cast<double>(o.total_steps) * (1.0 - o.decay_fraction);
    SINKLAB_CHECK(decay_start >= static_cast<double>(o.warmup_steps), "optim::Schedule(wsd): the decay over the last ",
                  o.decay_fraction, " of ", o.total_steps, " steps would start at step ", decay_start,
                  ", before the warmup of ", o.warmup_steps, " steps ends");
  }
}

// The lr multiplier at `step`; validates the options (throws sinklab::Error on a bad config).
inline double lr_scale(const ScheduleOptions& o, int64_t step) {
  check_schedule(o);
  SINKLAB_CHECK(step >= 0, "optim::lr_scale: step ", step, ", expected >= 0");
  const double s = static_cast<double>(step);
  if (step < o.warmup_steps) return s / static_cast<double>(o.warmup_steps);
  if (o.decay == Decay::Constant) return 1.0;
  if (step >= o.total_steps) return o.min_lr_ratio;

  const double total = static_cast<double>(o.total_steps);
  double start = static_cast<double>(o.warmup_steps);  // where the decay begins
  if (o.decay == Decay::WSD) start = total * (1.0 - o.decay_fraction);
  if (s < start) return 1.0;  // WSD's stable phase
  const double progress = (s - start) / (total - start);  // in [0, 1)

  double shape = 0;  // falls from 1 to 0 over the decay
  const bool cosine = o.decay == Decay::Cosine || (o.decay == Decay::WSD && o.wsd_shape == WsdShape::Cosine);
  if (cosine) shape = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  else if (o.decay == Decay::WSD && o.wsd_shape == WsdShape::OneMinusSqrt) shape = 1.0 - std::sqrt(progress);
  else shape = 1.0 - progress;
  return o.min_lr_ratio + (1.0 - o.min_lr_ratio) * shape;
}

// A validated schedule; lr_scale is a pure function of the step.
class Schedule {
 public:
  explicit Schedule(ScheduleOptions o) : o_(o) { check_schedule(o_); }
  double lr_scale(int64_t step) const { return optim::lr_scale(o_, step); }
  const ScheduleOptions& options() const { return o_; }

 private:
  ScheduleOptions o_;
};

}  // namespace sinklab::optim
