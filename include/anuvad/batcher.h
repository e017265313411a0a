// Padded batches for parallel teacher forcing, and length-bucketed batching of a corpus.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "anuvad/tensor.h"

namespace anuvad {

/// One tokenised sentence pair (subword ids, without BOS/EOS).
struct Example {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

/// A right-padded batch of B sentence pairs.
///   src     [B·S]: source ids + EOS, then PAD;             src_lengths[b] = |src_b| + 1
///   tgt_in  [B·T]: BOS + target ids, then PAD (decoder input, shifted right)
///   tgt_out [B·T]: target ids + EOS, then PAD (labels);    tgt_lengths[b] = |tgt_b| + 1
struct Batch {
  int batch = 0;
  int src_len = 0;  ///< S, tokens
  int tgt_len = 0;  ///< T, tokens
  TokenIds src, tgt_in, tgt_out;
  std::vector<int> src_lengths, tgt_lengths;
  /// Real target tokens (labels that are not PAD), EOS included.
  int64_t n_tgt_tokens() const;
};

/// Builds a padded batch from examples. Throws ShapeError if `examples` is empty.
Batch make_batch(const std::vector<const Example*>& examples);

/// Groups example indices into batches of similar length (Vaswani et al. 2017 §5.1): sorts by
/// (source, target) length with a random tie order from `rng`, cuts batches so that
/// B · max(S, T) ≤ batch_tokens (padded positions; a longer single sentence gets its own batch),
/// then shuffles the batch order with `rng`.
std::vector<std::vector<int>> bucket_batches(const std::vector<Example>& examples,
                                             int batch_tokens, std::mt19937_64& rng);

}  // namespace anuvad
