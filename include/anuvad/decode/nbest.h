// The n-best collector of one sentence's beam search and its length-normalised ranking score.
#pragma once

#include <vector>

#include "anuvad/decode/decode.h"

namespace anuvad {

/// Ranking score of a hypothesis: (score + word_penalty·n) / n^α with n = target tokens
/// incl. EOS (at least 1), α = DecodeOptions::normalize; score in nats.
double normalized_score(double score, int n_tokens, const DecodeOptions& opts);

/// A finished hypothesis of one sentence, named by its last node in the sentence's search tree
/// (SentenceBeam).
struct FinishedHypothesis {
  int node = 0;                 ///< last node: the EOS node when `eos`, else the last token's
  double normalized_score = 0;  ///< its ranking score (normalized_score())
  bool eos = false;             ///< ended by EOS (else cut at the length limit)
};

/// Collects the finished hypotheses of one sentence in the order they finish and ranks them by
/// normalized score, best first; equal scores keep the order of finishing.
class NBestCollector {
 public:
  void add(const FinishedHypothesis& h) { finished_.push_back(h); }
  int size() const { return static_cast<int>(finished_.size()); }
  /// The n-th best normalized score, 1 ≤ n ≤ size(). Throws ShapeError otherwise.
  double nth_best_score(int n) const;
  /// The min(n, size()) best hypotheses, best first.
  std::vector<FinishedHypothesis> best(int n) const;

 private:
  std::vector<FinishedHypothesis> finished_;
};

}  // namespace anuvad
