// Multi-head attention: the fused masked-softmax kernel and the layer's forward and backward.
// Backward pass (the softmax Jacobian): with P = softmax(S), S = Q·Kᵀ/√d_k, O = P·V,
//   dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS·K/√d_k,  dK = dSᵀ·Q/√d_k;
// checked against finite differences in tests/gradcheck_test.cpp.
#include "anuvad/nn/attention.h"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "anuvad/core/error.h"

namespace anuvad {

namespace {

/// Softmax over the first n entries of a row, zeros after them (n = 0: all zeros).
template <typename Row>
void masked_softmax_row(Row&& row, int n) {
  const Index len = row.size();
  if (n <= 0) {
    row.setZero();
    return;
  }
  auto head = row.head(n);
  const Scalar m = head.maxCoeff();
  head = (head.array() - m).exp();
  head /= head.sum();
  if (n < len) row.tail(len - n).setZero();
}

}  // namespace

void scaled_dot_product_attention(const Mat& q, const Mat& k, const Mat& v,
                                  const AttentionShape& s, const AttentionMask& mask,
                                  const Mat& drop, Mat& probs, Mat& ctx) {
  probs.resize(Index(s.batch_size) * s.n_heads * s.n_queries, s.n_keys);
  ctx.resize(q.rows(), q.cols());
  scaled_dot_product_attention_into(q, k, v, s, mask, drop, probs, ctx);
}

void scaled_dot_product_attention_into(const Eigen::Ref<const Mat>& q, const Mat& k,
                                       const Mat& v, const AttentionShape& s,
                                       const AttentionMask& mask, const Mat& drop,
                                       Eigen::Ref<Mat> probs, Eigen::Ref<Mat> ctx) {
  const Index d_model = q.cols();
  ANUVAD_CHECK_SHAPE(s.n_heads > 0 && d_model % s.n_heads == 0, "attention: n_heads must divide d_model");
  const Index d_head = d_model / s.n_heads;
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(d_head));
  ANUVAD_CHECK_SHAPE(q.rows() == Index(s.batch_size) * s.n_queries, "attention: q has wrong rows");
  ANUVAD_CHECK_SHAPE(probs.rows() == Index(s.batch_size) * s.n_heads * s.n_queries &&
                         probs.cols() == s.n_keys && ctx.rows() == q.rows() && ctx.cols() == d_model,
                     "attention: probs/ctx have wrong shape");
  int n_kv_blocks = s.batch_offset + s.batch_size;
  if (s.kv_index != nullptr) {
    ANUVAD_CHECK_SHAPE(static_cast<int>(s.kv_index->size()) >= s.batch_offset + s.batch_size,
                       "attention: kv_index size");
    n_kv_blocks = 0;
    for (int b = 0; b < s.batch_size; ++b)
      n_kv_blocks = std::max(n_kv_blocks, (*s.kv_index)[s.batch_offset + b] + 1);
  }
  ANUVAD_CHECK_SHAPE(k.rows() >= Index(n_kv_blocks - 1) * s.k_stride + s.n_keys &&
                         v.rows() == k.rows() && k.cols() == d_model && v.cols() == d_model,
                     "attention: k/v have wrong shape");
  const int n_pairs = s.batch_size * s.n_heads;
  // A parallel region costs microseconds: worth it only above ~32k multiply-adds, and never
  // nested (the incremental decoder already runs row blocks in parallel).
  const double work = double(n_pairs) * s.n_queries * s.n_keys * double(d_head);
  const bool parallel = n_pairs > 1 && work >= 32768.0 && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int bh = 0; bh < n_pairs; ++bh) {
    const int b = bh / s.n_heads, h = bh % s.n_heads;
    const int sentence = s.batch_offset + b;  // index into kv_index, k/v blocks and the mask
    const Index kv = s.kv_index ? (*s.kv_index)[sentence] : sentence;
    const auto qb = q.block(Index(b) * s.n_queries, h * d_head, s.n_queries, d_head);
    const auto kb = k.block(kv * s.k_stride, h * d_head, s.n_keys, d_head);
    const auto vb = v.block(kv * s.k_stride, h * d_head, s.n_keys, d_head);
    auto p = probs.block(Index(bh) * s.n_queries, 0, s.n_queries, s.n_keys);
    p.noalias() = qb * kb.transpose();
    p *= scale;
    for (int i = 0; i < s.n_queries; ++i)
      masked_softmax_row(p.row(i), mask.visible(sentence, i, s.n_keys));
    auto cb = ctx.block(Index(b) * s.n_queries, h * d_head, s.n_queries, d_head);
    if (drop.size() > 0) {
      const auto db = drop.block(Index(bh) * s.n_queries, 0, s.n_queries, s.n_keys);
      cb.noalias() = p.cwiseProduct(db) * vb;
    } else {
      cb.noalias() = p * vb;
    }
  }
}

MultiHeadAttention::MultiHeadAttention(ParamRegistry& reg, const std::string& prefix,
                                       Index d_model, int n_heads)
    : q_proj(reg, prefix + ".q_proj", d_model, d_model),
      k_proj(reg, prefix + ".k_proj", d_model, d_model),
      v_proj(reg, prefix + ".v_proj", d_model, d_model),
      out_proj(reg, prefix + ".out_proj", d_model, d_model),
      n_heads_(n_heads) {
  if (n_heads <= 0 || d_model % n_heads != 0)
    throw ConfigError(prefix + ": n_heads (" + std::to_string(n_heads) +
                      ") must divide d_model (" + std::to_string(d_model) + ")");
}

void MultiHeadAttention::forward(const Mat& x_q, const Mat& x_kv, int batch, int n_queries,
                                 int n_keys, const AttentionMask& mask, Scalar attention_dropout,
                                 const DropoutContext& dctx, AttentionCache& cache, Mat& y) const {
  cache.k.resize(x_kv.rows(), k_proj.weight.value.rows());
  cache.v.resize(x_kv.rows(), v_proj.weight.value.rows());
  project_kv(x_kv, cache.k, cache.v);
  const AttentionShape shape{batch, n_queries, n_keys, n_heads_, n_keys};
  make_dropout_mask(Index(batch) * n_heads_ * n_queries, n_keys, attention_dropout, dctx,
                    cache.drop);
  cache.probs.resize(Index(batch) * n_heads_ * n_queries, n_keys);
  attend(x_q, cache.k, cache.v, shape, mask, cache.drop, cache, cache.probs, y);
}

void MultiHeadAttention::project_kv(const Eigen::Ref<const Mat>& x_kv, Eigen::Ref<Mat> k,
                                    Eigen::Ref<Mat> v) const {
  k_proj.forward_into(x_kv, k);
  v_proj.forward_into(x_kv, v);
}

void MultiHeadAttention::attend(const Eigen::Ref<const Mat>& x_q, const Mat& k, const Mat& v,
                                const AttentionShape& shape, const AttentionMask& mask,
                                const Mat& drop, AttentionCache& cache, Eigen::Ref<Mat> probs,
                                Mat& y) const {
  q_proj.forward(x_q, cache.q);
  cache.ctx.resize(cache.q.rows(), cache.q.cols());
  scaled_dot_product_attention_into(cache.q, k, v, shape, mask, drop, probs, cache.ctx);
  out_proj.forward(cache.ctx, y);
}

void MultiHeadAttention::backward(const Mat& dy, const Mat& x_q, const Mat& x_kv, int batch,
                                  int n_queries, int n_keys, const AttentionMask& mask,
                                  const AttentionCache& cache, Mat& dx_q, Mat& dx_kv) const {
  (void)mask;  // masked weights are exactly zero in cache.probs, so their gradients vanish
  Mat dctx;
  out_proj.backward(dy, cache.ctx, dctx);
  const Index d_model = x_q.cols();
  const Index d_head = d_model / n_heads_;
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(d_head));
  Mat dq(cache.q.rows(), d_model), dk(cache.k.rows(), d_model), dv(cache.v.rows(), d_model);
  const bool dropped = cache.drop.size() > 0;
  const int n_pairs = batch * n_heads_;
#pragma omp parallel for schedule(static) if (n_pairs > 1)
  for (int bh = 0; bh < n_pairs; ++bh) {
    const int b = bh / n_heads_, h = bh % n_heads_;
    const auto qb = cache.q.block(Index(b) * n_queries, h * d_head, n_queries, d_head);
    const auto kb = cache.k.block(Index(b) * n_keys, h * d_head, n_keys, d_head);
    const auto vb = cache.v.block(Index(b) * n_keys, h * d_head, n_keys, d_head);
    const auto p = cache.probs.block(Index(bh) * n_queries, 0, n_queries, n_keys);
    const auto dcb = dctx.block(Index(b) * n_queries, h * d_head, n_queries, d_head);
    // forward: ctx = (P ⊙ M)·V  ⇒  dV = (P ⊙ M)ᵀ·dctx, dP = (dctx·Vᵀ) ⊙ M
    Mat dp(n_queries, n_keys);
    dp.noalias() = dcb * vb.transpose();
    if (dropped) {
      const auto db = cache.drop.block(Index(bh) * n_queries, 0, n_queries, n_keys);
      dv.block(Index(b) * n_keys, h * d_head, n_keys, d_head).noalias() =
          p.cwiseProduct(db).transpose() * dcb;
      dp.array() *= db.array();
    } else {
      dv.block(Index(b) * n_keys, h * d_head, n_keys, d_head).noalias() = p.transpose() * dcb;
    }
    // forward: P = softmax(S) per row  ⇒  dS = P ⊙ (dP − rowsum(P ⊙ dP)); S = scale·Q·Kᵀ
    for (int i = 0; i < n_queries; ++i) {
      const Scalar dot = p.row(i).dot(dp.row(i));
      dp.row(i) = p.row(i).cwiseProduct((dp.row(i).array() - dot).matrix());
    }
    dp *= scale;
    dq.block(Index(b) * n_queries, h * d_head, n_queries, d_head).noalias() = dp * kb;
    dk.block(Index(b) * n_keys, h * d_head, n_keys, d_head).noalias() = dp.transpose() * qb;
  }
  const bool self = (&dx_q == &dx_kv);
  q_proj.backward(dq, x_q, dx_q);
  k_proj.backward(dk, x_kv, dx_kv, /*accumulate=*/self);
  v_proj.backward(dv, x_kv, dx_kv, /*accumulate=*/true);
}

}  // namespace anuvad
