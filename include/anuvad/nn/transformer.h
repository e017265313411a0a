// The encoder–decoder transformer (Vaswani et al. 2017): layers, the teacher-forced forward and
// backward used in training, and the incremental decoder with a key/value cache used in
// translation. Both decoder paths run the same layers and the same attention kernel, so the
// logits of a prefix agree whether computed in one teacher-forced pass or step by step.
//
// Shapes: B sentences, S source tokens, T target tokens (padded), D = d_model, V = target
// vocabulary. Activations are row-major [B·S, D] / [B·T, D], row b·T + t.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "anuvad/nn/attention.h"
#include "anuvad/nn/batch.h"
#include "anuvad/nn/config.h"
#include "anuvad/nn/layers.h"

namespace anuvad {

/// Cache of one encoder layer's forward pass.
struct EncoderLayerCache {
  ResidualCache self_attn_res, ffn_res;
  AttentionCache self_attn;
  FeedForwardCache ffn;
};

/// Encoder layer: self-attention (key padding only, never causal), then feed-forward, each in
/// a residual sublayer (§3.1). Parameters under "<prefix>.{self_attn,self_attn_norm,ffn,ffn_norm}".
class EncoderLayer {
 public:
  EncoderLayer(ParamRegistry& reg, const std::string& prefix, const ModelConfig& cfg);
  /// x: [Ns, D] → y: [Ns, D], the source rows packed as src_rows (Ns = Σ source lengths).
  void forward(const Mat& x, const Packing& src_rows, const DropoutContext& dctx,
               EncoderLayerCache& cache, Mat& y) const;
  /// dy: [Ns, D] → dx: [Ns, D] (overwritten); accumulates parameter gradients.
  void backward(const Mat& dy, const Packing& src_rows, const EncoderLayerCache& cache,
                Mat& dx) const;

  MultiHeadAttention self_attn;
  FeedForward ffn;
  LayerNorm self_attn_norm, ffn_norm;

 private:
  const ModelConfig& cfg_;
};

/// Cache of one decoder layer's teacher-forced forward pass (also the sublayer scratch of an
/// incremental step, see DecoderWorkspace).
struct DecoderLayerCache {
  ResidualCache self_attn_res, cross_attn_res, ffn_res;
  AttentionCache self_attn, cross_attn;
  FeedForwardCache ffn;
};

struct DecoderLayerState;
struct DecoderState;
struct DecoderWorkspace;

/// Decoder layer: masked (causal) self-attention, cross-attention over `memory` (source key
/// padding only, not causal), feed-forward (§3.1). Parameters under
/// "<prefix>.{self_attn,self_attn_norm,cross_attn,cross_attn_norm,ffn,ffn_norm}".
/// One class for both decoder paths (as CTranslate2's TransformerDecoderLayer): the
/// teacher-forced `forward` over whole target sequences and the cached incremental `step`
/// run the same sublayer code, the step with keys/values from a cache and no dropout.
class DecoderLayer {
 public:
  DecoderLayer(ParamRegistry& reg, const std::string& prefix, const ModelConfig& cfg);
  /// x: [Nt, D] packed as tgt_rows, memory: [Ns, D] packed as src_rows → y: [Nt, D].
  void forward(const Mat& x, const Mat& memory, const Packing& tgt_rows, const Packing& src_rows,
               const DropoutContext& dctx, DecoderLayerCache& cache, Mat& y) const;
  /// dy: [Nt, D] → dx: [Nt, D] (overwritten); adds dL/dmemory into dmemory [Ns, D].
  void backward(const Mat& dy, const Mat& memory, const Packing& tgt_rows,
                const Packing& src_rows, const DecoderLayerCache& cache, Mat& dx,
                Mat& dmemory) const;

  /// Starts incremental decoding: cross-attention keys/values of memory [Ns, D] (packed)
  /// projected once into cache.cross_k/cross_v [Ns, D], and an all-zero self-attention cache of
  /// rows·capacity rows (rows = B·beam_size hypotheses).
  void begin_decoding(const Mat& memory, int rows, int capacity, DecoderLayerState& cache) const;
  /// One incremental step of the rows r0..r0+n−1 of `st`, one new token per row at absolute
  /// position st.length: ws.x [n, D] (the layer input) → ws.x (the layer output). The rows'
  /// self-attention keys/values are appended to st.layers[layer] (row b·capacity + length of
  /// each row b) and the query attends to the cached keys 0..length; cross-attention reads
  /// the cached memory projections. The rows' attention weights go to
  /// st.last_self_probs[layer] / st.last_cross_probs[layer] (rows b·H + h). Blocks of
  /// disjoint rows may run in parallel. Throws ShapeError on a size mismatch.
  void step(DecoderState& st, size_t layer, int r0, int n, DecoderWorkspace& ws) const;

  MultiHeadAttention self_attn, cross_attn;
  FeedForward ffn;
  LayerNorm self_attn_norm, cross_attn_norm, ffn_norm;

 private:
  /// The three residual sublayers (§3.1), written once for forward and step: x → h1 by
  /// self-attention (`self_fn`), h1 → h2 by cross-attention (`cross_fn`), h2 → y by the
  /// feed-forward network; all [N, D]. Dropout and norm placement as the config says.
  void sublayers(const Mat& x, const SublayerForward& self_fn, const SublayerForward& cross_fn,
                 const DropoutContext& dctx, DecoderLayerCache& cache, Mat& h1, Mat& h2,
                 Mat& y) const;

  const ModelConfig& cfg_;
};

/// Everything the teacher-forced forward pass keeps for backward (and attention dumps).
struct ForwardCache {
  /// Inference only (set before encode): the encoder keeps one layer's activations at a time
  /// and, per layer, only the attention weights (enc[l].self_attn.probs, for attention dumps);
  /// backward is then impossible. Cuts the encoder's peak memory by a factor of its depth.
  bool inference = false;
  EncoderLayerCache enc_scratch;       ///< the reused layer cache when `inference`
  Mat src_embed_drop, tgt_embed_drop;  ///< embedding dropout multipliers or empty
  Mat src_word_drop, tgt_word_drop;    ///< [Ns, 1] / [Nt, 1] word dropout multipliers or empty
  std::vector<Mat> enc_x;              ///< [L_enc + 1] inputs of each encoder layer, then output
  std::vector<EncoderLayerCache> enc;
  LayerNormCache enc_norm;
  Mat memory;                          ///< [Ns, D] encoder output, packed as the source rows
  std::vector<Mat> dec_x;              ///< [L_dec + 1] inputs of each decoder layer, then output
  std::vector<DecoderLayerCache> dec;
  LayerNormCache dec_norm;
  Mat dec_out;                         ///< [Nt, D] input of the output projection (packed)
};

/// Key/value cache of one decoder layer for incremental decoding.
struct DecoderLayerState {
  Mat self_k, self_v;    ///< [B·capacity, D]; rows b·capacity + t, t < DecoderState::length
  Mat cross_k, cross_v;  ///< [Ns, D] projected once from memory (packed as DecoderState::src_rows)
};

/// Scratch buffers of one block of decoder rows in decode_step, reused every step so that the
/// per-token loop does not allocate (n = rows of the block).
struct DecoderWorkspace {
  TokenIds tokens;          ///< [n] the block's input tokens
  Mat x, y;                 ///< [n, D] input and output of the current layer (swapped)
  Mat h1, h2;               ///< [n, D] outputs of the self- and cross-attention sublayers
  Mat out;                  ///< [n, D] final LayerNorm output (pre-norm)
  DecoderLayerCache layer;  ///< sublayer scratch (queries, contexts, FFN hidden [n, d_ff], ...)
  LayerNormCache ln;        ///< of the final LayerNorm
};

/// State of the incremental decoder: `batch` rows (hypotheses) decoded in lockstep, row r
/// belonging to source sentence row_source[r] (beam search has beam_size rows per sentence).
struct DecoderState {
  int batch_size = 0;     ///< rows = sentences × beam_size
  int capacity = 0;  ///< maximum target positions (BOS included)
  int length = 0;    ///< tokens already fed = absolute position of the next token
  int src_len = 0;   ///< S, the longest source
  Packing src_rows;  ///< the sentences' rows in memory and in the cross-attention K/V
  std::vector<int> src_lengths;  ///< [rows] real source tokens of each row's sentence
  std::vector<int> row_source;   ///< [rows] sentence of each row (index into src_rows)
  /// Reorders the self-attention cache for beam search: new row r continues old row
  /// parents[r] (rows are gathered; cross-attention K/V stay shared per sentence).
  /// Throws ShapeError when a parent belongs to another sentence.
  void select_rows(const std::vector<int>& parents);
  /// Drops every row not in `keep` (old row indices, strictly increasing): new row j continues
  /// old row keep[j], and batch_size becomes keep.size(). The self-attention cache rows move up
  /// in place (positions 0..length−1; no allocation); the cross-attention K/V stay where they
  /// are, read through row_source. Decoding stops spending work on finished sentences this way
  /// (as CTranslate2 removes finished batch entries). Throws ShapeError on an index outside
  /// [0, batch_size) or out of order.
  void keep_rows(const std::vector<int>& keep);
  std::vector<DecoderLayerState> layers;
  /// Attention weights of the last step, per layer: self [B·H, length], cross [B·H, S].
  std::vector<Mat> last_self_probs, last_cross_probs;
  /// One workspace per block of rows that decode_step runs in parallel.
  std::vector<DecoderWorkspace> workspaces;
  /// [B·capacity, D] buffer that select_rows gathers into (swapped with the cache, reused).
  Mat gather_scratch;
};

/// Told by Transformer::backward, after each part (the output projection, a LayerNorm, a layer,
/// an embedding), that every parameter at registry index >= `first_final` (ParamRegistry
/// order) now has its final gradient. The backward pass runs the parts in reverse registration
/// order, so `first_final` only decreases, down to 0 after the source embedding. Data-parallel
/// training (train/replicas.h) starts sending gradients from there.
using GradientsFinal = std::function<void(size_t first_final)>;

/// The encoder–decoder model. Parameters (PyTorch state_dict names):
///   encoder.embed_tokens.weight [V_src, D], encoder.layers.i.*, encoder.norm.* (pre-norm),
///   decoder.embed_tokens.weight [V_tgt, D], decoder.layers.i.*, decoder.norm.* (pre-norm),
///   output_projection.weight [V_tgt, D] (untied only), output_projection.bias [V_tgt].
class Transformer {
 public:
  /// Registers all parameters (zero; call init_parameters or load them). Throws ConfigError.
  explicit Transformer(const ModelConfig& cfg);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  /// Xavier-uniform matrices, N(0, D^−½) embeddings, zero biases, unit LayerNorm gains.
  void init_parameters(uint64_t seed);

  /// Precision of the weight matrices translation reads (core/bf16.h). kBfloat16 rounds to
  /// bfloat16 (round-to-nearest-even) every Linear weight of the encoder and the decoder
  /// (self-attention Q/K/V/out, cross-attention Q/K/V/out, feed-forward) and the output
  /// projection (the target embedding when tied, whose rows are then looked up in bfloat16 too)
  /// and frees their float32 copies, so the model holds less memory; their products run
  /// bf16_affine. Biases, LayerNorms, the source embedding and an untied target embedding stay
  /// float32. Where bf16_affine uses oneDNN, the weights multiplied once per sentence (the
  /// encoder's, the cross-attention K/V projections) are held only in oneDNN's packed layout
  /// (pack_for_onednn_only). kFloat32 widens them back (the rounded values stay rounded).
  /// kInt8 quantizes the same matrices per output row (core/int8.h, to_int8; the tied target
  /// embedding's rows are then looked up dequantized) and frees their float32 copies; their
  /// products run int8_affine. Converting from one of bfloat16 / int8 to the other goes through
  /// the float32 values the first stood for.
  /// kAuto stands for auto_compute_type(product_weight_bytes()), and compute_type() then
  /// returns what it stood for.
  /// For translation and scoring only: backward then throws ShapeError and a bfloat16 or int8
  /// model cannot be saved. Throws nothing itself but bad_alloc, or ConfigError if oneDNN fails (then
  /// some weights may be converted and others not: discard the model).
  void set_compute_type(ComputeType type);
  ComputeType compute_type() const { return compute_type_; }
  /// float32 bytes of the weight matrices set_compute_type converts (4 per value).
  int64_t product_weight_bytes() const;

  const ModelConfig& config() const { return cfg_; }
  ParamRegistry& params() { return params_; }
  const ParamRegistry& params() const { return params_; }

  /// Encoder: src [Ns] packed as src_rows (nn/batch.h) → cache.memory [Ns, D]. Only real
  /// tokens are computed (no padding rows). Throws ShapeError on a size mismatch.
  void encode(const TokenIds& src, const Packing& src_rows, const DropoutContext& dctx,
              ForwardCache& cache) const;
  /// Teacher-forced decoder over cache.memory (packed as src_rows): tgt_in [Nt] packed as
  /// tgt_rows → logits [Nt, V], row tgt_rows.offsets[b] + t for target position t of sentence b.
  void decoder_forward(const TokenIds& tgt_in, const Packing& tgt_rows, const Packing& src_rows,
                       const DropoutContext& dctx, ForwardCache& cache, Mat& logits) const;
  /// encode + decode for a packed batch: logits [Nt, V] (rows as batch.tgt_out). An active
  /// `dctx` (DropoutContext::training) turns on every dropout of the config, each masked at its
  /// own site (nn/dropout.h: sentence b of the batch is sentence first_sentence + b of the
  /// global batch), word dropout (dropout_src / dropout_trg) included; inactive = none.
  void forward(const Batch& batch, const DropoutContext& dctx, ForwardCache& cache,
               Mat& logits) const;
  /// dlogits [Nt, V] → accumulates every parameter gradient (call params().zero_grad() first),
  /// calling `final` (when set) after each part (GradientsFinal). Throws ShapeError when the
  /// cache was filled with `inference` set.
  void backward(const Batch& batch, const Mat& dlogits, const ForwardCache& cache,
                const GradientsFinal& final = {}) const;

  /// Starts incremental decoding over memory [Ns, D] packed as src_rows (as encode leaves it):
  /// projects cross-attention K/V once per layer and sentence, and allocates the
  /// self-attention cache of B·beam_size rows for `capacity` target positions.
  DecoderState begin_decoding(const Mat& memory, const Packing& src_rows, int capacity,
                              int beam_size = 1) const;
  /// Feeds one token per row (tokens [B], at absolute position state.length) and returns
  /// logits [B, V] for the next token. Rows are independent, so blocks of rows run in parallel
  /// (one OpenMP thread each, single-threaded Eigen inside) when there are enough of them;
  /// otherwise the step runs on one StepTeam (core/step_team.h) on which its large products
  /// split their output columns. A step allocates nothing once the workspaces have grown.
  /// Throws ShapeError when the cache is full or a token id is outside [0, V).
  void decode_step(const std::vector<int32_t>& tokens, DecoderState& state, Mat& logits) const;

 private:
  /// logits [N, V] = h [N, D]·Wᵀ + bias (W: the output projection or the tied embedding).
  void output_projection(const Eigen::Ref<const Mat>& h, Eigen::Ref<Mat> logits) const;
  /// decode_step for rows r0..r0+n−1, writing their logits rows and cache rows.
  void decode_rows(const std::vector<int32_t>& tokens, DecoderState& state, int r0, int n,
                   DecoderWorkspace& ws, Mat& logits) const;

  /// The parameters set_compute_type converts: every Linear weight and the output projection;
  /// the first per_step_weights() of them are read every decoding step, the others once per
  /// sentence (the encoder's, the cross-attention K/V projections).
  std::vector<Param*> product_weights();
  size_t per_step_weights() const { return decoder_.size() * 8 + 1; }

  ModelConfig cfg_;
  ComputeType compute_type_ = ComputeType::kFloat32;
  ParamRegistry params_;
  std::unique_ptr<Embedding> src_embed_, tgt_embed_;
  std::vector<EncoderLayer> encoder_;
  std::vector<DecoderLayer> decoder_;
  std::unique_ptr<LayerNorm> enc_norm_, dec_norm_;
  Param* out_weight_ = nullptr;  // tgt embedding when tied
  Param* out_bias_ = nullptr;
  /// Registry index of the first parameter of each part (for GradientsFinal).
  struct FirstParams {
    std::vector<size_t> encoder, decoder;  ///< per layer
    size_t enc_norm = 0, tgt_embed = 0, dec_norm = 0, output = 0;
  } first_;
};

}  // namespace anuvad
