// optim::Muon and MuonAdamW: Newton–Schulz spectra, the update rule step by step, routing,
// and a matrix regression that Muon solves.
#include <doctest/doctest.h>

#include <Eigen/SVD>
#include <cmath>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/optim/muon.hpp"

using namespace sinklab;
using namespace sinklab::autodiff;

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
Mat<T> to_eigen(const Tensor<T>& t) {
  const Tensor<T> c = t.contiguous();
  return Eigen::Map<const Mat<T>>(c.data(), c.shape()[0], c.shape()[1]);
}

template <class T>
void check_newton_schulz(int64_t rows, int64_t cols, uint64_t seed) {
  INFO("shape [" << rows << ", " << cols << "], " << (sizeof(T) == 4 ? "float" : "double"));
  const Tensor<T> G = Rng(seed).normal<T>({rows, cols}, T(0), T(3));
  const Tensor<T> O = optim::newton_schulz5(G);
  REQUIRE(O.shape() == G.shape());
  Eigen::JacobiSVD<Mat<double>> svd_o(to_eigen(O).template cast<double>());
  const auto s = svd_o.singularValues();
  CHECK(s.size() == std::min(rows, cols));
  for (int i = 0; i < s.size(); ++i) {
    CHECK(s(i) > 0.65);  // the quintic oscillates in about [0.68, 1.14] once converged
    CHECK(s(i) < 1.2);
  }
  // Same singular vectors as G: close to G's polar factor U·Vᵀ.
  Eigen::JacobiSVD<Mat<double>> svd_g(to_eigen(G).template cast<double>(), Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Mat<double> polar = svd_g.matrixU() * svd_g.matrixV().transpose();
  const Mat<double> od = to_eigen(O).template cast<double>();
  const double cosine = (od.array() * polar.array()).sum() / (od.norm() * polar.norm());
  CHECK(cosine > 0.97);
  // Tall and wide inputs are handled as transposes of each other.
  const Tensor<T> Ot = optim::newton_schulz5(G.transpose(0, 1).contiguous());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) CHECK(Ot(j, i) == doctest::Approx(O(i, j)).epsilon(1e-4).scale(1e-3));
}

// mean((X·W − Y)²)
template <class T>
Var<T> regression_loss(Tape<T>& t, Parameter<T>& W, const Tensor<T>& X, const Tensor<T>& Y) {
  return mean(square(matmul(t.constant(X), t.param(W)) - t.constant(Y)));
}

}  // namespace

TEST_CASE("newton_schulz5: singular values in the quintic's band, same singular vectors as the input") {
  check_newton_schulz<double>(16, 40, 1);
  check_newton_schulz<double>(48, 12, 2);
  check_newton_schulz<float>(32, 96, 3);
  check_newton_schulz<float>(128, 344, 4);
  CHECK_THROWS_WITH_AS(optim::newton_schulz5(Tensor<float>::zeros({3})),
                       doctest::Contains("newton_schulz5: expected a matrix, got shape [3]"), Error);
}

TEST_CASE("Muon: one step equals p − lr·√max(1, out/in)·NS5(nesterov momentum), with decoupled decay") {
  Parameter<double> w("blocks.0.mlp.fc1.weight", Rng(1).normal<double>({6, 15}));
  const Tensor<double> w0 = w.value.clone();
  optim::MuonOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.1;
  optim::Muon<double> opt({&w}, o);
  const Tensor<double> g1 = Rng(2).normal<double>({6, 15}), g2 = Rng(3).normal<double>({6, 15});
  w.grad.copy_from(g1);
  opt.step();
  // buf = (1−β)·g1, u = (1−β)·g1 + β·buf (NS5 is scale-invariant only up to its 1e-7 guard, so
  // the expected value is built from the same u).
  const double beta = 0.95, omb = 1.0 - beta;
  Tensor<double> u = Tensor<double>::empty({6, 15});
  for (int64_t i = 0; i < u.numel(); ++i) u.data()[i] = omb * g1.data()[i] + beta * (omb * g1.data()[i]);
  Tensor<double> O = optim::newton_schulz5(u);
  const double scale = std::sqrt(15.0 / 6.0);
  for (int64_t i = 0; i < w.numel(); ++i)
    CHECK(w.value.data()[i] ==
          doctest::Approx(w0.data()[i] * (1 - 0.05 * 0.1) - 0.05 * scale * O.data()[i]).epsilon(1e-10));
  const Tensor<double> w1 = w.value.clone();
  w.grad.copy_from(g2);
  opt.step();
  for (int64_t i = 0; i < u.numel(); ++i) {
    const double buf = beta * (omb * g1.data()[i]) + omb * g2.data()[i];
    CHECK(opt.state("blocks.0.mlp.fc1.weight").momentum.data()[i] == doctest::Approx(buf).epsilon(1e-12));
    u.data()[i] = omb * g2.data()[i] + beta * buf;
  }
  O = optim::newton_schulz5(u);
  for (int64_t i = 0; i < w.numel(); ++i)
    CHECK(w.value.data()[i] ==
          doctest::Approx(w1.data()[i] * (1 - 0.05 * 0.1) - 0.05 * scale * O.data()[i]).epsilon(1e-10));
  CHECK(opt.state("blocks.0.mlp.fc1.weight").step == 2);
  CHECK(opt.step_count() == 2);

  // Tall weights ([in, out] with out < in) are not scaled.
  Parameter<double> tall("down.weight", Tensor<double>::zeros({15, 6}));
  optim::Muon<double> opt2({&tall}, o);
  tall.grad.copy_from(g1.transpose(0, 1).contiguous());
  opt2.step();
  Tensor<double> ut = tall.grad.clone();
  for (int64_t i = 0; i < ut.numel(); ++i) ut.data()[i] = omb * ut.data()[i] + beta * (omb * ut.data()[i]);
  const Tensor<double> Ot = optim::newton_schulz5(ut);
  for (int64_t i = 0; i < tall.numel(); ++i) CHECK(tall.value.data()[i] == doctest::Approx(-0.05 * Ot.data()[i]));

  Parameter<double> v("norm.weight", Tensor<double>::ones({6}));
  CHECK_THROWS_WITH_AS(optim::Muon<double>({&v}),
                       doctest::Contains("Muon: parameter 'norm.weight' has shape [6]; Muon updates 2-D weight"),
                       Error);
}

TEST_CASE("Muon: reduces a matrix regression loss") {
  for (int precision = 0; precision < 2; ++precision) {
    auto run = [&]<class T>(T) {
      const Tensor<T> X = Rng(10).normal<T>({96, 12});
      const Tensor<T> Wstar = Rng(11).normal<T>({12, 20}, T(0), T(0.5));
      Tensor<T> Y = Tensor<T>::empty({96, 20});
      kernels::cpu::gemm(kernels::cpu::Trans::N, kernels::cpu::Trans::N, 96, 20, 12, T(1), X.data(), 12, Wstar.data(),
                         20, T(0), Y.data(), 20);
      Parameter<T> W("proj.weight", Tensor<T>::zeros({12, 20}));
      optim::MuonOptions o;
      o.lr = 0.02;
      optim::Muon<T> opt({&W}, o);
      double first = 0, last = 0;
      for (int step = 0; step < 300; ++step) {
        opt.zero_grad();
        Tape<T> t;
        Var<T> loss = regression_loss(t, W, X, Y);
        t.backward(loss);
        if (step == 0) first = loss.item();
        last = loss.item();
        opt.set_lr_scale(step < 200 ? 1.0 : (300.0 - step) / 100.0);  // linear decay to 0 at the end
        opt.step();
      }
      INFO("loss " << first << " -> " << last);
      CHECK(last < 0.01 * first);
    };
    if (precision == 0) run(double{});
    else run(float{});
  }
}

TEST_CASE("MuonAdamW: routes matrices to Muon and the rest to AdamW; one step moves all of them") {
  const int64_t d = 8, V = 11;
  std::vector<Parameter<float>> ps;
  ps.emplace_back("tok_embed.weight", Rng(1).normal<float>({V, d}));
  ps.emplace_back("blocks.0.attn.q_proj.weight", Rng(2).normal<float>({d, d}));
  ps.emplace_back("blocks.0.ffn.gate_up.weight", Rng(3).normal<float>({d, 2 * d}));
  ps.emplace_back("blocks.0.norm1.gate.down.weight", Rng(4).normal<float>({d, 4}));
  ps.emplace_back("blocks.0.norm1.weight", Tensor<float>::ones({d}));
  ps.emplace_back("blocks.0.norm1.alpha", Tensor<float>::ones({1}));
  ps.emplace_back("lm_head.weight", Rng(5).normal<float>({d, V}));
  ps.emplace_back("vit.registers.registers", Rng(6).normal<float>({4, d}));
  ps.emplace_back("pos.weight", Rng(7).normal<float>({32, d}));
  ps.emplace_back("vit.patch_embed.weight", Rng(8).normal<float>({16, d}));
  ps.emplace_back("blocks.0.attn.score.sink_logit", Rng(9).normal<float>({1, 4}));
  std::vector<Parameter<float>*> ptrs;
  for (auto& p : ps) ptrs.push_back(&p);
  optim::MuonAdamW<float> opt(ptrs);
  std::vector<std::string> muon_names, adamw_names;
  for (auto* p : opt.muon_params()) muon_names.push_back(p->name);
  for (auto* p : opt.adamw_params()) adamw_names.push_back(p->name);
  CHECK(muon_names == std::vector<std::string>{"blocks.0.attn.q_proj.weight", "blocks.0.ffn.gate_up.weight",
                                               "blocks.0.norm1.gate.down.weight"});
  CHECK(adamw_names.size() == 8);
  CHECK(opt.adamw().has_state("lm_head.weight"));
  CHECK(opt.muon().has_state("blocks.0.attn.q_proj.weight"));

  std::vector<Tensor<float>> before;
  for (auto& p : ps) {
    before.push_back(p.value.clone());
    p.grad = Rng(20).normal<float>(p.shape());
  }
  opt.set_lr_scale(0.5);
  opt.step();
  for (std::size_t k = 0; k < ps.size(); ++k) {
    INFO(ps[k].name);
    double change = 0;
    for (int64_t i = 0; i < ps[k].numel(); ++i) change += std::abs(ps[k].value.data()[i] - before[k].data()[i]);
    CHECK(change > 0);
  }
  opt.zero_grad();
  for (auto& p : ps)
    for (float g : p.grad.to_vector()) CHECK(g == 0.0f);

  // A custom route that sends a vector to Muon is refused with the parameter's name.
  CHECK_THROWS_WITH_AS(optim::MuonAdamW<float>(ptrs, {}, {}, [](const Parameter<float>&) { return true; }),
                       doctest::Contains("MuonAdamW: the route sent 'blocks.0.norm1.weight' of shape [8] to Muon"),
                       Error);
}
