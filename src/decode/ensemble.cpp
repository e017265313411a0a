// Several models decoded as one (include/anuvad/decode/ensemble.h).
#include "anuvad/decode/ensemble.h"

#include <algorithm>
#include <cmath>
#include <string>


#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"
#include "anuvad/nn/loss.h"

namespace anuvad {

Ensemble::Ensemble(const Transformer& model) : models_{&model}, weights_{1.0} {}

Ensemble::Ensemble(std::vector<const Transformer*> models, std::vector<double> weights)
    : models_(std::move(models)), weights_(std::move(weights)) {
  if (models_.empty()) throw ConfigError("an ensemble needs at least one model");
  if (weights_.empty()) weights_.assign(models_.size(), 1.0);
  if (weights_.size() != models_.size())
    throw ConfigError("--weights has " + std::to_string(weights_.size()) + " values for " +
                      std::to_string(models_.size()) + " models");
  for (double w : weights_)
    if (!std::isfinite(w)) throw ConfigError("--weights: every weight must be a finite number");
  for (size_t i = 1; i < models_.size(); ++i)
    if (models_[i]->config().tgt_vocab_size != models_[0]->config().tgt_vocab_size)
      throw ConfigError("ensemble model " + std::to_string(i + 1) +
                        " has another target vocabulary size than model 1");
}

int Ensemble::max_positions() const {
  int p = models_.front()->config().max_positions;
  for (const Transformer* m : models_) p = std::min(p, m->config().max_positions);
  return p;
}

void ensemble_log_probs(const Ensemble& ensemble, const std::vector<Mat>& logits,
                        const std::vector<char>& wanted, Mat& out) {
  ANUVAD_CHECK_SHAPE(logits.size() == ensemble.size(), "one logits matrix per ensemble model");
  const Index R = logits.front().rows(), V = logits.front().cols();
  out.resize(R, V);
  parallel_for(R, double(R) * double(V) * double(logits.size()) >= 65536.0, [&](Index r) {
    if (!wanted[size_t(r)]) return;
    for (size_t i = 0; i < logits.size(); ++i) {
      const auto z = logits[i].row(r);
      const Scalar lse = logsumexp(z);
      const Scalar w = static_cast<Scalar>(ensemble.weight(i));
      if (i == 0)
        out.row(r) = w * (z.array() - lse).matrix();
      else
        out.row(r) += w * (z.array() - lse).matrix();
    }
  });
}

}  // namespace anuvad
