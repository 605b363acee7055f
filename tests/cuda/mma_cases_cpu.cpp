// The emulator's results of mma_cases.hpp, built by the host compiler for test_cuda_mma (nvcc
// builds leave the emulator out).
#include "../mma_cases.hpp"

namespace mma_cases {
template std::vector<uint32_t> emulated_ldmatrix<1, false>(bool);
template std::vector<uint32_t> emulated_ldmatrix<2, false>(bool);
template std::vector<uint32_t> emulated_ldmatrix<4, false>(bool);
template std::vector<uint32_t> emulated_ldmatrix<1, true>(bool);
template std::vector<uint32_t> emulated_ldmatrix<2, true>(bool);
template std::vector<uint32_t> emulated_ldmatrix<4, true>(bool);
template std::vector<float> emulated_mma<simt::Bf16>(const Operands&, Form);
template std::vector<float> emulated_mma<simt::F16>(const Operands&, Form);
}  // namespace mma_cases
