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

/// Row layout of B variable-length sequences packed without padding into one [Σ lengths, D]
/// matrix: sequence b occupies rows offsets[b] .. offsets[b] + lengths[b] − 1. Per-token layers
/// run on the packed rows only; attention runs per sequence on its true length (issue #15: no
/// work on padding).
struct Packing {
  std::vector<int> lengths;  ///< [B] tokens of each sequence
  std::vector<int> offsets;  ///< [B + 1] first row of each sequence; offsets[B] = total rows
  int max_length = 0;        ///< longest sequence, tokens (T of the attention weight blocks)
  int batch_size() const { return static_cast<int>(lengths.size()); }
  Index rows() const { return offsets.empty() ? 0 : offsets.back(); }
  /// The packing of sequences of these lengths. Throws ShapeError on a negative length.
  static Packing of(std::vector<int> lengths);
};

/// A batch of B sentence pairs for parallel teacher forcing, packed without padding
/// (src_rows / tgt_rows give each sentence's rows):
///   src     [Σ src_lengths]: per sentence, source ids + EOS;  src_lengths[b] = |src_b| + 1
///   tgt_in  [Σ tgt_lengths]: per sentence, BOS + target ids (decoder input, shifted right)
///   tgt_out [Σ tgt_lengths]: per sentence, target ids + EOS (labels); tgt_lengths[b] = |tgt_b| + 1
struct Batch {
  int batch_size = 0;
  int src_len = 0;  ///< longest source, tokens
  int tgt_len = 0;  ///< longest target, tokens
  TokenIds src, tgt_in, tgt_out;
  std::vector<int> src_lengths, tgt_lengths;
  Packing src_rows, tgt_rows;  ///< the row layouts of src and of tgt_in / tgt_out
  /// Real target tokens, EOS included (= tgt_out.size()).
  int64_t n_tgt_tokens() const;
  /// Tokens a right-padded [B·T] layout would hold for source and target, for padding figures.
  int64_t padded_tokens() const;
};

/// Builds a packed batch from examples. Throws ShapeError if `examples` is empty.
Batch make_batch(const std::vector<const Example*>& examples);

/// Sentences [first, last) of `b` as a batch of their own (what make_batch gives for those
/// examples). Throws ShapeError unless 0 <= first < last <= b.batch_size.
Batch sub_batch(const Batch& b, int first, int last);

}  // namespace anuvad
