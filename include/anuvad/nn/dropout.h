// Dropout randomness as a pure function of where a multiplier sits (issue #17): counter-based
// generation (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3", SC'11 — hash
// the coordinates instead of drawing from a sequential stream) with SplitMix64's mixing
// function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators",
// OOPSLA; the constants of Vigna's splitmix64.c). Every multiplier depends only on (seed,
// update step, the sentence's index in the global batch, the dropout site, its coordinates in
// the sentence), so the masks of a data-parallel update do not depend on the rank count, the
// shard cut, the thread count or where a sentence sits in a packed batch.
#pragma once

#include <cstdint>

#include "anuvad/core/tensor.h"
#include "anuvad/nn/batch.h"

namespace anuvad {

/// SplitMix64's output function (Steele et al. 2014): a bijective, well-mixed 64-bit hash of
/// x + γ (γ = 2^64/φ), i.e. the generator's output at state x.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A key derived from `key` and one more coordinate `id` (a site, a sentence, a row).
constexpr uint64_t derive_key(uint64_t key, uint64_t id) { return splitmix64(key ^ splitmix64(id)); }

/// Dropout sites: the path of DropoutContext::site ids that names one dropout of the model.
namespace dropout_site {
constexpr uint64_t kSrcWords = 1;        ///< source word dropout (ModelConfig::dropout_src)
constexpr uint64_t kTgtWords = 2;        ///< target input word dropout (ModelConfig::dropout_trg)
constexpr uint64_t kSrcEmbedding = 3;    ///< dropout on the source embeddings (+ positions)
constexpr uint64_t kTgtEmbedding = 4;    ///< dropout on the target embeddings (+ positions)
constexpr uint64_t kEncoderLayer = 5;    ///< then the layer index, then one of the below
constexpr uint64_t kDecoderLayer = 6;    ///< then the layer index, then one of the below
constexpr uint64_t kSelfAttnResidual = 7;
constexpr uint64_t kSelfAttnWeights = 8;
constexpr uint64_t kCrossAttnResidual = 9;
constexpr uint64_t kCrossAttnWeights = 10;
constexpr uint64_t kFfnResidual = 11;
constexpr uint64_t kFfnHidden = 12;
constexpr uint64_t kTwinPass = 13;       ///< above every other: R-Drop's second pass (twin())
constexpr uint64_t kLayerDrop = 14;      ///< a layer's draw under layer dropout (with_layer_drop)
}  // namespace dropout_site

/// Dropout switch and coordinates passed down a forward pass: inactive (inference) when
/// default-constructed. An active context names the update (seed, step), the site (a path of
/// ids, see dropout_site), the global batch index of the batch's sentence 0 and the row layout
/// (`rows`) of the activations it masks.
class DropoutContext {
 public:
  DropoutContext() = default;
  /// Training at update `step` of a run seeded with `seed`: sentence b of the batch is
  /// sentence first_sentence + b of the update's global batch (a shard of it starts at its
  /// first sentence's index).
  static DropoutContext training(uint64_t seed, int64_t step, int64_t first_sentence = 0);
  bool active() const { return active_; }
  /// The context of the sub-batch that starts at this batch's sentence b (its sentence 0 is
  /// sentence first_sentence + b of the global batch): the same masks, whatever the cut.
  DropoutContext from_sentence(int64_t b) const {
    DropoutContext c = *this;
    c.first_sentence_ += b;
    return c;
  }
  /// The context of a second, independent pass over the same sentences (R-Drop's twin,
  /// nn/loss.h rdrop_loss): every mask drawn from another key, the same whatever the cut.
  DropoutContext twin() const { return site(dropout_site::kTwinPass); }
  /// The same context one level down the site path (a layer, then one of its dropouts).
  DropoutContext site(uint64_t id) const;
  /// The context of a layer's residual branches under layer dropout (ModelConfig::
  /// layer_dropout): every mask make_dropout_mask draws from it (or from its sites) is also
  /// multiplied, per sentence, by 0 with probability p, else 1/(1−p), a function of this
  /// context's key and the sentence's global index only, so one draw decides all the layer's
  /// branches (stochastic depth per sentence, Huang et al. 2016; LayerDrop, Fan et al. 2019).
  /// p = 0: unchanged.
  DropoutContext with_layer_drop(Scalar p) const;
  Scalar layer_drop() const { return layer_drop_; }
  /// The layer-dropout multiplier of the batch's sentence b: 0 or 1/(1−p) (1 without).
  Scalar layer_keep(int b) const;
  /// The same context for activations whose rows are laid out as `rows` (kept by pointer:
  /// `rows` must outlive the context's uses).
  DropoutContext over(const Packing& rows) const;
  /// The row layout set by over(), or nullptr.
  const Packing* rows() const { return rows_; }
  /// The key of the batch's sentence b at this site (b-th of the batch, global index
  /// first_sentence + b).
  uint64_t sentence_key(int b) const { return derive_key(key_, static_cast<uint64_t>(first_sentence_ + b)); }

 private:
  bool active_ = false;
  uint64_t key_ = 0;
  int64_t first_sentence_ = 0;
  const Packing* rows_ = nullptr;
  Scalar layer_drop_ = 0;   ///< with_layer_drop's p
  uint64_t layer_key_ = 0;  ///< derive_key(key, kLayerDrop) of the context with_layer_drop was called on
};

/// Inverted-dropout multipliers (Srivastava et al. 2014) of token rows laid out as ctx.rows():
/// mask [Σ lengths, cols], element (rows.offsets[b] + t, c) = 0 with probability p, else
/// 1/(1−p), a function of (ctx.sentence_key(b), t, c) only, times sentence b's
/// ctx.layer_keep(b). Leaves `mask` empty when `ctx` is inactive or p == 0 without layer
/// dropout, which callers read as "identity". With cols = 1 it is a per-token mask (word
/// dropout). Throws ShapeError when an active context has no rows.
void make_dropout_mask(Index cols, Scalar p, const DropoutContext& ctx, Mat& mask);

/// Attention-weight multipliers for queries laid out as q_rows: mask [B·H·Tq, n_keys]
/// (Tq = q_rows.max_length), row (b·H + h)·Tq + q, column k: 0 with probability p, else
/// 1/(1−p), a function of (ctx.sentence_key(b), h, q, k) only; rows q ≥ the length of
/// sentence b (never read) are 1. Empty when `ctx` is inactive or p == 0.
void make_attention_dropout_mask(const Packing& q_rows, int n_heads, Index n_keys, Scalar p,
                                 const DropoutContext& ctx, Mat& mask);

}  // namespace anuvad
