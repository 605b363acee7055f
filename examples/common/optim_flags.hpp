// The optimiser flags the studies share, each with one wording and one range (the --warmup range
// had drifted between studies): a study gets the flags its Settings has fields for (lr,
// weight_decay, beta2, warmup, min_lr_ratio, clip) and adds its own beside them (exoformer's Muon
// rates, sink_toys' per-toy rates).
#pragma once
#include <CLI/CLI.hpp>

namespace examples {

template <class Settings>
void add_optimiser_flags(CLI::App& app, Settings& s) {
  if constexpr (requires { s.lr; })
    app.add_option("--lr", s.lr, "AdamW's learning rate (its peak where a study schedules it)")->check(CLI::Range(1e-7, 1.0))->capture_default_str();
  if constexpr (requires { s.weight_decay; })
    app.add_option("--weight-decay", s.weight_decay, "AdamW's decoupled weight decay (weight matrices)")
        ->check(CLI::Range(0.0, 10.0))
        ->capture_default_str();
  if constexpr (requires { s.beta2; })
    app.add_option("--beta2", s.beta2, "AdamW's β₂")->check(CLI::Range(0.0, 0.99999))->capture_default_str();
  if constexpr (requires { s.warmup; })
    app.add_option("--warmup", s.warmup, "linear warmup, as a fraction of the steps")
        ->check(CLI::Range(0.0, 0.9))
        ->capture_default_str();
  if constexpr (requires { s.min_lr_ratio; })
    app.add_option("--min-lr-ratio", s.min_lr_ratio, "learning rate at the end, relative to the peak")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
  if constexpr (requires { s.clip; })
    app.add_option("--clip", s.clip, "gradient-norm clipping (0: off)")->check(CLI::Range(0.0, 1e9))->capture_default_str();
}

}  // namespace examples
