// Padded batches for parallel teacher forcing (Vaswani et al. 2017 §5.1: the shifted target).
#pragma once

#include <cstdint>
#include <vector>

#include "anuvad/core/tensor.h"

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
  int batch_size = 0;
  int src_len = 0;  ///< S, tokens
  int tgt_len = 0;  ///< T, tokens
  TokenIds src, tgt_in, tgt_out;
  std::vector<int> src_lengths, tgt_lengths;
  /// Real target tokens (labels that are not PAD), EOS included.
  int64_t n_tgt_tokens() const;
};

/// Builds a padded batch from examples. Throws ShapeError if `examples` is empty.
Batch make_batch(const std::vector<const Example*>& examples);

}  // namespace anuvad
