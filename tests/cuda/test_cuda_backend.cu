// kernels::backend<cuda> (cuda/include/sinklab/cuda/backend.cuh) under the autodiff ops: every op
// of autodiff/ on a Tape<T, cuda> against the same op on a Tape<T, cpu> (backend_cases.hpp) —
// the value and the gradient of every input — and the attention for every score family, the
// gates, V-scale and the in-place path from a projection with RoPE and a sink. In double the
// devices agree to 1e-9 of each tensor's largest element (different summation orders, cuBLAS's
// among them), in float to 2e-4. The emulated tests (tests/test_cuda_*_emulated.cpp) check the
// kernel bodies themselves on the CPU.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_cases.hpp"
#include "sinklab/cuda/backend.cuh"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace backend_cases {  // computed by the host compiler (backend_cases_cpu.cpp)
extern template Results<float> every_op<float, cpu>();
extern template Results<double> every_op<double, cpu>();
extern template Results<float> every_attention<float, cpu>();
extern template Results<double> every_attention<double, cpu>();
extern template std::vector<float> train_block<float, cpu>(int);
extern template std::vector<double> train_block<double, cpu>(int);
}  // namespace backend_cases

namespace {
using backend_cases::Results;

template <class T>
double tolerance() {
  return std::is_same_v<T, double> ? 1e-9 : 2e-4;
}

// Largest |a − b| over the largest |a| (so a tensor of tiny values is held to the same digits).
template <class T>
double rel_to_peak(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double peak = 0, diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    peak = std::max(peak, std::abs(static_cast<double>(a[i])));
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    if (std::isnan(static_cast<double>(a[i])) != std::isnan(static_cast<double>(b[i]))) return INFINITY;
  }
  return peak > 0 ? diff / peak : diff;
}

template <class T>
void check_same(const Results<T>& want, const Results<T>& got) {
  REQUIRE(want.size() == got.size());
  for (std::size_t c = 0; c < want.size(); ++c) {
    const auto& [name, w] = want[c];
    const auto& g = got[c].second;
    REQUIRE(g.size() == w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(name, (i == 0 ? std::string(": value") : ": gradient of input " + std::to_string(i - 1)));
      CHECK(!w[i].empty());
      CHECK(rel_to_peak(w[i], g[i]) <= tolerance<T>());
    }
  }
}

}  // namespace

TEST_CASE("backend<cuda>: every op's value and gradients equal the cpu's (double)") {
  check_same(backend_cases::every_op<double, cpu>(), backend_cases::every_op<double, cuda>());
}
TEST_CASE("backend<cuda>: every op's value and gradients equal the cpu's (float)") {
  check_same(backend_cases::every_op<float, cpu>(), backend_cases::every_op<float, cuda>());
}
TEST_CASE("backend<cuda>: attention for every score family, gates and value transforms (double)") {
  check_same(backend_cases::every_attention<double, cpu>(), backend_cases::every_attention<double, cuda>());
}
TEST_CASE("backend<cuda>: attention for every score family, gates and value transforms (float)") {
  check_same(backend_cases::every_attention<float, cpu>(), backend_cases::every_attention<float, cuda>());
}

TEST_CASE("backend<cuda>: a decoder block trains on the GPU as on the CPU (AdamW, 30 steps)") {
  const std::vector<double> cpu64 = backend_cases::train_block<double, cpu>(30);
  const std::vector<double> gpu64 = backend_cases::train_block<double, cuda>(30);
  const std::vector<float> cpu32 = backend_cases::train_block<float, cpu>(30);
  const std::vector<float> gpu32 = backend_cases::train_block<float, cuda>(30);
  MESSAGE("loss, cpu → gpu (double): ", cpu64.front(), " → ", cpu64.back(), " | ", gpu64.front(), " → ", gpu64.back());
  CHECK(cpu64.back() < 0.1 * cpu64.front());  // it learns (4.2 → 0.0049 on the CPU)
  for (std::size_t i = 0; i < cpu64.size(); ++i) {
    INFO("step ", i);
    CHECK(std::abs(cpu64[i] - gpu64[i]) <= 1e-8 * std::abs(cpu64[i]));
    CHECK(std::abs(cpu32[i] - gpu32[i]) <= 2e-4 * std::abs(cpu32[i]));  // the CPU's float and double runs differ by 2e-5
  }
}

TEST_CASE("backend<cuda>: attention with no query rows or no keys") {
  using K = kernels::backend<cuda>;
  const score::Softmax sm;
  const score::params_t<score::Softmax, float, cuda> none;
  auto zeros = [](std::vector<float> v) {
    for (float x : v)
      if (x != 0.0f) return false;
    return true;
  };
  for (const auto& [tq, s] : {std::pair<int64_t, int64_t>{0, 5}, {4, 0}}) {
    INFO("T = ", tq, ", S = ", s);
    const auto q = Tensor<float, cuda>::full({1, 2, tq, 8}, 0.5f), kv = Tensor<float, cuda>::full({1, 1, s, 8}, 0.5f);
    const auto fwd = K::attention_fused_forward(sm, mask::Bidirectional{}, q, kv, kv, none);
    CHECK(zeros(fwd.out.to_vector()));  // a row that sees no key is zero
    const auto g = K::attention_fused_backward(sm, mask::Bidirectional{}, q, kv, kv, none, fwd, q);
    CHECK(zeros(g.dq.to_vector()));
    CHECK(zeros(g.dk.to_vector()));
    CHECK(zeros(g.dv.to_vector()));
  }
}

// The clipping's norm over a list in one call: each buffer's block partials side by side, empty
// buffers among them, against the CPU's list sum (its order differs: to rounding).
TEST_CASE("backend<cuda>: sum_of_squares_over a list of buffers equals the cpu's") {
  Rng rng(3);
  std::vector<Tensor<float>> host;
  for (int64_t n : {0, 1, 255, 256, 257, 70000, 0, 3, 600000}) host.push_back(rng.normal<float>({n}, 0.1f, 2.0f));
  std::vector<Tensor<float, cuda>> dev;
  std::vector<const float*> hp, dp;
  std::vector<int64_t> ns;
  for (const auto& h : host) {
    dev.push_back(h.to_device<cuda>());
    hp.push_back(h.data()), dp.push_back(dev.back().data()), ns.push_back(h.numel());
  }
  const auto count = static_cast<int64_t>(ns.size());
  const double want = kernels::backend<cpu>::sum_of_squares_over(count, hp.data(), ns.data());
  const double got = kernels::backend<cuda>::sum_of_squares_over(count, dp.data(), ns.data());
  CHECK(want > 0);
  CHECK(std::abs(got - want) <= 1e-12 * want);
  CHECK(kernels::backend<cuda>::sum_of_squares_over(int64_t{0}, dp.data(), ns.data()) == 0.0);
  CHECK(std::abs(kernels::backend<cuda>::sum_of_squares(dp[5], ns[5]) -
                 kernels::backend<cpu>::sum_of_squares(hp[5], ns[5])) <= 1e-12 * want);
}

TEST_CASE("backend<cuda>: bad input fails as on the cpu; probes are refused with a message") {
  Tape<float, cuda> tape;
  const auto table = tape.leaf(Tensor<float, cuda>::zeros({5, 4}));
  const auto ids = Tensor<int32_t, cuda>::from({3}, {0, 7, 1});
  CHECK_THROWS_WITH_AS(embedding(table, ids), doctest::Contains("id 7 at position 1 is outside [0, 5)"),
                       std::exception);
  const auto a = tape.leaf(Tensor<float, cuda>::zeros({2, 3})), b = tape.leaf(Tensor<float, cuda>::zeros({4}));
  CHECK_THROWS_WITH_AS(a + b, doctest::Contains("cannot be broadcast"), std::exception);

  const auto q = tape.leaf(Tensor<float, cuda>::zeros({1, 2, 4, 8}));
  AttentionCall<score::Softmax, gate::None, value::Identity, mask::Causal, float, cuda> c;
  AttentionRecorder<float, cuda> rec;
  c.recorder = &rec;
  CHECK_THROWS_WITH_AS(attention(c, q, q, q, Var<float, cuda>{}), doctest::Contains("runs on the cpu device"),
                       std::exception);
}
