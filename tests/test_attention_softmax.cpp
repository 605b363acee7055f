// Softmax family: fused vs materialised (fp32) and finite-difference gradients (fp64) for every
// value transform × gate placement/granularity × mask.
#include "attention_testing.hpp"

using namespace attn_test;

TEST_CASE("attention softmax: fused = reference, gradients = finite differences") {
  check_score_policy(score::Softmax{}, 100);
}

TEST_CASE("attention softmax with learnable sink: fused = reference, gradients = finite differences") {
  check_score_policy(score::SoftmaxSink{}, 200);
}

TEST_CASE("attention clipped softmax: fused = reference, gradients = finite differences") {
  check_score_policy(score::ClippedSoftmax{1.05, -0.1}, 300);
}
