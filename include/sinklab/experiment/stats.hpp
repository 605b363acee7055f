// Summary statistics of one figure over seeds: mean, sample standard deviation, min and max.
//
//   experiment::Spread s = experiment::summarize({0.91, 0.93, 0.90});
//   s.str()    // "0.913 ± 0.015 (0.900..0.930)"
//
// NaN values (a diverged run, a metric that does not apply) are counted but left out of the
// statistics, so one bad seed shows up as `n_finite < n` instead of poisoning the mean.
//
// paired_difference(d): per-seed differences (variant − baseline of the same seed, as
// Matrix::paired gives them) with their spread and how many seeds agree in sign. A difference is
// `clear` only when at least two seeds have it, every seed has the same sign, and |mean| ≥ sd;
// anything else is inside the seed spread, and a verdict built on it reads "inconclusive".
//
// fit_line(xs, ys): the least-squares line through paired points, for a claim that reads a
// slope (e.g. log Compress against log ‖h‖); pairs with a non-finite member are left out.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace sinklab::experiment {

struct Spread {
  std::size_t n = 0;         // values given
  std::size_t n_finite = 0;  // values that entered the statistics
  double mean = NAN, sd = NAN, min = NAN, max = NAN;

  // "mean ± sd (min..max)"; with one finite value just the value; "n/a" with none.
  std::string str(int precision = 3) const {
    if (n_finite == 0) return "n/a";
    char buf[160];
    if (n_finite == 1) {
      std::snprintf(buf, sizeof buf, "%.*f", precision, mean);
    } else {
      std::snprintf(buf, sizeof buf, "%.*f ± %.*f (%.*f..%.*f)", precision, mean, precision, sd, precision, min,
                    precision, max);
    }
    std::string s = buf;
    if (n_finite < n) s += " [" + std::to_string(n - n_finite) + " non-finite]";
    return s;
  }
  // "mean ± sd" only, for dense tables.
  std::string short_str(int precision = 3) const {
    if (n_finite == 0) return "n/a";
    char buf[96];
    if (n_finite == 1) std::snprintf(buf, sizeof buf, "%.*f", precision, mean);
    else std::snprintf(buf, sizeof buf, "%.*f ± %.*f", precision, mean, precision, sd);
    return buf;
  }
};

inline Spread summarize(const std::vector<double>& xs) {
  Spread s;
  s.n = xs.size();
  double sum = 0;
  for (double x : xs) {
    if (!std::isfinite(x)) continue;
    if (s.n_finite == 0) s.min = s.max = x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    sum += x;
    ++s.n_finite;
  }
  if (s.n_finite == 0) return s;
  s.mean = sum / double(s.n_finite);
  double ss = 0;
  for (double x : xs)
    if (std::isfinite(x)) ss += (x - s.mean) * (x - s.mean);
  s.sd = s.n_finite > 1 ? std::sqrt(ss / double(s.n_finite - 1)) : 0.0;  // sample sd (n − 1)
  return s;
}

struct PairedDifference {
  Spread diff;
  std::size_t positive = 0, negative = 0;  // seeds with d > 0 and d < 0

  bool clear() const {
    return diff.n_finite >= 2 && (positive == diff.n_finite || negative == diff.n_finite) &&
           std::abs(diff.mean) >= diff.sd;
  }
  // +1 or −1 when clear, 0 when inconclusive.
  int sign() const { return clear() ? (positive ? 1 : -1) : 0; }
  // "−0.005 ± 0.009, 2/3 seeds < 0"
  std::string str(int precision = 3) const {
    if (diff.n_finite == 0) return "n/a";
    const bool up = positive >= negative;
    return diff.short_str(precision) + ", " + std::to_string(up ? positive : negative) + "/" +
           std::to_string(diff.n_finite) + (diff.n_finite == 1 ? " seed " : " seeds ") + (up ? "> 0" : "< 0");
  }
};

inline PairedDifference paired_difference(const std::vector<double>& d) {
  PairedDifference p;
  p.diff = summarize(d);
  for (double x : d) {
    if (!std::isfinite(x)) continue;
    if (x > 0) ++p.positive;
    if (x < 0) ++p.negative;
  }
  return p;
}

struct LineFit {
  std::size_t n = 0;  // finite pairs used
  double slope = NAN, intercept = NAN, r2 = NAN;
};

inline LineFit fit_line(const std::vector<double>& xs, const std::vector<double>& ys) {
  LineFit f;
  double sx = 0, sy = 0;
  const std::size_t m = std::min(xs.size(), ys.size());
  auto ok = [&](std::size_t i) { return std::isfinite(xs[i]) && std::isfinite(ys[i]); };
  for (std::size_t i = 0; i < m; ++i)
    if (ok(i)) sx += xs[i], sy += ys[i], ++f.n;
  if (f.n < 2) return f;
  const double mx = sx / double(f.n), my = sy / double(f.n);
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < m; ++i)
    if (ok(i)) {
      const double dx = xs[i] - mx, dy = ys[i] - my;
      sxx += dx * dx, sxy += dx * dy, syy += dy * dy;
    }
  if (sxx == 0) return f;  // all x equal: no slope
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.r2 = syy == 0 ? 1.0 : sxy * sxy / (sxx * syy);
  return f;
}

}  // namespace sinklab::experiment
