// gradcheck: compares the tape's analytic gradients with central differences in double.
//
// Everything checked is a Parameter<double> (wrap plain inputs with make_inputs), so the
// same check covers a bare op, a layer's weights and a policy's parameters. A non-scalar
// output y is reduced to ⟨y, R⟩ with a fixed random R, so every output element matters.
#pragma once
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sinklab/autodiff/ops/elementwise.hpp"
#include "sinklab/autodiff/ops/reduce.hpp"
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/rng.hpp"

namespace sinklab::autodiff {

struct GradcheckOptions {
  double eps = 5e-6;  // near the optimum (cube root of double epsilon) for central differences
  double tolerance = 1e-6;  // on the relative error defined below
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  double max_error = 0;  // max over elements of |a − n| / max(|a|, |n|, floor)
  std::string worst;     // which parameter and element, with both values
  int64_t checked = 0;
};
inline std::ostream& operator<<(std::ostream& os, const GradcheckResult& r) {
  return os << (r.ok ? "gradcheck ok" : "gradcheck FAILED") << ": max relative error " << r.max_error << " over "
            << r.checked << " elements; worst " << r.worst;
}

// f(tape) builds the computation from the parameters (through tape.param) and returns its output.
// The relative error of element i uses floor = max(1e-3 · max_j |n_j|, 1e-10) so gradients that
// are zero up to rounding do not produce spurious failures.
template <class F>
GradcheckResult gradcheck(F&& f, const std::vector<Parameter<double>*>& params, GradcheckOptions opt = {}) {
  Tensor<double> R;
  auto scalar_of = [&](Tape<double>& tape) {
    Var<double> y = f(tape);
    if (y.value().numel() == 1) return y;
    if (!R.defined()) R = Rng(opt.seed).normal<double>(y.shape());
    return sum(mul(y, tape.constant(R)));
  };
  // Analytic.
  for (Parameter<double>* p : params) p->zero_grad();
  {
    Tape<double> tape;
    Var<double> s = scalar_of(tape);
    tape.backward(s);
  }
  std::vector<Tensor<double>> analytic;
  for (Parameter<double>* p : params) analytic.push_back(p->grad.clone());
  // Numeric.
  std::vector<Tensor<double>> numeric;
  double gmax = 0;
  for (Parameter<double>* p : params) {
    Tensor<double> num = Tensor<double>::zeros(p->shape());
    double* x = p->value.data();
    for (int64_t i = 0; i < p->numel(); ++i) {
      const double x0 = x[i];
      double fp, fm;
      {
        no_grad ng;
        x[i] = x0 + opt.eps;
        Tape<double> t1;
        fp = scalar_of(t1).item();
        x[i] = x0 - opt.eps;
        Tape<double> t2;
        fm = scalar_of(t2).item();
      }
      x[i] = x0;
      num.data()[i] = (fp - fm) / (2 * opt.eps);
      gmax = std::max(gmax, std::abs(num.data()[i]));
    }
    numeric.push_back(num);
  }
  GradcheckResult res;
  const double floor = std::max(1e-3 * gmax, 1e-10);
  for (std::size_t k = 0; k < params.size(); ++k)
    for (int64_t i = 0; i < params[k]->numel(); ++i) {
      const double a = analytic[k].data()[i], n = numeric[k].data()[i];
      double err = std::abs(a - n) / std::max({std::abs(a), std::abs(n), floor});
      if (std::isnan(err)) err = INFINITY;
      ++res.checked;
      if (res.worst.empty() || err > res.max_error) {
        res.max_error = err;
        std::ostringstream os;
        os << "'" << params[k]->name << "'[" << i << "]: analytic " << a << ", numeric " << n;
        res.worst = os.str();
      }
    }
  res.ok = res.max_error <= opt.tolerance;
  return res;
}

// Wraps plain tensors as parameters named input0, input1, ... for gradcheck.
inline std::vector<Parameter<double>> make_inputs(const std::vector<Tensor<double>>& xs) {
  std::vector<Parameter<double>> ps;
  for (std::size_t i = 0; i < xs.size(); ++i) ps.emplace_back("input" + std::to_string(i), xs[i].clone());
  return ps;
}
inline std::vector<Parameter<double>*> pointers(std::vector<Parameter<double>>& ps) {
  std::vector<Parameter<double>*> out;
  for (auto& p : ps) out.push_back(&p);
  return out;
}

}  // namespace sinklab::autodiff
