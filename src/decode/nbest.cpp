// Length-normalised ranking and the n-best collector (include/anuvad/decode/nbest.h).
#include "anuvad/decode/nbest.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "anuvad/core/error.h"

namespace anuvad {

double normalized_score(double score, int n_tokens, const DecodeOptions& opts) {
  const double n = std::max(n_tokens, 1);
  return (score + opts.word_penalty * n) / std::pow(n, opts.normalize);
}

double NBestCollector::nth_best_score(int n) const {
  ANUVAD_CHECK_SHAPE(n >= 1 && n <= size(), "nth_best_score: n outside [1, finished hypotheses]");
  std::vector<double> scores;
  scores.reserve(finished_.size());
  for (const FinishedHypothesis& h : finished_) scores.push_back(h.normalized_score);
  std::nth_element(scores.begin(), scores.begin() + (n - 1), scores.end(), std::greater<>());
  return scores[size_t(n - 1)];
}

std::vector<FinishedHypothesis> NBestCollector::best(int n) const {
  std::vector<FinishedHypothesis> out = finished_;
  std::stable_sort(out.begin(), out.end(), [](const FinishedHypothesis& a, const FinishedHypothesis& b) {
    return a.normalized_score > b.normalized_score;
  });
  if (static_cast<int>(out.size()) > n) out.resize(size_t(std::max(n, 0)));
  return out;
}

}  // namespace anuvad
