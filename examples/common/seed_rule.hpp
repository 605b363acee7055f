// The rule behind every "in every seed" claim of the studies: a predicate holds for each seed's
// value, and there are enough seeds to say so (at least one by default; a study that will not
// decide from a single seed asks for two).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace examples {

template <class Pred>
bool every_seed(const std::vector<double>& per_seed, Pred pred, std::size_t min_seeds = 1) {
  return per_seed.size() >= min_seeds && std::all_of(per_seed.begin(), per_seed.end(), pred);
}

}  // namespace examples
