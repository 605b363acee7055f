// examples/sink_toys: what its translation units share. toy_nop.cpp trains the NOP toy (both
// setups, with and without the gate), toy_broadcast.cpp the broadcast toy (with and without
// registers); main.cpp holds the command line, the three matrices, the tables, the claims and
// the figures.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "sinklab/experiment/experiment.hpp"

namespace sink_toys {

// The study's three parts, each its own run matrix (out/<part>/):
//   nop        the NOP toy with a dedicated null token and the loss on the attention update
//              (a sink within ~100 steps): the γ and p sweeps, a never-NOP
//              baseline (λ = 10) and the G1 gate
//   slow       the NOP toy with the authors' notebook loss on the block output O = z + ΔO
//              (setup b: an abrupt sink after many steps, with a large BOS activation), with and
//              without the gate
//   broadcast  the two-layer broadcast toy, with and without registers
enum class Part { Nop, Slow, Broadcast };
const char* part_name(Part p);

struct Settings {
  int64_t d = 64, seq_len = 32;
  double weight_decay = 1e-4;
  // NOP (paper: AdamW 3e-3; batch 256 for setup a, 64 for setup b: batches at which the sinks form on two cores).
  double nop_lr = 3e-3, p = 0.5;
  int64_t nop_batch = 256, nop_steps = 1500, nop_eval_every = 50;
  int64_t slow_batch = 64, slow_steps = 25000, slow_eval_every = 250;
  // Broadcast (paper: AdamW 5e-4, α = 1, batch 1024, 30k steps; scaled down to this machine).
  double bc_lr = 5e-4, alpha = 1.0;
  int64_t bc_batch = 128, bc_steps = 2000, bc_eval_every = 100, registers = 4;
  int64_t eval_batch = 512;
  uint64_t eval_seed = 20251125;
  bool smoke = false, plots = true;
};

// A variant of one part. NOP: nop_gamma_<γ> (p = --p), nop_p_<p> (γ = 0), nop_never (λ = 10: no
// token is ever flagged), nop_gated (γ = 0 with the G1 gate). Slow: slow, slow_gated.
// Broadcast: broadcast, broadcast_registers.
struct Variant {
  std::string name;
  Part part = Part::Nop;
  double gamma = 0.0, p = 0.5;
  std::optional<double> lambda;  // overrides p
  bool gate = false, registers = false;
};
Variant parse_variant(const std::string& name, const Settings& s);  // throws on a name it cannot read

struct Context {
  const Settings* s = nullptr;
  int64_t steps = 0;
};

void run_nop(sinklab::experiment::Run& run, const Context& c, const Variant& v);        // nop and slow
void run_broadcast(sinklab::experiment::Run& run, const Context& c, const Variant& v);  // broadcast

}  // namespace sink_toys
