// Multi-head attention: the fused masked-softmax kernel and the layer's forward and backward.
// Backward pass (the softmax Jacobian): with P = softmax(S), S = Q·Kᵀ/√d_k, O = P·V,
//   dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS·K/√d_k,  dK = dSᵀ·Q/√d_k;
// checked against finite differences in tests/gradcheck_test.cpp.
#include "anuvad/nn/attention.h"

#include <algorithm>
#include <cmath>


#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

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

namespace {

/// Where sentence `sentence` (query side) and key/value block `kv` sit in Q and K/V.
struct SentenceRows {
  Index q0, nq, k0, nk;
};

SentenceRows sentence_rows(const AttentionShape& s, int b, Index kv) {
  const int sentence = s.batch_offset + b;
  SentenceRows r{Index(b) * s.n_queries, s.n_queries, kv * s.k_stride, s.n_keys};
  if (s.q_rows != nullptr) {
    r.q0 = s.q_rows->offsets[sentence] - s.q_rows->offsets[s.batch_offset];
    r.nq = s.q_rows->lengths[sentence];
  }
  if (s.kv_rows != nullptr) {
    r.k0 = s.kv_rows->offsets[kv];
    r.nk = s.kv_rows->lengths[kv];
  }
  return r;
}

}  // namespace

void scaled_dot_product_attention_into(const Eigen::Ref<const Mat>& q, const Mat& k,
                                       const Mat& v, const AttentionShape& s,
                                       const AttentionMask& mask, const Mat& drop,
                                       Eigen::Ref<Mat> probs, Eigen::Ref<Mat> ctx) {
  const Index d_model = q.cols();
  ANUVAD_CHECK_SHAPE(s.n_heads > 0 && d_model % s.n_heads == 0, "attention: n_heads must divide d_model");
  const Index d_head = d_model / s.n_heads;
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(d_head));
  const int end = s.batch_offset + s.batch_size;
  if (s.q_rows != nullptr) {
    ANUVAD_CHECK_SHAPE(s.q_rows->batch_size() >= end && s.q_rows->max_length <= s.n_queries &&
                           q.rows() == s.q_rows->offsets[end] - s.q_rows->offsets[s.batch_offset],
                       "attention: q does not match its packing");
  } else {
    ANUVAD_CHECK_SHAPE(q.rows() == Index(s.batch_size) * s.n_queries, "attention: q has wrong rows");
  }
  ANUVAD_CHECK_SHAPE(probs.rows() == Index(s.batch_size) * s.n_heads * s.n_queries &&
                         probs.cols() == s.n_keys && ctx.rows() == q.rows() && ctx.cols() == d_model,
                     "attention: probs/ctx have wrong shape");
  int n_kv_blocks = end;
  if (s.kv_index != nullptr) {
    ANUVAD_CHECK_SHAPE(static_cast<int>(s.kv_index->size()) >= end, "attention: kv_index size");
    n_kv_blocks = 0;
    for (int b = 0; b < s.batch_size; ++b)
      n_kv_blocks = std::max(n_kv_blocks, (*s.kv_index)[s.batch_offset + b] + 1);
  }
  if (s.kv_rows != nullptr) {
    ANUVAD_CHECK_SHAPE(s.kv_rows->batch_size() >= n_kv_blocks && s.kv_rows->max_length <= s.n_keys &&
                           k.rows() >= s.kv_rows->offsets[n_kv_blocks],
                       "attention: k/v do not match their packing");
  } else {
    ANUVAD_CHECK_SHAPE(k.rows() >= Index(n_kv_blocks - 1) * s.k_stride + s.n_keys,
                       "attention: k/v have wrong rows");
  }
  ANUVAD_CHECK_SHAPE(v.rows() == k.rows() && k.cols() == d_model && v.cols() == d_model,
                     "attention: k/v have wrong shape");
  const int n_pairs = s.batch_size * s.n_heads;
  // A parallel region costs microseconds: worth it only above ~32k multiply-adds, and never
  // nested (the incremental decoder already runs row blocks in parallel).
  const double work = double(n_pairs) * s.n_queries * s.n_keys * double(d_head);
  const bool parallel = work >= 32768.0;
  parallel_for<Schedule::kDynamic>(n_pairs, parallel, [&](int bh) {
    const int b = bh / s.n_heads, h = bh % s.n_heads;
    const int sentence = s.batch_offset + b;  // index into kv_index, the packings and the mask
    const Index kv = s.kv_index ? (*s.kv_index)[sentence] : sentence;
    const SentenceRows r = sentence_rows(s, b, kv);
    const auto qb = q.block(r.q0, h * d_head, r.nq, d_head);
    const auto kb = k.block(r.k0, h * d_head, r.nk, d_head);
    const auto vb = v.block(r.k0, h * d_head, r.nk, d_head);
    auto p_all = probs.block(Index(bh) * s.n_queries, 0, s.n_queries, s.n_keys);
    if (r.nq < s.n_queries || r.nk < s.n_keys) p_all.setZero();
    auto p = p_all.topLeftCorner(r.nq, r.nk);
    p.noalias() = qb * kb.transpose();
    p *= scale;
    for (Index i = 0; i < r.nq; ++i)
      masked_softmax_row(p.row(i), std::min<int>(mask.visible(sentence, int(i), s.n_keys), int(r.nk)));
    auto cb = ctx.block(r.q0, h * d_head, r.nq, d_head);
    if (drop.size() > 0) {
      const auto db = drop.block(Index(bh) * s.n_queries, 0, r.nq, r.nk);
      cb.noalias() = p.cwiseProduct(db) * vb;
    } else {
      cb.noalias() = p * vb;
    }
  });
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

void MultiHeadAttention::forward(const Mat& x_q, const Mat& x_kv, const Packing& q_rows,
                                 const Packing& kv_rows, bool causal, Scalar attention_dropout,
                                 const DropoutContext& dctx, AttentionCache& cache, Mat& y) const {
  ANUVAD_CHECK_SHAPE(x_q.rows() == q_rows.rows() && x_kv.rows() == kv_rows.rows() &&
                         q_rows.batch_size() == kv_rows.batch_size(),
                     "attention: inputs do not match their packings");
  cache.k.resize(x_kv.rows(), k_proj.weight.rows());
  cache.v.resize(x_kv.rows(), v_proj.weight.rows());
  project_kv(x_kv, cache.k, cache.v);
  const int batch = q_rows.batch_size(), n_queries = q_rows.max_length, n_keys = kv_rows.max_length;
  const AttentionShape shape{batch, n_queries, n_keys, n_heads_, 0, nullptr, 0, &q_rows, &kv_rows};
  const AttentionMask mask{&kv_rows.lengths, causal, 0};
  make_attention_dropout_mask(q_rows, n_heads_, n_keys, attention_dropout, dctx, cache.drop);
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

void MultiHeadAttention::backward(const Mat& dy, const Mat& x_q, const Mat& x_kv,
                                  const Packing& q_rows, const Packing& kv_rows,
                                  const AttentionCache& cache, Mat& dx_q, Mat& dx_kv) const {
  // Masked weights are exactly zero in cache.probs, so their gradients vanish.
  Mat dctx;
  out_proj.backward(dy, cache.ctx, dctx);
  const Index d_model = x_q.cols();
  const Index d_head = d_model / n_heads_;
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(d_head));
  Mat dq(cache.q.rows(), d_model), dk(cache.k.rows(), d_model), dv(cache.v.rows(), d_model);
  const bool dropped = cache.drop.size() > 0;
  const int n_queries = q_rows.max_length;
  const int n_pairs = q_rows.batch_size() * n_heads_;
  parallel_for<Schedule::kDynamic>(n_pairs, true, [&](int bh) {
    const int b = bh / n_heads_, h = bh % n_heads_;
    const Index q0 = q_rows.offsets[b], nq = q_rows.lengths[b];
    const Index k0 = kv_rows.offsets[b], nk = kv_rows.lengths[b];
    const auto qb = cache.q.block(q0, h * d_head, nq, d_head);
    const auto kb = cache.k.block(k0, h * d_head, nk, d_head);
    const auto vb = cache.v.block(k0, h * d_head, nk, d_head);
    const auto p = cache.probs.block(Index(bh) * n_queries, 0, nq, nk);
    const auto dcb = dctx.block(q0, h * d_head, nq, d_head);
    // forward: ctx = (P ⊙ M)·V  ⇒  dV = (P ⊙ M)ᵀ·dctx, dP = (dctx·Vᵀ) ⊙ M
    Mat dp(nq, nk);
    dp.noalias() = dcb * vb.transpose();
    if (dropped) {
      const auto db = cache.drop.block(Index(bh) * n_queries, 0, nq, nk);
      dv.block(k0, h * d_head, nk, d_head).noalias() = p.cwiseProduct(db).transpose() * dcb;
      dp.array() *= db.array();
    } else {
      dv.block(k0, h * d_head, nk, d_head).noalias() = p.transpose() * dcb;
    }
    // forward: P = softmax(S) per row  ⇒  dS = P ⊙ (dP − rowsum(P ⊙ dP)); S = scale·Q·Kᵀ
    for (Index i = 0; i < nq; ++i) {
      const Scalar dot = p.row(i).dot(dp.row(i));
      dp.row(i) = p.row(i).cwiseProduct((dp.row(i).array() - dot).matrix());
    }
    dp *= scale;
    dq.block(q0, h * d_head, nq, d_head).noalias() = dp * kb;
    dk.block(k0, h * d_head, nk, d_head).noalias() = dp.transpose() * qb;
  });
  const bool self = (&dx_q == &dx_kv);
  q_proj.backward(dq, x_q, dx_q);
  k_proj.backward(dk, x_kv, dx_kv, /*accumulate=*/self);
  v_proj.backward(dv, x_kv, dx_kv, /*accumulate=*/true);
}

}  // namespace anuvad
