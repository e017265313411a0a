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

/// R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks", eq. 3): the
/// same batch through the model twice with independent dropout masks, logits_a and logits_b
/// [N, V]; per non-PAD row r, with p = softmax(logits_a[r]), q = softmax(logits_b[r]):
///   loss_r = ½·(CE_a,r + CE_b,r) + alpha·½·(KL(p‖q) + KL(q‖p)),
/// CE the label-smoothed cross-entropy above (the halves keep the loss on one pass's scale).
/// loss_sum is Σ loss_r and nll_sum Σ ½·(nll_a,r + nll_b,r). When dlogits_a and dlogits_b are
/// given, writes d(loss_sum / grad_scale) with respect to each [N, V] (PAD rows zero). Throws
/// ShapeError on a label outside [0, V), a size mismatch (between the two logits too), or
/// only one of dlogits_a and dlogits_b given.
LossStats rdrop_loss(const Mat& logits_a, const Mat& logits_b, const TokenIds& labels,
                     double label_smoothing, double alpha, Mat* dlogits_a, Mat* dlogits_b,
                     double grad_scale = 1.0);

/// log-softmax of each row: [N, V] → [N, V], out[r, v] = logits[r, v] − logsumexp(logits[r]).
Mat log_softmax_rows(const Mat& logits);
/// log Σ_v exp(z_v) of one row [V], computed as max + log Σ exp(z − max) (no overflow). The
/// normaliser of log_softmax_rows, so log-probabilities computed with it are bit-identical.
Scalar logsumexp(const Eigen::Ref<const RowVec>& z);

}  // namespace anuvad
