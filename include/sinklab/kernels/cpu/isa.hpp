// Which instructions the CPU kernels run in this program: the xsimd kernels (attention, row-wise
// and element-wise loops) at the width this translation unit was compiled for; the fp32, bf16 and
// int8 GEMMs at the best path the CPU offers, chosen at run time (their micro-kernels carry
// function-level target attributes, so a program built with the compiler's defaults still has
// them; the fp32 GEMM keeps its compiled xsimd tile when that is as wide). A program prints it to know what it measured; tests/downstream checks
// that a default-flags build dispatches as this says.
#pragma once
#include <string>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "sinklab/kernels/cpu/gemm_packed.hpp"
#include "sinklab/kernels/cpu/gemm_s8.hpp"

namespace sinklab::kernels::cpu {

struct KernelIsa {
  std::string vector;     // xsimd kernels: compiled_isa()
  std::string fp32_gemm;  // the packed GEMM's tile: gemm_tile()
  std::string bf16_gemm;  // gemm_bf16 with Bf16Path::Auto (AMX only once its self-check passed)
  std::string int8_gemm;  // gemm_u8s8 with S8Path::Auto

  std::string summary() const {
    return "attention and row-wise kernels: " + vector + " (compile time); fp32 GEMM: " + fp32_gemm + "; bf16 GEMM: " +
           bf16_gemm + ", int8 GEMM: " + int8_gemm + " (run time)";
  }
};

inline KernelIsa kernel_isa() {
  KernelIsa k;
  k.vector = compiled_isa();
  const GemmTile t = gemm_tile();
  k.fp32_gemm = t == GemmTile::Compiled ? std::string(compiled_isa()) + " (compile time)" : gemm_tile_name(t);
  k.bf16_gemm = bf16_amx_available() ? "amx-bf16" : bf16_native_available() ? "avx512-bf16" : "emulated on fp32";
  k.int8_gemm = s8_amx_available()    ? "amx-int8"
                : s8_vnni_available() ? "avx512-vnni"
                : s8_avx2_available() ? "avx2"
                                      : "scalar";
  return k;
}

}  // namespace sinklab::kernels::cpu
