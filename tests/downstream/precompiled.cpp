// Downstream program linked with sinklab::precompiled (the add_subdirectory build): float ops
// come from the precompiled instantiations (declared extern in the headers) and must link and
// compute the same values as written out here. Exits non-zero on any mismatch.
#include <cmath>
#include <cstdio>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/norm.hpp"

#ifndef SINKLAB_PRECOMPILED
#error "downstream_precompiled must be built with sinklab::precompiled (it defines SINKLAB_PRECOMPILED)"
#endif

int main() {
  using namespace sinklab;
  autodiff::Tape<float> tape;
  auto x = tape.leaf(Tensor<float>::from({2, 2}, {3.f, 4.f, 1.f, -1.f}));
  auto g = tape.leaf(Tensor<float>::from({2}, {1.f, 2.f}));
  auto y = autodiff::rms_norm(x, g, 0.0);  // rows / rms: [3, 4]/√12.5, [1, −1]/1, times the gain
  auto loss = autodiff::sum(y);
  tape.backward(loss);
  const float want = 3.f / std::sqrt(12.5f) + 8.f / std::sqrt(12.5f) + 1.f - 2.f;
  if (std::abs(loss.value().item() - want) > 1e-5f) {
    std::printf("downstream_precompiled: rms_norm sum %g, expected %g\n", loss.value().item(), want);
    return 1;
  }
  // d(sum y)/dgain = Σ_rows x̂ = [3/√12.5 + 1, 4/√12.5 − 1].
  const float g0 = 3.f / std::sqrt(12.5f) + 1.f, g1 = 4.f / std::sqrt(12.5f) - 1.f;
  if (std::abs(g.grad().data()[0] - g0) > 1e-5f || std::abs(g.grad().data()[1] - g1) > 1e-5f) {
    std::printf("downstream_precompiled: gain gradient [%g, %g], expected [%g, %g]\n", g.grad().data()[0],
                g.grad().data()[1], g0, g1);
    return 1;
  }
  std::printf("sinklab downstream precompiled OK\n");
  return 0;
}
