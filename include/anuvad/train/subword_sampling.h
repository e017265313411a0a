// Subword regularisation (Kudo 2018, "Subword Regularization", arXiv:1804.10959): the training
// sentences are re-segmented every epoch by sampling from the unigram language model of their
// SentencePiece vocabulary (TrainOptions::sentencepiece_alphas, Marian's --sentencepiece-alphas).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/nn/batch.h"
#include "anuvad/text/tokenizer.h"

namespace anuvad {

/// The training examples of each epoch with sampled segmentations. Deterministic: epoch e of a
/// run with seed s is the same whenever it is asked for (a resumed run repeats it).
class SubwordSampler {
 public:
  /// `pairs` are the training texts (source, target) of the examples `best` (their one best
  /// segmentations, as make_examples gives them, in the same order). A side with alpha 0 keeps
  /// its best segmentation; a sampled side longer than `max_tokens` subwords falls back to it
  /// too, so every epoch has the same examples. The tokenizers must outlive the sampler.
  SubwordSampler(std::vector<std::pair<std::string, std::string>> pairs, std::vector<Example> best,
                 const Tokenizer& src, const Tokenizer& tgt, std::pair<double, double> alphas,
                 uint64_t seed, int max_tokens);

  /// The examples of epoch `number` (1-based), sampled on first request and kept until another
  /// epoch is asked for.
  const std::vector<Example>& epoch(int number);

  /// The generator seed of one side (0 = source, 1 = target) of one epoch: a hash of
  /// (seed, epoch, side), different for every epoch.
  static uint64_t epoch_seed(uint64_t seed, int epoch, int side);

  /// Sampled subwords in the last epoch drawn, and what the best segmentations would have had
  /// (both sides together).
  int64_t sampled_tokens() const { return sampled_tokens_; }
  int64_t best_tokens() const { return best_tokens_; }
  /// Wall time of the last epoch's sampling, s.
  double seconds() const { return seconds_; }

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
  std::vector<Example> best_, current_;
  const Tokenizer& src_;
  const Tokenizer& tgt_;
  std::pair<double, double> alphas_;
  uint64_t seed_;
  int max_tokens_;
  int current_epoch_ = 0;  ///< the epoch current_ holds (0 = none)
  int64_t sampled_tokens_ = 0, best_tokens_ = 0;
  double seconds_ = 0;
};

}  // namespace anuvad
