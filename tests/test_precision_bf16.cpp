// Training at bf16 precision (autocast semantics): a tape's float matrix products take bf16
// operands with fp32 accumulation, forward and backward; PrecisionScope keeps one in fp32; a
// double tape ignores it; and a small model trained 200 steps in bf16 ends near fp32's loss.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/optim/adamw.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;
using kernels::Precision;
using kernels::Trans;

namespace {

std::vector<float> product_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                                const float* B, int64_t ldb) {
  std::vector<float> C(static_cast<std::size_t>(M * N));
  kernels::cpu::gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C.data(), N);
  return C;
}

}  // namespace

TEST_CASE("matmul on a bf16 tape: bf16 products forward and backward; PrecisionScope and double tapes") {
  const int64_t M = 9, K = 70, N = 33;
  Rng rng(5);
  const Tensor<float> a = rng.normal<float>({3, 3, K}), b = rng.normal<float>({K, N}), g = rng.normal<float>({3, 3, N});
  Tape<float> tape;
  CHECK(tape.precision() == Precision::fp32);
  tape.set_precision(Precision::bf16);
  auto x = tape.leaf(a.clone()), w = tape.leaf(b.clone());
  auto y = matmul(x, w);
  CHECK(y.value().to_vector() == product_bf16(Trans::N, Trans::N, M, N, K, a.data(), K, b.data(), N));
  auto loss = sum(mul(y, tape.constant(g.clone())));
  tape.backward(loss);
  CHECK(x.grad().to_vector() == product_bf16(Trans::N, Trans::T, M, K, N, g.data(), N, b.data(), N));
  CHECK(w.grad().to_vector() == product_bf16(Trans::T, Trans::N, K, N, M, a.data(), K, g.data(), N));

  // The same product in fp32 differs (by bf16's rounding), so the checks above can fail.
  Tape<float> fp32;
  auto y32 = matmul(fp32.leaf(a.clone()), fp32.leaf(b.clone()));
  CHECK(y32.value().to_vector() != y.value().to_vector());
  {
    PrecisionScope keep(tape, Precision::fp32);
    CHECK(tape.precision() == Precision::fp32);
    auto z = matmul(tape.leaf(a.clone()), tape.leaf(b.clone()));
    CHECK(z.value().to_vector() == y32.value().to_vector());
  }
  CHECK(tape.precision() == Precision::bf16);

  // Doubles always multiply in double.
  Tape<double> td;
  td.set_precision(Precision::bf16);
  const Tensor<double> ad = a.to<double>(), bd = b.to<double>();
  auto yd = matmul(td.leaf(ad.clone()), td.leaf(bd.clone()));
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += ad.data()[i * K + k] * bd.data()[k * N + j];
      worst = std::max(worst, std::abs(s - yd.value().data()[i * N + j]));
    }
  CHECK(worst < 1e-12);
}

TEST_CASE("a 2-layer decoder trained 200 steps in bf16 ends within 2% of fp32's loss") {
  using M = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU>;  // SwiGLU: the fused GLU path
  nn::ModelConfig cfg;
  cfg.vocab = 16;
  cfg.d_model = 32;
  cfg.layers = 2;
  cfg.heads = 2;
  // A fixed random Markov chain: the loss settles at its entropy (well above 0, so a relative
  // comparison means something).
  Rng chain_rng(11);
  const Tensor<float> logits = chain_rng.normal<float>({16, 16}, 0.0f, 2.0f);
  auto run = [&](Precision p) {
    Rng rng(3);
    M::Module<float> model("", cfg, rng);
    optim::AdamW<float> opt(nn::parameter_list<float>(model), {.lr = 3e-3, .weight_decay = 0.0});
    Rng data(17);
    Tape<float> tape;
    tape.set_precision(p);
    const int64_t B = 8, T = 24;
    double tail = 0, first = 0;
    for (int step = 0; step < 200; ++step) {
      auto ids = Tensor<int32_t>::empty({B, T + 1});
      for (int64_t b = 0; b < B; ++b) {
        int32_t s = static_cast<int32_t>(data.uniform<float>({1}, 0.0f, 16.0f).data()[0]) % 16;
        for (int64_t i = 0; i <= T; ++i) {
          ids(b, i) = s;
          const Tensor<float> u = data.uniform<float>({1}, 0.0f, 1.0f);
          double z = 0, c = 0;
          for (int j = 0; j < 16; ++j) z += std::exp(logits(s, j));
          int next = 15;
          for (int j = 0; j < 16; ++j) {
            c += std::exp(logits(s, j)) / z;
            if (u.data()[0] < c) {
              next = j;
              break;
            }
          }
          s = next;
        }
      }
      auto x = Tensor<int32_t>::empty({B, T}), y = Tensor<int32_t>::empty({B, T});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < T; ++i) x(b, i) = ids(b, i), y(b, i) = ids(b, i + 1);
      tape.clear();
      opt.zero_grad();
      auto loss = model.loss(tape, x, y);
      tape.backward(loss);
      opt.step();
      if (step == 0) first = loss.item();
      if (step >= 180) tail += loss.item() / 20.0;
    }
    return std::pair{first, tail};
  };
  const auto [f32_first, f32] = run(Precision::fp32);
  const auto [b16_first, b16] = run(Precision::bf16);
  MESSAGE("loss over the last 20 steps: fp32 " << f32 << " (from " << f32_first << "), bf16 " << b16 << " (from "
                                               << b16_first << ")");
  CHECK(f32 < 0.8 * f32_first);  // it learned something
  CHECK(std::abs(b16 - f32) <= 0.02 * f32);
  CHECK(b16 != f32);  // and the bf16 run really ran in bf16
}
