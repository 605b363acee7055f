// Point-wise scores without a normaliser (sigmoid, ReLU/n, ReLU², polynomial): fused vs
// materialised (fp32) and finite-difference gradients (fp64) for every value transform × gate
// placement/granularity × mask.
#include "attention_testing.hpp"

using namespace attn_test;

TEST_CASE("attention sigmoid (bias -log n): fused = reference, gradients = finite differences") {
  check_score_policy(score::Sigmoid{}, 400);
}

TEST_CASE("attention sigmoid with a fixed bias: fused = reference, gradients = finite differences") {
  check_score_policy(score::Sigmoid::with_bias(-1.5), 450);
}

TEST_CASE("attention ReLU / n: fused = reference, gradients = finite differences") {
  check_score_policy(score::ReLU{}, 500);
}

TEST_CASE("attention n^-alpha ReLU^2: fused = reference, gradients = finite differences") {
  check_score_policy(score::Pointwise<score::fn::ReLU2>{{}, 0.5}, 600);
}

TEST_CASE("attention polynomial s^3 / sqrt(n): fused = reference, gradients = finite differences") {
  check_score_policy(score::Polynomial{}, 700);
}
