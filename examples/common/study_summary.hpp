// What every study's summary reads from its finished run matrix, per variant: whether it ran, how
// many seeds diverged, a metric's spread over seeds and its mean, the paired per-seed differences
// against a reference variant (and the reference over the seeds a variant shares with it), and
// the per-seed ratio and difference of two metrics. A study's Summary derives
// from it and adds what its own tables need (`Summary S{{matrix, settings}, extra...}`).
#pragma once
#include <string>
#include <vector>

#include "sinklab/experiment/matrix.hpp"
#include "sinklab/experiment/stats.hpp"

namespace examples {

template <class Settings>
struct StudySummary {
  const sinklab::experiment::Matrix& m;
  const Settings& s;

  bool has(const std::string& v) const { return !m.of(v).empty(); }
  int diverged(const std::string& v) const { return m.diverged(v); }
  sinklab::experiment::Spread spread(const std::string& v, const std::string& metric) const {
    return m.spread(v, metric);
  }
  double mean(const std::string& v, const std::string& metric) const { return m.spread(v, metric).mean; }
  // v's metric minus ref's, seed by seed (the seeds both finished).
  std::vector<double> paired(const std::string& v, const std::string& ref, const std::string& metric) const {
    return m.paired(v, ref, metric);
  }
  // Per seed that did not diverge, num / den of v's final metrics (token 0 over tokens 1–15, say).
  std::vector<double> ratio(const std::string& v, const std::string& num, const std::string& den) const {
    std::vector<double> r;
    for (const auto* x : m.of(v))
      if (!x->diverged) r.push_back(x->metric(num) / x->metric(den));
    return r;
  }
  // Per seed that did not diverge, a − b of v's final metrics (one run measured two ways, say).
  std::vector<double> difference(const std::string& v, const std::string& a, const std::string& b) const {
    std::vector<double> d;
    for (const auto* x : m.of(v))
      if (!x->diverged) d.push_back(x->metric(a) - x->metric(b));
    return d;
  }
  // Per seed both finished without diverging, v's num / den minus ref's: a token-0 over
  // tokens-1–15 ratio compared between two variants, say.
  std::vector<double> paired_ratio(const std::string& v, const std::string& ref, const std::string& num,
                                   const std::string& den) const {
    return m.paired_by(v, ref, [&](const auto& x, const auto& y) {
      return x.metric(num) / x.metric(den) - y.metric(num) / y.metric(den);
    });
  }
  // ref's metric over the seeds v finished too, neither diverged: a variant run on fewer seeds than
  // the reference is set beside the reference's runs of those seeds.
  sinklab::experiment::Spread spread_on_shared(const std::string& ref, const std::string& v,
                                               const std::string& metric) const {
    std::vector<double> xs;
    for (const auto* y : m.of(ref))
      for (const auto* x : m.of(v))
        if (x->seed == y->seed && !x->diverged && !y->diverged) xs.push_back(y->metric(metric));
    return sinklab::experiment::summarize(xs);
  }
  // v's mean over ref's, both over the seeds they share.
  double mean_ratio(const std::string& v, const std::string& ref, const std::string& metric) const {
    return spread_on_shared(v, ref, metric).mean / spread_on_shared(ref, v, metric).mean;
  }
  sinklab::experiment::Spread ratio_spread(const std::string& v, const std::string& num, const std::string& den) const {
    return sinklab::experiment::summarize(ratio(v, num, den));
  }
};

}  // namespace examples
