// Building blocks of the transformer: Linear, LayerNorm, position-wise FeedForward, token
// embedding with sinusoidal positions, dropout, and the residual wrapper with pre-/post-norm.
// Every layer has forward and a hand-written backward side by side (src/nn/layers.cpp). Forward is
// const and writes what backward needs into a caller-owned cache; backward accumulates (+=)
// parameter gradients into the ParamRegistry and returns the input gradient.
// Shapes: N = number of rows (tokens, B·T), D = d_model, F = d_ff, V = vocabulary size.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "anuvad/nn/batch.h"
#include "anuvad/nn/dropout.h"
#include "anuvad/nn/param.h"
#include "anuvad/core/tensor.h"

namespace anuvad {

using Rng = std::mt19937_64;

/// y = x·Wᵀ + b into an existing block: x [N, in], w [out, in], b [1, out], y [N, out], through
/// core/gemm.h (OpenBLAS for N >= 16 rows, rows split across the threads; Eigen below). Throws ShapeError on a
/// mismatch.
void affine_into(const Eigen::Ref<const Mat>& x, const Mat& w, const Mat& b, Eigen::Ref<Mat> y);
/// y = x·Wᵀ + b with W held as `weight` holds it: float32 (affine_into), bfloat16 (bf16_affine,
/// core/bf16.h) or int8 (int8_affine, core/int8.h). x: [N, in], weight: [out, in], b: [1, out],
/// y: [N, out]. The one dispatch on the weight's type, for Linear and the output projection.
/// Throws ShapeError on a mismatch.
void param_affine(const Eigen::Ref<const Mat>& x, const Param& weight, const Mat& b, Eigen::Ref<Mat> y);
/// Backward of y = x·Wᵀ + b: dw [out, in] += dyᵀ·x, db [1, out] += Σ_rows dy, and dx [N, in]
/// = dy·W (resized; added instead when `accumulate`), through core/gemm.h. Throws ShapeError on
/// a mismatch.
void affine_backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x,
                     const Mat& w, Mat& dw, Mat& db, Mat& dx, bool accumulate);

/// Fully connected layer y = x·Wᵀ + b (PyTorch nn.Linear). Parameters "<prefix>.weight"
/// [out, in] and "<prefix>.bias" [out]. When the weight is held in bfloat16 (Param::bf16, set for
/// decoding by Transformer::set_compute_type), forward runs bf16_affine (core/bf16.h); in int8
/// (Param::int8), int8_affine (core/int8.h); backward then throws ShapeError (training stays
/// float32).
class Linear {
 public:
  Linear(ParamRegistry& reg, const std::string& prefix, Index in_features, Index out_features);
  /// x: [N, in] → y: [N, out] (y is resized). Throws ShapeError if x.cols() != in.
  void forward(const Eigen::Ref<const Mat>& x, Mat& y) const;
  /// As forward, into an existing [N, out] block (e.g. rows of a larger matrix).
  /// Throws ShapeError on any size mismatch.
  void forward_into(const Eigen::Ref<const Mat>& x, Eigen::Ref<Mat> y) const;
  /// dy: [N, out], x: the forward input [N, in]. Adds dW += dyᵀ·x, db += Σ_rows dy;
  /// writes dx = dy·W [N, in] (overwritten, or added when `accumulate`).
  void backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x, Mat& dx,
                bool accumulate = false) const;
  Param& weight;
  Param& bias;
};

/// Cache of LayerNorm::forward read by backward.
struct LayerNormCache {
  Mat x_hat;  ///< [N, D] normalised input
  Eigen::Matrix<Scalar, Eigen::Dynamic, 1> rstd;  ///< [N] 1/sqrt(var + eps)
};

/// Layer normalisation over features (Ba et al. 2016, arXiv:1607.06450):
/// y = γ ⊙ (x − mean)·rstd + β with the biased variance, as torch.nn.LayerNorm.
/// Parameters "<prefix>.weight" (γ) [D] and "<prefix>.bias" (β) [D].
class LayerNorm {
 public:
  LayerNorm(ParamRegistry& reg, const std::string& prefix, Index d_model, Scalar eps);
  /// x: [N, D] → y: [N, D]; fills cache.
  void forward(const Eigen::Ref<const Mat>& x, Mat& y, LayerNormCache& cache) const;
  /// dy: [N, D] → dx: [N, D] (overwritten); adds dγ, dβ.
  void backward(const Eigen::Ref<const Mat>& dy, const LayerNormCache& cache, Mat& dx) const;
  Param& gamma;
  Param& beta;

 private:
  Scalar eps_;
};

/// Cache of FeedForward::forward.
struct FeedForwardCache {
  Mat hidden;  ///< [N, F] ReLU output, before FFN dropout
  Mat drop;    ///< [N, F] FFN dropout multipliers, or empty
  Mat hidden_dropped;  ///< [N, F] input of linear2 (== hidden when no dropout)
};

/// Position-wise feed-forward network FFN(x) = max(0, x·W1ᵀ + b1)·W2ᵀ + b2
/// (Vaswani et al. 2017, Eq. 2), with optional dropout on the hidden activation.
/// Parameters "<prefix>.linear1.*" [F, D] and "<prefix>.linear2.*" [D, F].
class FeedForward {
 public:
  FeedForward(ParamRegistry& reg, const std::string& prefix, Index d_model, Index d_ff);
  /// x: [N, D] → y: [N, D]. The hidden activation's dropout (rate ffn_dropout) has the site
  /// dctx.site(dropout_site::kFfnHidden) and the rows dctx.rows() (those of x). Throws
  /// ShapeError when an active dctx's rows do not match x.
  void forward(const Eigen::Ref<const Mat>& x, Scalar ffn_dropout, const DropoutContext& dctx,
               FeedForwardCache& cache, Mat& y) const;
  /// dy: [N, D], x: forward input → dx: [N, D] (overwritten).
  void backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x,
                const FeedForwardCache& cache, Mat& dx) const;
  Linear linear1;
  Linear linear2;
};

/// Token embedding scaled by √D plus sinusoidal positions (Vaswani et al. 2017 §3.4, §3.5):
/// out[r] = E[id_r]·√D + PE[pos_r], PE[p, 2i] = sin(p/10000^(2i/D)), PE[p, 2i+1] = cos(...).
/// Parameter "<prefix>.weight" [V, D]; its rows are read from Param::bf16 or Param::int8
/// (dequantized) when the weight is held in bfloat16 or int8 (a tied output projection,
/// Transformer::set_compute_type).
class Embedding {
 public:
  Embedding(ParamRegistry& reg, const std::string& prefix, Index vocab_size, Index d_model,
            Index max_positions);
  /// ids: [B·T] (row b·T + t has position first_position + t) → out [B·T, D]. The sinusoids
  /// are computed per call for the T positions (T·D sin/cos), never tabulated up to
  /// max_positions. Throws ShapeError on an id outside [0, V) or a position ≥ max_positions.
  void forward(const TokenIds& ids, int batch, int len, int first_position, Mat& out) const;
  /// Packed sequences: ids [Σ lengths] laid out as `rows` (nn/batch.h), row rows.offsets[b] + t
  /// at position t → out [Σ lengths, D]. With `word_drop` ([Σ lengths, 1] multipliers m_r, see
  /// make_dropout_mask; empty = none): out[r] = m_r·E[id_r]·√D + PE[pos_r], word dropout
  /// (Sennrich et al. 2016, "Edinburgh NMT systems for WMT16" §2; Marian's --dropout-src/-trg):
  /// a dropped token's embedding vector is zero, its position signal stays. Throws as above,
  /// and ShapeError when word_drop is not [Σ lengths, 1].
  void forward(const TokenIds& ids, const Packing& rows, Mat& out, const Mat& word_drop = Mat()) const;
  /// Adds dE[id_r] += dout[r]·√D·m_r for every row r (m_r = word_drop(r), or 1 when it is empty).
  void backward(const Eigen::Ref<const Mat>& dout, const TokenIds& ids, const Mat& word_drop = Mat()) const;
  Index vocab_size() const { return weight.rows(); }
  Param& weight;

 private:
  /// dst [D] = E[id]·scale + pe (dst may be pe itself), E read in float32 or bfloat16.
  void add_row(int32_t id, Scalar scale, const Scalar* pe, Scalar* dst) const;
  /// The rows of B sequences, sequence b of length_of(b) at row offset_of(b), positions
  /// first_position.., the longest sequence `longest` of `max_len` tokens; row r's embedding
  /// scaled by word_drop[r] too when word_drop is not null.
  template <typename LengthOf, typename OffsetOf>
  void embed_rows(const TokenIds& ids, int batch, LengthOf length_of, OffsetOf offset_of,
                  int longest, int max_len, int first_position, const Scalar* word_drop,
                  Mat& out) const;

  Index max_positions_;
  std::vector<double> wavelength_divisors_;  // [⌈D/2⌉] 10000^(2i/D)
  Scalar scale_;
};

/// Cache of one residual sublayer.
struct ResidualCache {
  LayerNormCache ln;
  Mat f_in;   ///< [N, D] input of the sublayer function (LN(x) for pre-norm, x for post-norm)
  Mat f_out;  ///< [N, D] sublayer output before dropout
  Mat drop;   ///< [N, D] residual dropout multipliers, or empty
  Mat sum;    ///< [N, D] post-norm only: x + dropout(f(x)), the LayerNorm input
};

/// Sublayer function: (input [N, D]) → output [N, D].
using SublayerForward = std::function<void(const Mat& in, Mat& out)>;
/// Sublayer backward: (d output [N, D]) → d input [N, D] (overwritten).
using SublayerBackward = std::function<void(const Mat& dout, Mat& din)>;

/// Residual connection around f with layer norm, Vaswani et al. 2017 §5.4 and §3.1:
///   post-norm: y = LN(x + Dropout(f(x)));  pre-norm (Wang et al. 2019): y = x + Dropout(f(LN(x))).
/// The dropout (rate `dropout`) has the site and rows of `dctx` (make_dropout_mask); throws
/// ShapeError when an active dctx's rows do not match x [N, D].
void residual_forward(const Mat& x, const LayerNorm& ln, bool pre_norm, Scalar dropout,
                      const DropoutContext& dctx, const SublayerForward& f, ResidualCache& cache,
                      Mat& y);
/// dy: [N, D] → dx: [N, D] (overwritten); calls fb for the sublayer's own backward.
void residual_backward(const Mat& dy, const LayerNorm& ln, bool pre_norm,
                       const SublayerBackward& fb, const ResidualCache& cache, Mat& dx);

}  // namespace anuvad
