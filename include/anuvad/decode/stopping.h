// When one sentence's beam search ends.
#pragma once

#include <vector>

#include "anuvad/decode/nbest.h"

namespace anuvad {

/// The stopping rule of one sentence's beam search (fairseq's sequence_generator, plus an
/// exact bound): the search ends after a step when
///   - beam_size hypotheses have finished, or no beam is live, or
///   - the length limit is reached (the caller finishes the live beams there), or
///   - the n_best-th finished hypothesis scores at least the best normalized score that any
///     live beam could still reach: log-probabilities only lower a raw score, so that bound is
///     the best length term over the lengths still possible.
class StoppingRule {
 public:
  /// limit: maximum output tokens of the sentence (EOS excluded).
  StoppingRule(const DecodeOptions& opts, int limit) : opts_(opts), limit_(limit) {}
  /// steps: decoder steps taken so far (= tokens of every live beam); live_scores: raw scores
  /// (nats) of the live beams.
  bool done(int steps, const std::vector<double>& live_scores, const NBestCollector& finished) const;
  /// Best normalized score that a live beam (raw score `score` after n_tokens tokens) can reach
  /// when it finishes with between n_tokens + 1 and limit + 1 tokens (EOS included).
  double best_reachable(double score, int n_tokens) const;

 private:
  DecodeOptions opts_;
  int limit_;
};

}  // namespace anuvad
