// Counter-based RNG (Philox-4x32-10, Salmon et al. 2011). Element i of a fill is a pure
// function of (seed, stream, counter + i), so results do not depend on the number of
// threads, and the same function runs in CUDA kernels (SINKLAB_HD).
#pragma once
#include <cmath>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab {

struct Philox4x32 {
  struct Block {
    uint32_t v[4];
  };
  SINKLAB_HD static Block generate(uint64_t key, uint64_t counter_lo, uint64_t counter_hi) {
    uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
    uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
      const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const uint32_t n1 = static_cast<uint32_t>(p1);
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      const uint32_t n3 = static_cast<uint32_t>(p0);
      c0 = n0, c1 = n1, c2 = n2, c3 = n3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return Block{{c0, c1, c2, c3}};
  }
  // Uniform in (0, 1], never 0 so that log() is safe.
  SINKLAB_HD static double to_unit(uint32_t x) { return (static_cast<double>(x) + 1.0) * (1.0 / 4294967296.0); }
  // Two independent standard normals from one block (Box-Muller).
  SINKLAB_HD static void normal2(const Block& b, double& z0, double& z1) {
    const double u1 = to_unit(b.v[0]), u2 = to_unit(b.v[1]);
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double th = 6.283185307179586 * u2;
    z0 = r * std::cos(th);
    z1 = r * std::sin(th);
  }
};

class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }

  // An independent generator for a named purpose (data, init, dropout...).
  Rng fork(uint64_t stream) const { return Rng(seed_, stream_ * 0x9E3779B97F4A7C15ull + stream + 1); }

  uint32_t next_u32() { return Philox4x32::generate(seed_, counter_++, stream_).v[0]; }
  uint64_t next_u64() {
    auto b = Philox4x32::generate(seed_, counter_++, stream_);
    return (uint64_t{b.v[0]} << 32) | b.v[1];
  }
  double uniform() { return Philox4x32::to_unit(next_u32()) - 0x1p-32; }  // [0, 1)
  // Uniform integer in [lo, hi).
  int64_t randint(int64_t lo, int64_t hi) {
    SINKLAB_CHECK(hi > lo, "Rng::randint: empty range [", lo, ", ", hi, ")");
    return lo + static_cast<int64_t>(next_u64() % static_cast<uint64_t>(hi - lo));
  }
  double normal() {
    double z0, z1;
    Philox4x32::normal2(Philox4x32::generate(seed_, counter_++, stream_), z0, z1);
    return z0;
  }

  template <class T>
  void fill_uniform(Tensor<T>& t, T lo, T hi) {
    fill(t, [=](const Philox4x32::Block& b) {
      return static_cast<T>(lo + (hi - lo) * (Philox4x32::to_unit(b.v[0]) - 0x1p-32));
    });
  }
  template <class T>
  void fill_normal(Tensor<T>& t, T mean, T std) {
    fill(t, [=](const Philox4x32::Block& b) {
      double z0, z1;
      Philox4x32::normal2(b, z0, z1);
      return static_cast<T>(mean + std * z0);
    });
  }
  // Normal restricted to [mean - k·std, mean + k·std] by redrawing (k = 2 as in timm's trunc_normal_).
  template <class T>
  void fill_truncated_normal(Tensor<T>& t, T mean, T std, double k = 2.0) {
    const uint64_t key = seed_, stream = stream_;
    fill(t, [=](const Philox4x32::Block& b) {
      double z0, z1;
      Philox4x32::normal2(b, z0, z1);
      if (std::abs(z0) <= k) return static_cast<T>(mean + std * z0);
      if (std::abs(z1) <= k) return static_cast<T>(mean + std * z1);
      // Rare: redraw from a derived counter in the high half of the stream space.
      uint64_t c = (uint64_t{b.v[2]} << 32) | b.v[3];
      for (;;) {
        Philox4x32::normal2(Philox4x32::generate(key, c++, ~stream), z0, z1);
        if (std::abs(z0) <= k) return static_cast<T>(mean + std * z0);
      }
    });
  }
  template <class T>
  Tensor<T> normal(const Shape& s, T mean = T(0), T std = T(1)) {
    Tensor<T> t = Tensor<T>::empty(s);
    fill_normal(t, mean, std);
    return t;
  }
  template <class T>
  Tensor<T> uniform(const Shape& s, T lo = T(0), T hi = T(1)) {
    Tensor<T> t = Tensor<T>::empty(s);
    fill_uniform(t, lo, hi);
    return t;
  }

 private:
  template <class T, class F>
  void fill(Tensor<T>& t, F gen) {
    SINKLAB_CHECK(t.is_contiguous(), "Rng: fill needs a contiguous tensor, got shape ", t.shape());
    T* p = t.data();
    const uint64_t base = counter_, key = seed_, stream = stream_;
    parallel_for(0, t.numel(), 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = gen(Philox4x32::generate(key, base + static_cast<uint64_t>(i), stream));
    });
    counter_ += static_cast<uint64_t>(t.numel());
  }

  uint64_t seed_, stream_, counter_ = 0;
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(void Rng::fill_uniform<float>(Tensor<float>&, float, float))
SINKLAB_EXTERN_TEMPLATE(void Rng::fill_normal<float>(Tensor<float>&, float, float))
SINKLAB_EXTERN_TEMPLATE(void Rng::fill_truncated_normal<float>(Tensor<float>&, float, float, double))
SINKLAB_EXTERN_TEMPLATE(Tensor<float> Rng::normal<float>(const Shape&, float, float))
SINKLAB_EXTERN_TEMPLATE(Tensor<float> Rng::uniform<float>(const Shape&, float, float))

}  // namespace sinklab
