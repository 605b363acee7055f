// BERT's masked-language-model corruption (Devlin et al. 2019) of a batch of token ids:
//
//   data::MaskedLmOptions opt{.mask_id = mask, .vocab = V, .random_lo = first_word_id};
//   data::TokenBatch b = data::mask_tokens(ids, rng, opt);   // b.x corrupted, b.y targets
//   auto loss = model.loss(tape, b.x, b.y);                  // ignore_index −100 by default
//
// Every maskable position (t >= first_maskable, holding an id >= first_selectable_id: BERT never
// predicts its [CLS] and [SEP]) is selected with probability `select` (15%);
// a selected token becomes [MASK] with probability `mask` (80%), a uniformly random token from
// [random_lo, vocab) with probability `random` (10%), and stays as it is otherwise (10%).
// Targets: the original token at selected positions, ignore_index everywhere else, so the
// loss (and exp(loss), the MLM perplexity) covers the selected positions only. A row in which
// no position was selected gets one selected position drawn uniformly, or the next selectable
// one after it (a row must always contribute a target, also at tiny T). Deterministic: a pure
// function of the ids and the Rng's state; the Rng advances by the same count for any ids of the
// same shape.
#pragma once
#include <cstdint>

#include "sinklab/core/error.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/data/token_batch.hpp"

namespace sinklab::data {

struct MaskedLmOptions {
  int32_t mask_id = -1;         // the [MASK] token (required)
  int64_t vocab = 0;            // ids are in [0, vocab) (required)
  int32_t random_lo = 0;        // random replacements are drawn from [random_lo, vocab) (skip special ids)
  int64_t first_maskable = 0;   // positions before this are never selected (e.g. a [CLS] at 0)
  int32_t first_selectable_id = 0;  // tokens with smaller ids (specials such as [SEP]) are never selected
  double select = 0.15;         // fraction of positions selected for prediction
  double mask = 0.8;            // of the selected: replaced by [MASK]
  double random = 0.1;          // of the selected: replaced by a random token (the rest are kept)
  int32_t ignore_index = -100;  // target of the positions that are not selected
};

inline void check_masked_lm_options(const MaskedLmOptions& o) {
  SINKLAB_CHECK(o.vocab > 0 && o.mask_id >= 0 && o.mask_id < o.vocab, "data::mask_tokens: mask_id ", o.mask_id,
                " must be a token of the vocabulary [0, ", o.vocab, ")");
  SINKLAB_CHECK(o.random_lo >= 0 && o.random_lo < o.vocab, "data::mask_tokens: random_lo ", o.random_lo,
                " must be in [0, ", o.vocab, ")");
  SINKLAB_CHECK(o.select > 0 && o.select <= 1, "data::mask_tokens: select ", o.select, " must be in (0, 1]");
  SINKLAB_CHECK(o.mask >= 0 && o.random >= 0 && o.mask + o.random <= 1, "data::mask_tokens: mask ", o.mask,
                " and random ", o.random, " must be >= 0 with mask + random <= 1");
  SINKLAB_CHECK(o.first_maskable >= 0, "data::mask_tokens: first_maskable ", o.first_maskable, " must be >= 0");
  SINKLAB_CHECK(o.first_selectable_id >= 0 && o.first_selectable_id < o.vocab, "data::mask_tokens: first_selectable_id ",
                o.first_selectable_id, " must be in [0, ", o.vocab, ")");
  SINKLAB_CHECK(o.ignore_index < 0 || o.ignore_index >= o.vocab, "data::mask_tokens: ignore_index ", o.ignore_index,
                " collides with a token id of [0, ", o.vocab, ")");
}

// ids [B, T] → {x: corrupted ids, y: targets (original id or ignore_index)}.
inline TokenBatch mask_tokens(const Tensor<int32_t>& ids, Rng& rng, const MaskedLmOptions& o) {
  check_masked_lm_options(o);
  SINKLAB_CHECK(ids.rank() == 2, "data::mask_tokens: ids must be [B, T], got ", ids.shape());
  const int64_t B = ids.size(0), T = ids.size(1);
  SINKLAB_CHECK(T > o.first_maskable, "data::mask_tokens: sequences of ", T, " tokens have no maskable position (",
                "first_maskable = ", o.first_maskable, ")");
  const Tensor<int32_t> src = ids.contiguous();
  TokenBatch b{src.clone(), Tensor<int32_t>::full({B, T}, o.ignore_index)};
  const int64_t span = o.vocab - o.random_lo;
  for (int64_t r = 0; r < B; ++r) {
    const int32_t* in = src.data() + r * T;
    int32_t* x = b.x.data() + r * T;
    int32_t* y = b.y.data() + r * T;
    auto corrupt = [&](int64_t t, double u, uint64_t pick) {
      SINKLAB_CHECK(in[t] >= 0 && in[t] < o.vocab, "data::mask_tokens: token ", in[t], " at [", r, ", ", t,
                    "] is outside [0, ", o.vocab, ")");
      y[t] = in[t];
      if (u < o.mask) x[t] = o.mask_id;
      else if (u < o.mask + o.random) x[t] = static_cast<int32_t>(o.random_lo + static_cast<int64_t>(pick % uint64_t(span)));
    };
    bool any = false;
    for (int64_t t = 0; t < T; ++t) {
      // Three draws per position whatever is chosen, so the stream advances by a fixed count.
      const double sel = rng.uniform(), u = rng.uniform();
      const uint64_t pick = rng.next_u64();
      if (t < o.first_maskable || sel >= o.select || in[t] < o.first_selectable_id) continue;
      corrupt(t, u, pick);
      any = true;
    }
    const int64_t n = T - o.first_maskable;
    const int64_t drawn = static_cast<int64_t>(rng.next_u64() % uint64_t(n));
    const double u = rng.uniform();
    const uint64_t pick = rng.next_u64();
    if (any) continue;
    int64_t k = 0;
    while (k < n && in[o.first_maskable + (drawn + k) % n] < o.first_selectable_id) ++k;
    SINKLAB_CHECK(k < n, "data::mask_tokens: row ", r, " holds no token with an id >= first_selectable_id ",
                  o.first_selectable_id, " at positions >= ", o.first_maskable, ", so it has nothing to predict");
    corrupt(o.first_maskable + (drawn + k) % n, u, pick);
  }
  return b;
}

}  // namespace sinklab::data
