// Point-wise family n^-α·h(s) with smooth h (GELU, softplus, identity): fused vs materialised
// (fp32) and finite-difference gradients (fp64) for every value transform × gate × mask.
#include "attention_testing.hpp"

using namespace attn_test;

TEST_CASE("attention n^-alpha GELU: fused = reference, gradients = finite differences") {
  check_score_policy(score::Pointwise<score::fn::GELU>{}, 800);
}

TEST_CASE("attention n^-alpha softplus: fused = reference, gradients = finite differences") {
  check_score_policy(score::Pointwise<score::fn::Softplus>{{}, 0.75}, 900);
}

TEST_CASE("attention n^-alpha identity (linear): fused = reference, gradients = finite differences") {
  check_score_policy(score::Pointwise<score::fn::Identity>{}, 1000);
}
