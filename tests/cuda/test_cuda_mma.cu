// The warp matrix instructions of kernels/simt_mma.hpp on a GPU through simt::Cuda, running the
// kernel bodies of mma_cases.hpp that test_simt_mma runs on the emulator: ldmatrix's registers
// equal the emulator's and the PTX ISA's table bit for bit, mma.m16n8k16 gives A·B + C within
// the tensor cores' fp32 summation, cp.async copies and zero-fills, and cvt.rn.{bf16x2,f16x2}
// rounds as the host's pack2. This is what lets a tensor-core kernel tested on the emulator
// stand for the device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "../mma_cases.hpp"
#include "sinklab/cuda/device.cuh"

using namespace sinklab;
using namespace mma_cases;

namespace mma_cases {  // the emulator's results, computed by the host compiler (mma_cases_cpu.cpp)
template <int N, bool Trans>
std::vector<uint32_t> emulated_ldmatrix(bool misaligned_ignored);
template <class E>
std::vector<float> emulated_mma(const Operands& o, Form form);
}  // namespace mma_cases

namespace {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) { kernels::cuda::host::check(cudaMalloc(&p_, n * sizeof(T)), "cudaMalloc"); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    kernels::cuda::host::check(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return p_; }
  // After the kernels before it: a launch or kernel error fails here, with the runtime's reason.
  std::vector<T> to_host() const {
    kernels::cuda::host::check(cudaGetLastError(), "kernel launch");
    kernels::cuda::host::check(cudaDeviceSynchronize(), "kernel");
    std::vector<T> host(n_);
    kernels::cuda::host::check(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

template <int N, bool Trans>
__global__ void ldmatrix_kernel(uint32_t* out) {
  simt::Cuda ctx;
  ldmatrix_case<N, Trans>(ctx, out, false);
}
template <class E>
__global__ void mma_fragments_kernel(const uint32_t* a, const uint32_t* b, float* acc) {
  simt::Cuda ctx;
  mma_fragments_case<E>(ctx, a, b, acc);
}
template <class E, bool BTrans>
__global__ void mma_ldmatrix_kernel(const uint16_t* a, const uint16_t* b, float* acc) {
  simt::Cuda ctx;
  mma_ldmatrix_case<E, BTrans>(ctx, a, b, acc);
}
__global__ void cp_async_kernel(const Chunk* global, uint32_t* out) {
  simt::Cuda ctx;
  cp_async_case(ctx, global, out);
}
template <class E>
__global__ void pack2_kernel(const float* x, uint32_t* out, int64_t n) {
  simt::Cuda ctx;
  pack2_case<E>(ctx, x, out, n);
}

template <int N, bool Trans>
void check_ldmatrix() {
  CAPTURE(N);
  CAPTURE(Trans);
  DeviceBuffer<uint32_t> out(32 * N);
  ldmatrix_kernel<N, Trans><<<1, 32, kLdmatrixShared>>>(out.get());
  const std::vector<uint32_t> device = out.to_host();
  const int64_t vs_emulator = first_difference(device, emulated_ldmatrix<N, Trans>(false)),
                vs_table = first_difference(device, ldmatrix_expected(N, Trans));
  INFO("the first register unlike the emulator's: lane ", vs_emulator / N, ", r[", vs_emulator % N, "]");
  CHECK(vs_emulator == -1);
  INFO("the first register unlike the PTX ISA's: lane ", vs_table / N, ", r[", vs_table % N, "]");
  CHECK(vs_table == -1);
}

template <class E>
std::vector<float> device_mma(const Operands& o, Form form) {
  DeviceBuffer<float> acc(c_fragments(o.c));
  if (form == Form::Fragments) {
    const DeviceBuffer<uint32_t> a(a_fragments(o.a)), b(b_fragments(o.b));
    mma_fragments_kernel<E><<<1, 32>>>(a.get(), b.get(), acc.get());
    return acc.to_host();
  }
  const DeviceBuffer<uint16_t> a(o.a), b(b_tile(o, form));
  if (form == Form::LdmatrixTrans)
    mma_ldmatrix_kernel<E, true><<<1, 32, kMmaShared>>>(a.get(), b.get(), acc.get());
  else
    mma_ldmatrix_kernel<E, false><<<1, 32, kMmaShared>>>(a.get(), b.get(), acc.get());
  return acc.to_host();
}

// A half of a packed register and the float it came from: the same bits, or any NaN for a NaN
// (cvt gives the canonical NaN, the host keeps the payload).
template <class E>
bool same_half(uint16_t device, uint16_t host, float input) {
  return std::isnan(input) ? std::isnan(E::to_float(device)) : device == host;
}

}  // namespace

TEST_CASE("cuda: ldmatrix x1, x2, x4, plain and .trans: the registers equal the emulator's and the PTX ISA's") {
  check_ldmatrix<1, false>();
  check_ldmatrix<2, false>();
  check_ldmatrix<4, false>();
  check_ldmatrix<1, true>();
  check_ldmatrix<2, true>();
  check_ldmatrix<4, true>();
}

TEST_CASE_TEMPLATE("cuda: mma.m16n8k16 gives A·B + C, from hand-built fragments and through ldmatrix", E, simt::Bf16,
                   simt::F16) {
  const Operands o = random_operands<E>(4);
  const std::vector<double> ref = reference<E>(o);
  const std::vector<float> by_hand = device_mma<E>(o, Form::Fragments);
  for (Form form : {Form::Fragments, Form::Ldmatrix, Form::LdmatrixTrans}) {
    CAPTURE(static_cast<int>(form));
    const std::vector<float> acc = device_mma<E>(o, form);
    const double vs_reference = max_rel(gather_d(acc), ref);
    const std::vector<float> emulated = gather_d(emulated_mma<E>(o, form));
    const std::vector<double> emulated_d(emulated.begin(), emulated.end());
    MESSAGE(E::name, " form ", static_cast<int>(form), ": max |device − (A·B + C)| / max |A·B + C| = ", vs_reference,
            ", against the emulator ", max_rel(gather_d(acc), emulated_d));
    CHECK(vs_reference <= 1e-5);
    CHECK(acc == by_hand);  // the same registers into the same instruction
  }
}

TEST_CASE("cuda: cp.async copies 16 bytes, or zeros with src null, complete once wait_group says so") {
  const std::vector<Chunk> sources = cp_async_sources();
  const DeviceBuffer<Chunk> global(sources);
  DeviceBuffer<uint32_t> out(kStates * kChunks * 32 * 4);
  cp_async_kernel<<<1, 32, kCpAsyncShared>>>(global.get(), out.get());
  const std::vector<uint32_t> device = out.to_host();
  int wrong = 0, checked = 0;
  for (int state = 0; state < kStates; ++state)
    for (int c = 0; c < kChunks; ++c) {
      if (!cp_async_complete(state, c)) continue;  // the device may have finished early
      for (int l = 0; l < 32; ++l)
        for (int w = 0; w < 4; ++w, ++checked)
          wrong += device[((state * kChunks + c) * 32 + l) * 4 + w] != cp_async_expected(sources, c, l, w);
    }
  CHECK(checked == 6 * 32 * 4);
  CHECK(wrong == 0);
}

TEST_CASE_TEMPLATE("cuda: pack2 on the device (cvt.rn) rounds as the host's pack2, bit for bit", E, simt::Bf16, simt::F16) {
  const std::vector<float> x = rounding_probes();
  const auto n = static_cast<int64_t>(x.size() / 2);
  const DeviceBuffer<float> dx(x);
  DeviceBuffer<uint32_t> out(static_cast<std::size_t>(n));
  pack2_kernel<E><<<256, 256>>>(dx.get(), out.get(), n);
  const std::vector<uint32_t> device = out.to_host();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t host = simt::pack2<E>(x[2 * i], x[2 * i + 1]);
    const bool ok = same_half<E>(device[i] & 0xffffu, host & 0xffffu, x[2 * i]) &&
                    same_half<E>(device[i] >> 16, host >> 16, x[2 * i + 1]);
    if (!ok && wrong++ == 0) {
      INFO("pack2(", x[2 * i], ", ", x[2 * i + 1], "): device ", device[i], ", host ", host);
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
}
