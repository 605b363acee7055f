// The progress line of a run matrix: step, smoothed loss, steps/s and the ETA of the whole
// matrix. On a terminal one line redraws in place (at most 4 times a second); through a pipe or
// into a file nothing is drawn between evaluations, so logs hold only the full report lines.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sinklab::experiment {

inline std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long total = static_cast<long>(s + 0.5);
  char buf[48];
  if (total >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", total / 3600, (total % 3600) / 60);
  else if (total >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  else std::snprintf(buf, sizeof buf, "%lds", total);
  return buf;
}

class Progress {
 public:
  explicit Progress(int64_t total_steps = 0, bool tty = isatty(fileno(stdout)) != 0) : total_(total_steps), tty_(tty) {}

  void set_total(int64_t total_steps) { total_ = total_steps; }
  // Steps that need no work (finished runs skipped on --resume, a restarted run's first steps).
  void skip(int64_t steps) { total_ -= steps; }
  bool tty() const { return tty_; }
  // Prints nothing (the ranks of a data-parallel run other than 0, which train the same run).
  void set_quiet(bool quiet) { quiet_ = quiet; }

  // Time between pause() and resume() (evaluations, checkpoints) does not count toward the rate.
  void pause() { paused_ = true; }
  void resume() {
    paused_ = false;
    last_ = Clock::now();
  }

  // After each training step.
  void step(const std::string& tag, int64_t step, int64_t steps, double loss) {
    ++done_;
    if (!paused_) train_seconds_ += since(last_);
    last_ = Clock::now();
    if (quiet_ || !tty_ || (since(last_draw_) < 0.25 && step != steps)) return;
    last_draw_ = Clock::now();
    std::printf("\r%s\033[K", line(tag, step, steps, loss).c_str());
    std::fflush(stdout);
  }

  // A whole line (an evaluation's report, a message): replaces the redrawn line on a terminal.
  void print(const std::string& text) {
    if (quiet_) return;
    std::printf("%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
    std::fflush(stdout);
  }

  // "[tag] step 120/2000 loss 2.3100  41.2 steps/s  ETA 6m12s"
  std::string line(const std::string& tag, int64_t step, int64_t steps, double loss) const {
    const double rate = rate_per_second();
    const double eta = rate > 0 ? double(total_ - done_) / rate : NAN;
    char buf[200], lbuf[32] = "-";
    if (std::isfinite(loss)) std::snprintf(lbuf, sizeof lbuf, "%.4f", loss);
    std::snprintf(buf, sizeof buf, "[%s] step %lld/%lld loss %s  %.1f steps/s  ETA %s", tag.c_str(),
                  static_cast<long long>(step), static_cast<long long>(steps), lbuf, rate, format_duration(eta).c_str());
    return buf;
  }
  double rate_per_second() const { return train_seconds_ > 0 ? double(done_) / train_seconds_ : 0.0; }
  int64_t done() const { return done_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  int64_t total_ = 0, done_ = 0;
  bool tty_ = false, paused_ = false, quiet_ = false;
  double train_seconds_ = 0;
  Clock::time_point last_ = Clock::now(), last_draw_{};
};

}  // namespace sinklab::experiment
