// The cases of test_cuda_attention_mma: inputs as 16-bit codes and the CPU reference's results
// in double on the same rounded values, made by attention_mma_cases_cpu.cpp (compiled by the
// host compiler: the CPU backend's reference is not nvcc's to build), compared on the GPU side.
#pragma once
#include <cstdint>
#include <vector>

namespace sinklab_test {

enum class MmaScore { Softmax, Sink, Clipped, ReLU, Sigmoid, Softcap };

struct MmaCase {
  MmaScore score = MmaScore::Softmax;
  bool causal = true, fp16 = false, padded = false;
  int64_t B = 1, H = 2, Hkv = 1, T = 80, S = 80, d = 64;
};

struct MmaData {
  std::vector<uint16_t> q, k, v, dout;        // codes of bf16 (or fp16)
  std::vector<float> sink;                    // [H] for MmaScore::Sink
  std::vector<int64_t> lengths;               // [B] keys per batch entry
  std::vector<double> out, lse, dq, dk, dv, dsink;  // the reference on the decoded codes
};

MmaData mma_case_data(const MmaCase& c);

// The score objects both sides use.
inline constexpr double kClipZeta = 1.05, kClipGamma = -0.05;

}  // namespace sinklab_test
