// What this CPU and OS let a process run, read once per process from CPUID and XCR0, for kernels
// that choose an instruction set at run time (a bf16 GEMM on AVX512-BF16, say) and for the
// warning a program built without -march=native gets on a CPU that could do much better.
//
//   const CpuFeatures& f = cpu_features();
//   if (f.avx512_bf16) ...           // the instructions exist and the OS saves their registers
//   f.summary()                       // "avx2 fma avx512f ... amx-tile amx-bf16 (amx permitted)"
//
// AMX tiles also need the kernel's permission per process (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA)); `amx_permitted` is whether that request succeeded. Hand-written because
// no library on this platform's list reads these bits (xsimd's detection stops at AVX-512 and
// does not ask for AMX).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define SINKLAB_CPUID 1
#endif

namespace sinklab {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool amx_permitted = false;

  std::string summary() const {
    std::string s;
    auto add = [&](bool on, const char* name) {
      if (!on) return;
      if (!s.empty()) s += ' ';
      s += name;
    };
    add(avx2, "avx2"), add(fma, "fma"), add(avx512f, "avx512f"), add(avx512bw, "avx512bw"), add(avx512vl, "avx512vl");
    add(avx512_vnni, "avx512-vnni"), add(avx512_bf16, "avx512-bf16"), add(avx512_fp16, "avx512-fp16");
    add(amx_tile, "amx-tile"), add(amx_bf16, "amx-bf16"), add(amx_int8, "amx-int8");
    if (amx_tile) s += amx_permitted ? " (amx permitted)" : " (amx not permitted by the OS)";
    return s.empty() ? "baseline x86-64 (or not x86)" : s;
  }
};

namespace detail {

#if defined(SINKLAB_CPUID)
inline uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
#endif

inline CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(SINKLAB_CPUID)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t x = xcr0();
  const bool os_avx = (x & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (x & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (x & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA
  f.fma = os_avx && ((c >> 12) & 1);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = os_avx && ((b >> 5) & 1);
  f.avx512f = os_avx512 && ((b >> 16) & 1);
  f.avx512bw = f.avx512f && ((b >> 30) & 1);
  f.avx512vl = f.avx512f && ((b >> 31) & 1);
  f.avx512_vnni = f.avx512f && ((c >> 11) & 1);
  f.avx512_fp16 = f.avx512f && ((d >> 23) & 1);
  f.amx_bf16 = os_amx && ((d >> 22) & 1);
  f.amx_tile = os_amx && ((d >> 24) & 1);
  f.amx_int8 = os_amx && ((d >> 25) & 1);
  const unsigned max_sub = a;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512_bf16 = f.avx512f && ((a >> 5) & 1);
  }
#if defined(__linux__) && defined(SYS_arch_prctl)
  if (f.amx_tile) {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    f.amx_permitted = syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }
#endif
#endif
  return f;
}

}  // namespace detail

inline const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detail::detect_cpu_features();
  return f;
}

// The widest vector ISA this translation unit was compiled for (what xsimd's batches use).
inline const char* compiled_isa() {
#if defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE2__)
  return "sse2";
#else
  return "scalar";
#endif
}

// Once per process, on stderr: the CPU runs wider vectors than this program was compiled for, so
// every xsimd kernel but the GEMMs' run-time tiles runs at a fraction of its speed (SSE2 is 4
// floats per instruction, AVX-512 16). Silenced by SINKLAB_QUIET_ISA=1. Returns whether it warned.
inline bool warn_if_built_below_cpu() {
  static const bool warned = [] {
    const CpuFeatures& f = cpu_features();
    const std::string built = compiled_isa();
    const char* better = f.avx512f && built != "avx512f"                           ? "AVX-512"
                         : f.avx2 && f.fma && built != "avx512f" && built != "avx2" ? "AVX2 and FMA"
                                                                                   : nullptr;
    const char* quiet = std::getenv("SINKLAB_QUIET_ISA");
    if (!better || (quiet && *quiet && std::string(quiet) != "0")) return false;
    std::fprintf(stderr,
                 "sinklab: this CPU has %s but the program was compiled for %s: sinklab's GEMMs choose their "
                 "instructions at run time, but its attention, row-wise and element-wise kernels run several times "
                 "slower than they could; compile with -march=native (CMake: target_compile_options(<target> "
                 "PRIVATE -march=native)). SINKLAB_QUIET_ISA=1 silences this.\n",
                 better, built.c_str());
    return true;
  }();
  return warned;
}

}  // namespace sinklab
