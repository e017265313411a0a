// The stopping rule of a sentence's beam search (include/anuvad/decode/stopping.h).
#include "anuvad/decode/stopping.h"

#include <algorithm>
#include <limits>

namespace anuvad {

double StoppingRule::best_reachable(double score, int n_tokens) const {
  double best = -std::numeric_limits<double>::infinity();
  const int max_tokens = limit_ + 1;
  for (int len = n_tokens + 1; len <= std::max(max_tokens, n_tokens + 1); ++len)
    best = std::max(best, normalized_score(score, len, opts_));
  return best;
}

bool StoppingRule::done(int steps, const std::vector<double>& live_scores,
                        const NBestCollector& finished) const {
  if (live_scores.empty() || finished.size() >= opts_.beam_size || steps >= limit_) return true;
  if (finished.size() < opts_.n_best) return false;
  double reachable = -std::numeric_limits<double>::infinity();
  for (double s : live_scores) reachable = std::max(reachable, best_reachable(s, steps));
  return finished.nth_best_score(opts_.n_best) >= reachable;
}

}  // namespace anuvad
