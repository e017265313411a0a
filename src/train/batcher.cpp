// Length bucketing.
#include "anuvad/train/batcher.h"

#include <algorithm>
#include <numeric>

namespace anuvad {

std::vector<std::vector<int>> bucket_batches(const std::vector<Example>& examples,
                                             int batch_tokens, std::mt19937_64& rng) {
  std::vector<int> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ka = std::make_pair(examples[a].src.size(), examples[a].tgt.size());
    const auto kb = std::make_pair(examples[b].src.size(), examples[b].tgt.size());
    return ka < kb;
  });
  std::vector<std::vector<int>> batches;
  std::vector<int> current;
  size_t max_len = 0;
  for (int idx : order) {
    const size_t len = std::max(examples[idx].src.size(), examples[idx].tgt.size()) + 1;
    const size_t new_max = std::max(max_len, len);
    if (!current.empty() && (current.size() + 1) * new_max > size_t(batch_tokens)) {
      batches.push_back(std::move(current));
      current.clear();
      max_len = 0;
    }
    current.push_back(idx);
    max_len = std::max(max_len, len);
  }
  if (!current.empty()) batches.push_back(std::move(current));
  std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

}  // namespace anuvad
