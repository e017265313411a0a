// Label-smoothed cross-entropy over target tokens (Szegedy et al. 2016 §7; Vaswani et al. 2017
// §5.4), defined as torch.nn.functional.cross_entropy(label_smoothing=ε, ignore_index=PAD):
//   loss_r = (1 − ε)·(−log p_r[y_r]) + ε·mean_k(−log p_r[k]),   p_r = softmax(logits_r).
#pragma once

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Sums over the non-PAD rows of one batch.
struct LossStats {
  double loss_sum = 0;  ///< Σ label-smoothed loss, nats
  double nll_sum = 0;   ///< Σ −log p(y) without smoothing, nats (for perplexity)
  int64_t n_tokens = 0; ///< rows whose label is not PAD
};

/// logits: [N, V], labels: [N] (PAD rows ignored), label_smoothing ε ∈ [0, 1).
/// When dlogits is given, writes d(loss_sum / grad_scale)/dlogits [N, V] (PAD rows zero):
/// pass grad_scale = n_tokens for the mean loss per token.
/// Throws ShapeError on a label outside [0, V) or a size mismatch.
LossStats label_smoothed_cross_entropy(const Mat& logits, const TokenIds& labels,
                                       double label_smoothing, Mat* dlogits,
                                       double grad_scale = 1.0);

/// log-softmax of each row: [N, V] → [N, V], out[r, v] = logits[r, v] − logsumexp(logits[r]).
Mat log_softmax_rows(const Mat& logits);
/// log Σ_v exp(z_v) of one row [V], computed as max + log Σ exp(z − max) (no overflow). The
/// normaliser of log_softmax_rows, so log-probabilities computed with it are bit-identical.
Scalar logsumexp(const Eigen::Ref<const RowVec>& z);

}  // namespace anuvad
