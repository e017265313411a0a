// Multi-head scaled dot-product attention (Vaswani et al. 2017 §3.2.1–3.2.2, Eq. 1):
//   Attention(Q, K, V) = softmax(Q·Kᵀ/√d_head + mask)·V, heads concatenated, then W_o.
// One class serves encoder self-attention, causal decoder self-attention and cross-attention
// (queries from the decoder, keys/values from `memory`). The incremental decoder calls the same
// kernel (scaled_dot_product_attention) on its key/value cache.
//
// Masks are statements about absolute positions, never slices of a square table: query row i of
// a call sits at absolute position query_offset + i, key j at absolute position j. With right
// padding and a causal mask, the keys a query may see always form a prefix 0..n−1 of the keys,
// so a mask is the per-query visible length n (AttentionMask::visible). A fully masked row
// (n = 0) gets all-zero weights, a zero context vector and zero gradients: never NaN.
#pragma once

#include <string>
#include <vector>

#include "anuvad/nn/batch.h"
#include "anuvad/nn/layers.h"

namespace anuvad {

/// Which keys each query sees. key_lengths: [B] number of real (non-padding) keys of each
/// sentence (key_padding_mask as lengths; nullptr = no padding). causal: a query at absolute
/// position p sees keys 0..p (causal_mask); the queries are rows query_offset.. of the sequence.
struct AttentionMask {
  const std::vector<int>* key_lengths = nullptr;
  bool causal = false;
  int query_offset = 0;
  /// Number of visible keys (the prefix 0..n−1) for query row i of sentence b, n ≤ n_keys.
  int visible(int b, int i, int n_keys) const {
    int n = n_keys;
    if (key_lengths != nullptr && (*key_lengths)[b] < n) n = (*key_lengths)[b];
    if (causal && query_offset + i + 1 < n) n = query_offset + i + 1;
    return n < 0 ? 0 : n;
  }
};

/// The sizes of one attention call: B sentences, at most Tq queries and Tk keys each, H heads.
/// Query rows of sentence b are b·Tq.. in Q, or, packed (q_rows set), q_rows->offsets[b].. with
/// q_rows->lengths[b] of them; key/value rows are kv·k_stride.. in K and V (k_stride: the cache
/// capacity for incremental decoding), or, packed (kv_rows set), kv_rows->offsets[kv].. with
/// kv_rows->lengths[kv] of them. Padding rows are neither read nor computed.
/// kv_index (optional, [B]) maps query sentence b to the key/value block kv_index[b]: beams of
/// one sentence share that sentence's cross-attention keys and values without copies.
struct AttentionShape {
  int batch_size = 0;
  int n_queries = 0;
  int n_keys = 0;
  int n_heads = 0;
  int k_stride = 0;
  const std::vector<int>* kv_index = nullptr;
  /// Query sentence b of this call is sentence batch_offset + b for kv_index, the k/v blocks
  /// and the mask (a block of rows of a larger batch, as the incremental decoder runs them).
  int batch_offset = 0;
  const Packing* q_rows = nullptr;   ///< packed queries, indexed by sentence (training passes)
  const Packing* kv_rows = nullptr;  ///< packed keys/values, indexed by key/value block
};

/// Fused masked softmax and weighted sum for every (sentence, head), in parallel with OpenMP.
/// q: [B·Tq, D] or packed [Σ Tq_b, D], k, v: [B·k_stride, D] or packed (heads are column blocks
/// of width D/H). Writes probs [B·H·Tq, Tk] (row (b·H + h)·Tq + i; masked entries and the rows
/// and columns past a packed sentence's lengths exactly 0) and ctx (the shape of q). When `drop` is non-empty ([B·H·Tq, Tk] multipliers) the context uses
/// probs ⊙ drop (attention dropout) while `probs` keeps the undropped weights.
void scaled_dot_product_attention(const Mat& q, const Mat& k, const Mat& v,
                                  const AttentionShape& shape, const AttentionMask& mask,
                                  const Mat& drop, Mat& probs, Mat& ctx);
/// As above into caller-sized blocks: probs [B·H·Tq, Tk], ctx as q (e.g. row ranges of larger
/// matrices). Runs serially when called inside a parallel region or when the work is
/// small. Throws ShapeError on any size mismatch.
void scaled_dot_product_attention_into(const Eigen::Ref<const Mat>& q, const Mat& k,
                                       const Mat& v, const AttentionShape& shape,
                                       const AttentionMask& mask, const Mat& drop,
                                       Eigen::Ref<Mat> probs, Eigen::Ref<Mat> ctx);

/// What MultiHeadAttention::forward keeps for backward (and for attention dumps).
/// Rows are packed (nn/batch.h Packing): Nq = Σ query lengths, Nk = Σ key lengths.
struct AttentionCache {
  Mat q;      ///< [Nq, D] projected queries
  Mat k;      ///< [Nk, D] projected keys
  Mat v;      ///< [Nk, D] projected values
  Mat probs;  ///< [B·H·Tq, Tk] attention weights, row (b·H + h)·Tq + i (Tq, Tk: longest)
  Mat drop;   ///< attention-dropout multipliers (same shape as probs) or empty
  Mat ctx;    ///< [Nq, D] concatenated head outputs (input of out_proj)
};

/// Multi-head attention with parameters "<prefix>.{q,k,v,out}_proj.{weight,bias}", each weight
/// [D, D] (PyTorch Linear convention [out, in]). Scores are scaled by 1/√(D/H) (d_head).
class MultiHeadAttention {
 public:
  /// Throws ConfigError unless n_heads divides d_model.
  MultiHeadAttention(ParamRegistry& reg, const std::string& prefix, Index d_model, int n_heads);

  /// x_q: [Nq, D] packed queries laid out as q_rows, x_kv: [Nk, D] packed keys/values laid out
  /// as kv_rows (x_q itself for self-attention, `memory` for cross-attention) → y [Nq, D].
  /// With packed keys the key_padding_mask is the key lengths themselves; `causal` adds the
  /// causal_mask (query t of a sentence sees its keys 0..t). Attention dropout (rate
  /// attention_dropout) multiplies the weights by make_attention_dropout_mask(q_rows, …, dctx):
  /// `dctx` names this dropout's site. Fills cache. Throws ShapeError when the inputs do not
  /// match their packings.
  void forward(const Mat& x_q, const Mat& x_kv, const Packing& q_rows, const Packing& kv_rows,
               bool causal, Scalar attention_dropout, const DropoutContext& dctx,
               AttentionCache& cache, Mat& y) const;

  /// dy: [Nq, D] → dx_q [Nq, D] and dx_kv [Nk, D], both overwritten; adds the parameter
  /// gradients. For self-attention pass the same matrix twice (&dx_q == &dx_kv): the query and
  /// key/value contributions are then summed into it.
  void backward(const Mat& dy, const Mat& x_q, const Mat& x_kv, const Packing& q_rows,
                const Packing& kv_rows, const AttentionCache& cache, Mat& dx_q,
                Mat& dx_kv) const;

  /// Keys k = x_kv·W_kᵀ + b_k and values v = x_kv·W_vᵀ + b_v, x_kv [N, D] → k, v [N, D], into
  /// existing blocks (whole matrices, or the new rows of a key/value cache). Throws ShapeError
  /// on a size mismatch.
  void project_kv(const Eigen::Ref<const Mat>& x_kv, Eigen::Ref<Mat> k, Eigen::Ref<Mat> v) const;

  /// The query side of attention over keys/values already projected by project_kv, shared by
  /// forward and the incremental decoder's cached step: q = x_q·W_qᵀ + b_q into cache.q
  /// [B·Tq, D], the kernel (scaled_dot_product_attention_into: `shape`, `mask`, `drop`) into
  /// probs [B·H·Tq, Tk] (caller-sized) and cache.ctx [B·Tq, D], then y = ctx·W_oᵀ + b_o
  /// [B·Tq, D]. Throws ShapeError on a size mismatch.
  void attend(const Eigen::Ref<const Mat>& x_q, const Mat& k, const Mat& v,
              const AttentionShape& shape, const AttentionMask& mask, const Mat& drop,
              AttentionCache& cache, Eigen::Ref<Mat> probs, Mat& y) const;

  int n_heads() const { return n_heads_; }
  Linear q_proj, k_proj, v_proj, out_proj;

 private:
  int n_heads_;
};

}  // namespace anuvad
