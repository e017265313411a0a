// Label-smoothed cross-entropy, fused with its gradient (softmax − smoothed one-hot).
#include "anuvad/nn/loss.h"

#include <cmath>
#include <atomic>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"
#include "anuvad/core/reduce.h"

namespace anuvad {

Scalar logsumexp(const Eigen::Ref<const RowVec>& z) {
  const Scalar m = z.maxCoeff();
  return m + std::log((z.array() - m).exp().sum());
}

Mat log_softmax_rows(const Mat& logits) {
  Mat out(logits.rows(), logits.cols());
  for (Index r = 0; r < logits.rows(); ++r) out.row(r) = logits.row(r).array() - logsumexp(logits.row(r));
  return out;
}

LossStats label_smoothed_cross_entropy(const Mat& logits, const TokenIds& labels,
                                       double label_smoothing, Mat* dlogits, double grad_scale) {
  const Index n = logits.rows(), v = logits.cols();
  ANUVAD_CHECK_SHAPE(static_cast<Index>(labels.size()) == n, "loss: labels/logits size mismatch");
  const double eps = label_smoothing;
  std::vector<double> row_loss(n, 0.0), row_nll(n, 0.0);
  if (dlogits) dlogits->resize(n, v);
  std::atomic<bool> bad_label{false};
  parallel_for(n, true, [&](Index r) {
    const int32_t y = labels[r];
    if (y == kPadId || y < 0 || y >= v) {
      if (y != kPadId) bad_label = true;
      if (dlogits) dlogits->row(r).setZero();
      return;
    }
    const auto z = logits.row(r);
    const Scalar m = z.maxCoeff();
    // e_k = exp(z_k − m) in one vectorised pass (Eigen's exp), into the gradient's row when
    // there is one; sums in double. softmax_k = e_k / Σ e.
    thread_local RowVec scratch;
    if (!dlogits) scratch.resize(v);
    Eigen::Map<RowVec> e(dlogits ? dlogits->row(r).data() : scratch.data(), v);
    e = (z.array() - m).exp();
    const double sum_exp = sum_in_double(e.data(), v);
    const double sum_z = sum_in_double(z.data(), v);
    const double lse = static_cast<double>(m) + std::log(sum_exp);
    const double nll = lse - static_cast<double>(z[y]);
    const double mean_neg_logp = lse - sum_z / static_cast<double>(v);
    row_nll[r] = nll;
    row_loss[r] = (1 - eps) * nll + eps * mean_neg_logp;
    if (dlogits) {
      // d/dz_k = softmax_k − (1 − ε)·[k = y] − ε/V, all over grad_scale
      const double inv = 1.0 / grad_scale;
      e = e.array() * static_cast<Scalar>(inv / sum_exp) - static_cast<Scalar>(eps / v * inv);
      e[y] -= static_cast<Scalar>((1 - eps) * inv);
    }
  });
  if (bad_label) throw ShapeError("loss: label id outside the vocabulary");
  LossStats s;
  for (Index r = 0; r < n; ++r) {
    if (labels[r] == kPadId) continue;
    s.loss_sum += row_loss[r];
    s.nll_sum += row_nll[r];
    ++s.n_tokens;
  }
  return s;
}

LossStats rdrop_loss(const Mat& logits_a, const Mat& logits_b, const TokenIds& labels,
                     double label_smoothing, double alpha, Mat* dlogits_a, Mat* dlogits_b,
                     double grad_scale) {
  ANUVAD_CHECK_SHAPE(logits_a.rows() == logits_b.rows() && logits_a.cols() == logits_b.cols(),
                     "rdrop_loss: the two passes' logits differ in shape");
  ANUVAD_CHECK_SHAPE((dlogits_a == nullptr) == (dlogits_b == nullptr), "rdrop_loss: one gradient of two");
  // Each pass's cross-entropy at half weight: its gradient over 2·grad_scale.
  const LossStats a = label_smoothed_cross_entropy(logits_a, labels, label_smoothing, dlogits_a, 2 * grad_scale);
  const LossStats b = label_smoothed_cross_entropy(logits_b, labels, label_smoothing, dlogits_b, 2 * grad_scale);
  const Index n = logits_a.rows();
  std::vector<double> row_kl(n, 0.0);
  // ½(KL(p‖q) + KL(q‖p)) = ½ Σ_k (p_k − q_k)(log p_k − log q_k); its gradient with respect to
  // logits_a is ½(p ⊙ (d − KL(p‖q)) + p − q), d = log p − log q, and symmetrically for b.
  parallel_for(n, true, [&](Index r) {
    if (labels[r] == kPadId) return;
    thread_local RowVec log_p, log_q, p, q;
    log_p = logits_a.row(r).array() - logsumexp(logits_a.row(r));
    log_q = logits_b.row(r).array() - logsumexp(logits_b.row(r));
    p = log_p.array().exp();
    q = log_q.array().exp();
    RowVec& d = log_p;  // log p − log q, in place
    d -= log_q;
    const double kl_pq = (p.array().cast<double>() * d.array().cast<double>()).sum();
    const double kl_qp = -(q.array().cast<double>() * d.array().cast<double>()).sum();
    row_kl[r] = 0.5 * (kl_pq + kl_qp);
    if (dlogits_a) {
      const Scalar w = static_cast<Scalar>(0.5 * alpha / grad_scale);
      dlogits_a->row(r).array() +=
          w * (p.array() * (d.array() - static_cast<Scalar>(kl_pq)) + p.array() - q.array());
      dlogits_b->row(r).array() +=
          w * (q.array() * (-d.array() - static_cast<Scalar>(kl_qp)) + q.array() - p.array());
    }
  });
  LossStats s;
  s.n_tokens = a.n_tokens;
  s.nll_sum = 0.5 * (a.nll_sum + b.nll_sum);
  s.loss_sum = 0.5 * (a.loss_sum + b.loss_sum);
  for (Index r = 0; r < n; ++r) s.loss_sum += alpha * row_kl[r];
  return s;
}

}  // namespace anuvad
