// Word alignment from cross-attention: the head average of one decoder layer's cross-attention,
// and hard, threshold and soft alignments on subword positions (what `translate --alignment`
// prints).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "anuvad/decode/decode.h"

namespace anuvad {

/// Which alignment to extract: hard (the most attended source token of each target token),
/// soft (all weights), or every pair whose weight is at least `threshold`.
struct AlignmentSpec {
  enum class Kind { kHard, kSoft, kThreshold };
  Kind kind = Kind::kHard;
  double threshold = 0;  ///< in (0, 1], for kThreshold
};

/// Parses "hard", "soft" or a threshold in (0, 1]. Throws ConfigError naming --alignment.
AlignmentSpec parse_alignment(const std::string& text);

/// Cross-attention of decoder layer `layer` averaged over its n_heads heads: [T, S] (T output
/// tokens incl. EOS, S source tokens incl. EOS) from a record's cross[layer] [H·T, S].
/// Throws std::out_of_range for a layer the record does not have.
Mat head_average(const AttentionRecord& attention, int layer, int n_heads);

/// (source, target) subword positions: for each target token t < n_tgt its most attended
/// source token s < n_src (the first on ties) of `avg` [T, S]; none when n_src is 0.
std::vector<std::pair<Index, Index>> hard_alignment(const Mat& avg, Index n_tgt, Index n_src);
/// (source, target) positions (t < n_tgt, s < n_src) whose weight in `avg` is ≥ threshold,
/// target-major then source order.
std::vector<std::pair<Index, Index>> threshold_alignment(const Mat& avg, Index n_tgt, Index n_src,
                                                         double threshold);

/// Soft alignment [n_tgt, n_src]: the first n_tgt rows and n_src columns of `avg` (the source
/// EOS column dropped), each row renormalised to sum to 1, following the convention of an
/// alignment as a distribution over source words: the mass a target token put on the source
/// EOS is redistributed proportionally over the source subwords. A row with no mass stays 0.
Mat soft_alignment(const Mat& avg, Index n_tgt, Index n_src);

/// The alignment field of hypothesis h on subword positions, the source's and the output's EOS
/// excluded, from decoder layer `layer`'s head-averaged cross-attention (h.attention must be
/// filled): hard and threshold as Pharaoh pairs "s-t s-t ...", soft as one comma-separated
/// list of the soft_alignment weights over the source tokens (4 decimals, each row sums to 1)
/// per target token, space-separated.
std::string format_alignment(const Hypothesis& h, const AlignmentSpec& spec, int n_heads, int layer);

}  // namespace anuvad
