// Length-bucketed batching of a corpus for training.
#pragma once

#include <random>
#include <vector>

#include "anuvad/nn/batch.h"

namespace anuvad {

/// Groups example indices into batches of similar length (Vaswani et al. 2017 §5.1): sorts by
/// (source, target) length with a random tie order from `rng`, cuts batches so that
/// B · max(S, T) ≤ batch_tokens (padded positions; a longer single sentence gets its own batch),
/// then shuffles the batch order with `rng`.
std::vector<std::vector<int>> bucket_batches(const std::vector<Example>& examples,
                                             int batch_tokens, std::mt19937_64& rng);

}  // namespace anuvad
