// Interventions on a probed forward pass (activation patching / ablation in the TransformerLens
// sense): zero, scale or replace, in one attention layer,
//
//   Site::HeadOutput     a query head's output o_i at token i   [d_head]  (after a gate on the
//                                                                          output, before W_O)
//   Site::Value          a key/value head's value v_j of token j [d_head] (before the value
//                                                                          transform and a value gate)
//   Site::Gate           the gate values σ(logits) of a head at a token [G] (query head and token
//                                                                          on the output, key/value
//                                                                          head and key on the values)
//   Site::AttentionRow   a query head's attention weights a_i· of token i [S keys]
//
// Each is one affine edit x ← scale·x + shift of that vector, so the three verbs are one
// mechanism: zero (scale 0), scale (scale s), replace (scale 0, shift = the new values). Edits on
// the same vector compose in the order given. Gradients flow through the edited forward pass.
//
//   nn::ModelProbe<float> pr;
//   pr.interventions = {nn::Intervention::zero(nn::Site::HeadOutput, /*layer*/ 1, /*head*/ 2, /*token*/ 0)};
//   auto loss = model.loss(tape, ids, targets, &pr);
//
// Tokens are positions as the layers see them (inserted sink or register tokens included), as in
// every probe record. HeadOutput and Value edits are tape ops on any path; Gate and AttentionRow
// edits act inside the materialised attention kernels, so they need the probe's attention
// recording (ModelProbe::attention, the default).
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "sinklab/autodiff/ops/attention.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::nn {

enum class Site { HeadOutput, Value, Gate, AttentionRow };

inline const char* site_name(Site s) {
  switch (s) {
    case Site::HeadOutput: return "head_output";
    case Site::Value: return "value";
    case Site::Gate: return "gate";
    case Site::AttentionRow: return "attention_row";
  }
  return "?";
}

struct Intervention {
  Site site = Site::HeadOutput;
  int64_t layer = 0;
  int64_t head = 0;    // query head (HeadOutput, AttentionRow, Gate on the output) or key/value head
  int64_t token = 0;   // query token (HeadOutput, AttentionRow, Gate on the output) or key token
  int64_t batch = -1;  // one row of the batch, or -1: every row
  double scale = 0.0;
  std::vector<double> shift;  // empty: 0; else the vector's width (d_head, G or S)

  static Intervention zero(Site s, int64_t layer, int64_t head, int64_t token) { return {s, layer, head, token, -1, 0.0, {}}; }
  static Intervention scaled(Site s, int64_t layer, int64_t head, int64_t token, double factor) {
    return {s, layer, head, token, -1, factor, {}};
  }
  static Intervention replace(Site s, int64_t layer, int64_t head, int64_t token, std::vector<double> values) {
    return {s, layer, head, token, -1, 0.0, std::move(values)};
  }
  Intervention& in_batch_row(int64_t b) {
    batch = b;
    return *this;
  }

  // "layer 1 head_output head 2 token 0 (batch all): x <- 0.5·x"
  std::string describe() const {
    std::ostringstream os;
    os << "layer " << layer << " " << site_name(site) << " head " << head << " token " << token << " (batch ";
    if (batch < 0) os << "all";
    else os << batch;
    os << "): x <- " << scale << "·x";
    if (!shift.empty()) os << " + [" << shift.size() << " values]";
    return os.str();
  }
};

// The edit of one site's tensor [B, heads, tokens, width] from the interventions at that site
// (scale 1 and shift 0 where none acts); inactive when none does. `where` names the layer in errors.
// Written on the host, then copied to the model's device.
template <class T, class Device = cpu>
autodiff::Edit<T, Device> site_edit(const std::vector<Intervention>& list, Site site, const Shape& shape,
                                    const std::string& where, const char* heads_kind) {
  autodiff::Edit<T> e;
  const int64_t B = shape[0], heads = shape[1], tokens = shape[2], width = shape[3];
  for (const Intervention& iv : list) {
    if (iv.site != site) continue;
    SINKLAB_CHECK(iv.head >= 0 && iv.head < heads, where, ": intervention ", iv.describe(), ": head ", iv.head,
                  " out of range (", heads, " ", heads_kind, ")");
    SINKLAB_CHECK(iv.token >= 0 && iv.token < tokens, where, ": intervention ", iv.describe(), ": token ", iv.token,
                  " out of range (", tokens, " tokens)");
    SINKLAB_CHECK(iv.batch >= -1 && iv.batch < B, where, ": intervention ", iv.describe(), ": batch row ", iv.batch,
                  " out of range (", B, " rows)");
    SINKLAB_CHECK(iv.shift.empty() || static_cast<int64_t>(iv.shift.size()) == width, where, ": intervention ",
                  iv.describe(), ": ", iv.shift.size(), " replacement values, expected ", width);
    if (!e.active()) {
      e.scale = Tensor<T>::ones(shape);
      e.shift = Tensor<T>::zeros(shape);
    }
    for (int64_t b = iv.batch < 0 ? 0 : iv.batch; b < (iv.batch < 0 ? B : iv.batch + 1); ++b) {
      const int64_t row = ((b * heads + iv.head) * tokens + iv.token) * width;
      T* s = e.scale.data() + row;
      T* r = e.shift.data() + row;
      for (int64_t c = 0; c < width; ++c) {
        s[c] *= static_cast<T>(iv.scale);
        r[c] = static_cast<T>(iv.scale) * r[c] + (iv.shift.empty() ? T(0) : static_cast<T>(iv.shift[c]));
      }
    }
  }
  if constexpr (std::is_same_v<Device, cpu>) {
    return e;
  } else {
    if (!e.active()) return {};
    return {e.scale.template to_device<Device>(), e.shift.template to_device<Device>()};
  }
}

}  // namespace sinklab::nn
