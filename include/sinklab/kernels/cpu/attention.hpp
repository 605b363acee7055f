// CPU attention kernels, all of them:
//
//   attention_fused_forward / _backward          streamed key blocks, O(T·d) memory per head
//   attention_reference_forward / _backward      the materialised T×S matrix (oracle, probes)
//   value_transform_*, gate_*                    the elementwise pieces around the core
//
// Which one runs is the caller's choice (autodiff/ops/attention.hpp: fused unless a recorder
// asks for the attention maps).
#pragma once
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/attention_fused_backward.hpp"
#include "sinklab/kernels/cpu/attention_fused_forward.hpp"
#include "sinklab/kernels/cpu/attention_reference.hpp"
#include "sinklab/kernels/cpu/attention_transforms.hpp"
