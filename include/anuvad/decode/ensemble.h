// Several translation models decoded as one: Marian's log-linear ensemble. The score of a next
// token y is Σ_i w_i · log p_i(y | prefix, src), the weighted sum of the models' log-softmax
// outputs (not renormalised); beam search, length normalisation, n-best lists, word scores and
// EOS handling treat it exactly as one model's log-probability. Each model runs its own encoder
// and keeps its own key/value cache; beam reordering is applied to every model's cache.
#pragma once

#include <cstddef>
#include <vector>

#include "anuvad/nn/transformer.h"

namespace anuvad {

/// The models (not owned; they must outlive the Ensemble) and their weights. All of them read
/// the same source subword ids and predict over the same target vocabulary (checked: equal
/// tgt_vocab_size; that the vocabularies are the same SentencePiece model is the caller's check).
/// Attention, where asked for (alignment, attention dumps, beam traces), is the first model's.
class Ensemble {
 public:
  /// The ensemble of one model with weight 1. Implicit, so that a Transformer is accepted
  /// wherever an Ensemble is; decoding it runs the single-model code path (no combination
  /// pass, nothing copied), bit-identical to decoding the model alone.
  Ensemble(const Transformer& model);  // NOLINT(google-explicit-constructor)
  /// `models` (non-null) with `weights` (one per model; empty = 1 each). Throws ConfigError
  /// when there is no model, the counts differ, a weight is not finite, or the models'
  /// target vocabulary sizes differ.
  explicit Ensemble(std::vector<const Transformer*> models, std::vector<double> weights = {});

  size_t size() const { return models_.size(); }
  const Transformer& model(size_t i) const { return *models_[i]; }
  double weight(size_t i) const { return weights_[i]; }
  /// The first model: its config gives the decoder shape of attention records.
  const Transformer& first() const { return *models_.front(); }
  /// One model with weight 1: its log-probabilities are used as they come.
  bool single() const { return models_.size() == 1 && weights_.front() == 1.0; }
  /// The smallest max_positions of the models: every model takes max_positions − 1 source
  /// subwords (+ EOS) and target subwords (+ BOS).
  int max_positions() const;

 private:
  std::vector<const Transformer*> models_;
  std::vector<double> weights_;
};

/// The ensemble's next-token scores: for each row r with wanted[r],
/// out[r, v] = Σ_i w_i · (logits[i][r, v] − logsumexp(logits[i][r])) (nats), each model's term
/// bit-identical to log_softmax_rows; logits: one [R, V] matrix per model. Rows without
/// wanted[r] are left unspecified. out is resized to [R, V].
void ensemble_log_probs(const Ensemble& ensemble, const std::vector<Mat>& logits,
                        const std::vector<char>& wanted, Mat& out);

}  // namespace anuvad
