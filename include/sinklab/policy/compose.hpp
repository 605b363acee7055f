// Compile-time checks for a combination of attention policies, with messages that say which
// argument is wrong (instead of a page of template errors deep inside a kernel).
#pragma once
#include <type_traits>

#include "sinklab/policy/gate.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/score.hpp"
#include "sinklab/policy/value.hpp"

namespace sinklab::policy {

template <class Score, class Gate, class Value, class Mask>
constexpr bool check_attention_policies() {
  static_assert(score::is_policy_v<Score>,
                "attention: the Score argument must be a sinklab::score policy (Softmax, SoftmaxSink, ClippedSoftmax, "
                "Sigmoid, ReLU, Pointwise<fn::...>, Polynomial, or a struct satisfying score::Policy)");
  static_assert(gate::is_policy_v<Gate>,
                "attention: the Gate argument must be a sinklab::gate policy (None, FromInput<...>, FromValue<...>, "
                "FromAnchor<...>)");
  static_assert(value::is_policy_v<Value>,
                "attention: the Value argument must be a sinklab::value policy (Identity, VScale, or a struct "
                "satisfying value::Policy)");
  static_assert(mask::is_policy_v<Mask>,
                "attention: the Mask argument must be a sinklab::mask policy (Causal, Bidirectional, or a struct "
                "satisfying mask::Policy)");
  static_assert(!(Score::has_sink && Score::clipped),
                "attention: a learnable sink and clipping cannot be combined (the clip acts on the normalised "
                "weights the sink would absorb)");
  return true;
}

}  // namespace sinklab::policy
