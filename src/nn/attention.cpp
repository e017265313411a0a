// Multi-head attention: the fused masked-softmax kernel and the layer's forward and backward.
// Backward pass (the softmax Jacobian): with P = softmax(S), S = Q·Kᵀ/√d_k, O = P·V,
//   dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS·K/√d_k,  dK = dSᵀ·Q/√d_k;
// checked against finite differences in tests/gradcheck_test.cpp.
#include "anuvad/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>


#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source of their
// masked builtins; inlined into Eigen's AVX-512 horizontal sum (dot below),
// -Wuninitialized reports it (as in core/gemm.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"

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

// One (sentence, head) pair is a few hundred multiply-adds per query row at our lengths: too
// small for a GEMM (Eigen's packing cost more than its kernel), so the pair kernels below work
// row by row on the d_head-long rows of Q, K, V in place, with vector loops over d_head and
// nothing done for masked keys (a causal row reads only its visible prefix).

/// W values: with W = 16, one AVX-512 register of floats. The loops over d_head below step by
/// whole chunks (32, then 16 and 8 values), so that their sums stay in registers (a head is 64
/// values in small and base, 16 in tiny).
template <int W>
using Chunk = Eigen::Matrix<Scalar, 1, W>;
template <int W>
using ChunkMap = Eigen::Map<const Chunk<W>>;

/// Σ_d a[d]·b[d], d < n.
inline Scalar dot(const Scalar* a, const Scalar* b, Index n) {
  Chunk<16> acc0 = Chunk<16>::Zero(), acc1 = Chunk<16>::Zero();
  Index d = 0;
  for (; d + 32 <= n; d += 32) {
    acc0 += ChunkMap<16>(a + d).cwiseProduct(ChunkMap<16>(b + d));
    acc1 += ChunkMap<16>(a + d + 16).cwiseProduct(ChunkMap<16>(b + d + 16));
  }
  if (d + 16 <= n) {
    acc0 += ChunkMap<16>(a + d).cwiseProduct(ChunkMap<16>(b + d));
    d += 16;
  }
  Scalar sum = (acc0 + acc1).sum();
  if (d + 8 <= n) {
    sum += ChunkMap<8>(a + d).dot(ChunkMap<8>(b + d));
    d += 8;
  }
  for (; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

/// y[d0, d0 + W) = Σ_j w[j]·x.row(j)[d0, d0 + W), j < rows in order, in one register's worth.
template <int W, typename Weights, typename Rows>
inline void weighted_chunk(const Weights& w, const Rows& x, Index rows, Scalar* y, Index d0) {
  Chunk<W> acc = Chunk<W>::Zero();
  for (Index j = 0; j < rows; ++j) acc += w[j] * ChunkMap<W>(x.row(j) + d0);
  Eigen::Map<Chunk<W>>(y + d0) = acc;
}

/// y[d] = Σ_j w[j]·x.row(j)[d], d < n, j < rows in order: a weighted sum of rows, accumulated
/// in registers chunk by chunk.
template <typename Weights, typename Rows>
inline void weighted_rows(const Weights& w, const Rows& x, Index rows, Scalar* y, Index n) {
  Index d = 0;
  for (; d + 32 <= n; d += 32) weighted_chunk<32>(w, x, rows, y, d);
  if (d + 16 <= n) weighted_chunk<16>(w, x, rows, y, d), d += 16;
  if (d + 8 <= n) weighted_chunk<8>(w, x, rows, y, d), d += 8;
  for (; d < n; ++d) {
    Scalar acc = 0;
    for (Index j = 0; j < rows; ++j) acc += w[j] * x.row(j)[d];
    y[d] = acc;
  }
}

/// A [rows, d_head] slice of a row-major matrix: row i starts at data + i·stride (a view; the
/// kernels only read the slices of their inputs).
struct HeadRows {
  Scalar* data;
  Index stride;
  Scalar* row(Index i) const { return data + i * stride; }
};

/// HeadRows of head h of rows r0.. of m ([·, d_model], row-major).
template <typename M>
HeadRows head_rows(M& m, Index r0, int h, Index d_head) {
  return {const_cast<Scalar*>(m.data()) + r0 * m.outerStride() + h * d_head, m.outerStride()};
}

/// A column of a row-major buffer with `stride` values per row, as weights for weighted_rows.
struct Column {
  const Scalar* data;
  Index stride;
  Scalar operator[](Index i) const { return data[i * stride]; }
};

/// The backward pass of one (sentence, head) pair (the file's header gives the equations): dq,
/// dk, dv are [nq or nk, d_head] slices written here, p the forward's weights [nq, ≥ nk]
/// (exactly 0 on masked keys, whose dot products are skipped), drop its dropout mask or
/// {nullptr}. Every sum runs in a fixed order: deterministic.
void pair_backward(HeadRows q, HeadRows k, HeadRows v, HeadRows dctx, HeadRows p, HeadRows drop,
                   Index nq, Index nk, Index d_head, Scalar scale, HeadRows dq, HeadRows dk,
                   HeadRows dv) {
  thread_local std::vector<Scalar> pd_buf, ds_buf;  // P ⊙ M and dS, [nq, nk]
  pd_buf.resize(size_t(nq * nk));
  ds_buf.resize(size_t(nq * nk));
  Scalar *pd = pd_buf.data(), *ds = ds_buf.data();
  for (Index i = 0; i < nq; ++i) {
    const Scalar *pi = p.row(i), *di = drop.data ? drop.row(i) : nullptr, *dci = dctx.row(i);
    Scalar *pdi = pd + i * nk, *dsi = ds + i * nk;
    // dP = (dctx·Vᵀ) ⊙ M, then dS = P ⊙ (dP − rowsum(P ⊙ dP)) / √d_k
    Scalar row_dot = 0;
    for (Index j = 0; j < nk; ++j) {
      const Scalar m = di ? di[j] : Scalar(1);
      pdi[j] = pi[j] * m;
      dsi[j] = pdi[j] != Scalar(0) ? dot(dci, v.row(j), d_head) * m : Scalar(0);
      row_dot += pi[j] * dsi[j];
    }
    for (Index j = 0; j < nk; ++j) dsi[j] = pi[j] * (dsi[j] - row_dot) * scale;
    weighted_rows(dsi, k, nk, dq.row(i), d_head);  // dQ = dS·K
  }
  for (Index j = 0; j < nk; ++j) {
    weighted_rows(Column{pd + j, nk}, dctx, nq, dv.row(j), d_head);  // dV = (P ⊙ M)ᵀ·dctx
    weighted_rows(Column{ds + j, nk}, q, nq, dk.row(j), d_head);     // dK = dSᵀ·Q
  }
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
    const HeadRows qh = head_rows(q, r.q0, h, d_head), kh = head_rows(k, r.k0, h, d_head),
                   vh = head_rows(v, r.k0, h, d_head), ch = head_rows(ctx, r.q0, h, d_head);
    const HeadRows ph = head_rows(probs, Index(bh) * s.n_queries, 0, 0);
    const HeadRows dm = drop.size() > 0 ? head_rows(drop, Index(bh) * s.n_queries, 0, 0) : HeadRows{nullptr, 0};
    thread_local std::vector<Scalar> wd;  // P ⊙ dropout mask, one row
    wd.resize(size_t(s.n_keys));
    for (Index i = 0; i < r.nq; ++i) {
      // S = Q·Kᵀ/√d_k on the visible keys, softmax; ctx = (P ⊙ dropout mask)·V
      const int n = std::min<int>(mask.visible(sentence, int(i), s.n_keys), int(r.nk));
      Scalar* p = ph.row(i);
      const Scalar* qi = qh.row(i);
      for (int j = 0; j < n; ++j) p[j] = scale * dot(qi, kh.row(j), d_head);
      masked_softmax_row(Eigen::Map<Eigen::Matrix<Scalar, 1, Eigen::Dynamic>>(p, s.n_keys), n);
      const Scalar* w = p;
      if (dm.data) {
        for (int j = 0; j < n; ++j) wd[j] = p[j] * dm.row(i)[j];
        w = wd.data();
      }
      weighted_rows(w, vh, n, ch.row(i), d_head);
    }
    for (Index i = r.nq; i < s.n_queries; ++i) std::fill(ph.row(i), ph.row(i) + s.n_keys, Scalar(0));
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
    pair_backward(head_rows(cache.q, q0, h, d_head), head_rows(cache.k, k0, h, d_head),
                  head_rows(cache.v, k0, h, d_head), head_rows(dctx, q0, h, d_head),
                  head_rows(cache.probs, Index(bh) * n_queries, 0, 0),
                  dropped ? head_rows(cache.drop, Index(bh) * n_queries, 0, 0) : HeadRows{nullptr, 0},
                  nq, nk, d_head, scale, head_rows(dq, q0, h, d_head), head_rows(dk, k0, h, d_head),
                  head_rows(dv, k0, h, d_head));
  });
  const bool self = (&dx_q == &dx_kv);
  q_proj.backward(dq, x_q, dx_q);
  k_proj.backward(dk, x_kv, dx_kv, /*accumulate=*/self);
  v_proj.backward(dv, x_kv, dx_kv, /*accumulate=*/true);
}

}  // namespace anuvad
