// Per-epoch subword sampling of the training examples (include/anuvad/train/subword_sampling.h).
#include "anuvad/train/subword_sampling.h"

#include <chrono>
#include <random>

#include "anuvad/core/error.h"

namespace anuvad {

SubwordSampler::SubwordSampler(std::vector<std::pair<std::string, std::string>> pairs,
                               std::vector<Example> best, const Tokenizer& src, const Tokenizer& tgt,
                               std::pair<double, double> alphas, uint64_t seed, int max_tokens)
    : pairs_(std::move(pairs)), best_(std::move(best)), src_(src), tgt_(tgt), alphas_(alphas),
      seed_(seed), max_tokens_(max_tokens) {
  if (pairs_.size() != best_.size())
    throw ConfigError("subword sampling: " + std::to_string(pairs_.size()) + " texts for " +
                      std::to_string(best_.size()) + " examples");
  for (const Example& e : best_) best_tokens_ += int64_t(e.src.size() + e.tgt.size());
}

uint64_t SubwordSampler::epoch_seed(uint64_t seed, int epoch, int side) {
  // std::seed_seq's mixing is specified by the standard, so the seeds are the same everywhere.
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(epoch), uint32_t(side), 0x5357u};
  std::mt19937_64 g(seq);
  return g();
}

const std::vector<Example>& SubwordSampler::epoch(int number) {
  if (number == current_epoch_) return current_;
  const auto start = std::chrono::steady_clock::now();
  current_ = best_;
  sampled_tokens_ = 0;
  for (int side = 0; side < 2; ++side) {
    const double alpha = side == 0 ? alphas_.first : alphas_.second;
    if (alpha <= 0) continue;
    std::vector<std::string> texts;
    texts.reserve(pairs_.size());
    for (const auto& p : pairs_) texts.push_back(side == 0 ? p.first : p.second);
    const Tokenizer& tok = side == 0 ? src_ : tgt_;
    auto sampled = tok.sample_encode(texts, alpha, epoch_seed(seed_, number, side));
    for (size_t i = 0; i < sampled.size(); ++i) {
      if (static_cast<int>(sampled[i].size()) > max_tokens_) continue;  // keeps the best one
      (side == 0 ? current_[i].src : current_[i].tgt) = std::move(sampled[i]);
    }
  }
  for (const Example& e : current_) sampled_tokens_ += int64_t(e.src.size() + e.tgt.size());
  current_epoch_ = number;
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return current_;
}

}  // namespace anuvad
