// Encoder and decoder layers, the teacher-forced forward/backward pass and the incremental
// decoder with its key/value cache.
#include "anuvad/nn/transformer.h"

#include <omp.h>

#include <cmath>
#include <exception>
#include <utility>

#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/step_team.h"

namespace anuvad {

namespace {

Scalar sc(double v) { return static_cast<Scalar>(v); }

void apply_dropout(Mat& x, const Mat& mask) {
  if (mask.size() > 0) x.array() *= mask.array();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// EncoderLayer

EncoderLayer::EncoderLayer(ParamRegistry& reg, const std::string& prefix, const ModelConfig& cfg)
    : self_attn(reg, prefix + ".self_attn", cfg.d_model, cfg.n_heads),
      ffn(reg, prefix + ".ffn", cfg.d_model, cfg.d_ff),
      self_attn_norm(reg, prefix + ".self_attn_norm", cfg.d_model, sc(cfg.layer_norm_eps)),
      ffn_norm(reg, prefix + ".ffn_norm", cfg.d_model, sc(cfg.layer_norm_eps)),
      cfg_(cfg) {}

void EncoderLayer::forward(const Mat& x, const Packing& src_rows, const DropoutContext& dctx,
                           EncoderLayerCache& cache, Mat& y) const {
  namespace site = dropout_site;
  const DropoutContext d = dctx.over(src_rows);
  const DropoutContext weights = d.site(site::kSelfAttnWeights);
  const DropoutContext residual = d.with_layer_drop(sc(cfg_.layer_dropout));  // both branches
  Mat h;
  residual_forward(
      x, self_attn_norm, cfg_.pre_norm(), sc(cfg_.dropout), residual.site(site::kSelfAttnResidual),
      [&](const Mat& in, Mat& out) {
        self_attn.forward(in, in, src_rows, src_rows, /*causal=*/false,
                          sc(cfg_.attention_dropout), weights, cache.self_attn, out);
      },
      cache.self_attn_res, h);
  residual_forward(
      h, ffn_norm, cfg_.pre_norm(), sc(cfg_.dropout), residual.site(site::kFfnResidual),
      [&](const Mat& in, Mat& out) { ffn.forward(in, sc(cfg_.ffn_dropout), d, cache.ffn, out); },
      cache.ffn_res, y);
}

void EncoderLayer::backward(const Mat& dy, const Packing& src_rows,
                            const EncoderLayerCache& cache, Mat& dx) const {
  Mat dh;
  residual_backward(
      dy, ffn_norm, cfg_.pre_norm(),
      [&](const Mat& dout, Mat& din) { ffn.backward(dout, cache.ffn_res.f_in, cache.ffn, din); },
      cache.ffn_res, dh);
  residual_backward(
      dh, self_attn_norm, cfg_.pre_norm(),
      [&](const Mat& dout, Mat& din) {
        const Mat& in = cache.self_attn_res.f_in;
        self_attn.backward(dout, in, in, src_rows, src_rows, cache.self_attn, din, din);
      },
      cache.self_attn_res, dx);
}

// ---------------------------------------------------------------------------------------------
// DecoderLayer

DecoderLayer::DecoderLayer(ParamRegistry& reg, const std::string& prefix, const ModelConfig& cfg)
    : self_attn(reg, prefix + ".self_attn", cfg.d_model, cfg.n_heads),
      cross_attn(reg, prefix + ".cross_attn", cfg.d_model, cfg.n_heads),
      ffn(reg, prefix + ".ffn", cfg.d_model, cfg.d_ff),
      self_attn_norm(reg, prefix + ".self_attn_norm", cfg.d_model, sc(cfg.layer_norm_eps)),
      cross_attn_norm(reg, prefix + ".cross_attn_norm", cfg.d_model, sc(cfg.layer_norm_eps)),
      ffn_norm(reg, prefix + ".ffn_norm", cfg.d_model, sc(cfg.layer_norm_eps)),
      cfg_(cfg) {}

void DecoderLayer::sublayers(const Mat& x, const SublayerForward& self_fn,
                             const SublayerForward& cross_fn, const DropoutContext& dctx,
                             DecoderLayerCache& cache, Mat& h1, Mat& h2, Mat& y) const {
  namespace site = dropout_site;
  const DropoutContext residual = dctx.with_layer_drop(sc(cfg_.layer_dropout));  // all three branches
  residual_forward(x, self_attn_norm, cfg_.pre_norm(), sc(cfg_.dropout),
                   residual.site(site::kSelfAttnResidual), self_fn, cache.self_attn_res, h1);
  residual_forward(h1, cross_attn_norm, cfg_.pre_norm(), sc(cfg_.dropout),
                   residual.site(site::kCrossAttnResidual), cross_fn, cache.cross_attn_res, h2);
  // Captures two pointers, which std::function stores in place: no allocation per step.
  const std::pair<const DropoutContext*, FeedForwardCache*> ffn_args{&dctx, &cache.ffn};
  residual_forward(
      h2, ffn_norm, cfg_.pre_norm(), sc(cfg_.dropout), residual.site(site::kFfnResidual),
      [this, &ffn_args](const Mat& in, Mat& out) {
        ffn.forward(in, sc(cfg_.ffn_dropout), *ffn_args.first, *ffn_args.second, out);
      },
      cache.ffn_res, y);
}

void DecoderLayer::forward(const Mat& x, const Mat& memory, const Packing& tgt_rows,
                           const Packing& src_rows, const DropoutContext& dctx,
                           DecoderLayerCache& cache, Mat& y) const {
  const DropoutContext d = dctx.over(tgt_rows);
  const DropoutContext self_weights = d.site(dropout_site::kSelfAttnWeights);
  const DropoutContext cross_weights = d.site(dropout_site::kCrossAttnWeights);
  Mat h1, h2;
  sublayers(
      x,
      [&](const Mat& in, Mat& out) {
        self_attn.forward(in, in, tgt_rows, tgt_rows, /*causal=*/true,
                          sc(cfg_.attention_dropout), self_weights, cache.self_attn, out);
      },
      [&](const Mat& in, Mat& out) {
        cross_attn.forward(in, memory, tgt_rows, src_rows, /*causal=*/false,
                           sc(cfg_.attention_dropout), cross_weights, cache.cross_attn, out);
      },
      d, cache, h1, h2, y);
}

void DecoderLayer::backward(const Mat& dy, const Mat& memory, const Packing& tgt_rows,
                            const Packing& src_rows, const DecoderLayerCache& cache, Mat& dx,
                            Mat& dmemory) const {
  Mat dh2, dh1;
  residual_backward(
      dy, ffn_norm, cfg_.pre_norm(),
      [&](const Mat& dout, Mat& din) { ffn.backward(dout, cache.ffn_res.f_in, cache.ffn, din); },
      cache.ffn_res, dh2);
  residual_backward(
      dh2, cross_attn_norm, cfg_.pre_norm(),
      [&](const Mat& dout, Mat& din) {
        Mat dmem;
        cross_attn.backward(dout, cache.cross_attn_res.f_in, memory, tgt_rows, src_rows,
                            cache.cross_attn, din, dmem);
        dmemory += dmem;
      },
      cache.cross_attn_res, dh1);
  residual_backward(
      dh1, self_attn_norm, cfg_.pre_norm(),
      [&](const Mat& dout, Mat& din) {
        const Mat& in = cache.self_attn_res.f_in;
        self_attn.backward(dout, in, in, tgt_rows, tgt_rows, cache.self_attn, din, din);
      },
      cache.self_attn_res, dx);
}

void DecoderLayer::begin_decoding(const Mat& memory, int rows, int capacity,
                                  DecoderLayerState& cache) const {
  cache.self_k.setZero(Index(rows) * capacity, cfg_.d_model);
  cache.self_v.setZero(Index(rows) * capacity, cfg_.d_model);
  cache.cross_k.resize(memory.rows(), cfg_.d_model);
  cache.cross_v.resize(memory.rows(), cfg_.d_model);
  cross_attn.project_kv(memory, cache.cross_k, cache.cross_v);
}

namespace {

using CacheRows = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;

/// What the two attention sublayers of one DecoderLayer::step read and write (one object, so
/// that the sublayer functions capture one pointer and std::function does not allocate).
struct CachedAttention {
  const MultiHeadAttention &self_attn, &cross_attn;
  const DecoderLayerState& cache;
  DecoderLayerCache& scratch;
  CacheRows new_k, new_v;  ///< [n, D] rows b·capacity + pos of the self-attention cache
  AttentionShape self_shape, cross_shape;
  AttentionMask self_mask, cross_mask;
  Eigen::Ref<Mat> self_probs, cross_probs;  ///< [n·H, pos + 1], [n·H, S]
  Mat no_dropout;
};

}  // namespace

void DecoderLayer::step(DecoderState& st, size_t layer, int r0, int n, DecoderWorkspace& ws) const {
  const int pos = st.length;  // absolute position of the fed token
  const int H = cfg_.n_heads;
  const Index D = cfg_.d_model;
  DecoderLayerState& cache = st.layers[layer];
  const Index first = (Index(r0) * st.capacity + pos) * D;
  const Eigen::OuterStride<> stride(Index(st.capacity) * D);
  CachedAttention a{self_attn,
                  cross_attn,
                  cache,
                  ws.layer,
                  CacheRows(cache.self_k.data() + first, n, D, stride),
                  CacheRows(cache.self_v.data() + first, n, D, stride),
                  // Masked self-attention over the cache: the query at `pos` sees keys 0..pos.
                  AttentionShape{n, 1, pos + 1, H, st.capacity, nullptr, r0},
                  // Cross-attention over the memory projections of each row's sentence.
                  AttentionShape{n, 1, st.src_len, H, 0, &st.row_source, r0, nullptr,
                                 &st.src_rows},
                  AttentionMask{nullptr, /*causal=*/true, /*query_offset=*/pos},
                  AttentionMask{&st.src_lengths, /*causal=*/false, 0},
                  st.last_self_probs[layer].middleRows(Index(r0) * H, Index(n) * H),
                  st.last_cross_probs[layer].middleRows(Index(r0) * H, Index(n) * H),
                  Mat()};
  sublayers(
      ws.x,
      [&a](const Mat& in, Mat& out) {
        // The new key/value rows go straight into the cache, then the query attends to it.
        a.self_attn.project_kv(in, a.new_k, a.new_v);
        a.self_attn.attend(in, a.cache.self_k, a.cache.self_v, a.self_shape, a.self_mask,
                           a.no_dropout, a.scratch.self_attn, a.self_probs, out);
      },
      [&a](const Mat& in, Mat& out) {
        a.cross_attn.attend(in, a.cache.cross_k, a.cache.cross_v, a.cross_shape, a.cross_mask,
                            a.no_dropout, a.scratch.cross_attn, a.cross_probs, out);
      },
      DropoutContext{}, ws.layer, ws.h1, ws.h2, ws.y);
  ws.x.swap(ws.y);
}

// ---------------------------------------------------------------------------------------------
// Transformer

Transformer::Transformer(const ModelConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
  const auto next = [this] { return params_.params().size(); };
  src_embed_ = std::make_unique<Embedding>(params_, "encoder.embed_tokens", cfg_.src_vocab_size,
                                           cfg_.d_model, cfg_.max_positions);
  encoder_.reserve(cfg_.encoder_layers);
  for (int i = 0; i < cfg_.encoder_layers; ++i) {
    first_.encoder.push_back(next());
    encoder_.emplace_back(params_, "encoder.layers." + std::to_string(i), cfg_);
  }
  first_.enc_norm = next();
  if (cfg_.pre_norm())
    enc_norm_ = std::make_unique<LayerNorm>(params_, "encoder.norm", cfg_.d_model,
                                            sc(cfg_.layer_norm_eps));
  first_.tgt_embed = next();
  tgt_embed_ = std::make_unique<Embedding>(params_, "decoder.embed_tokens", cfg_.tgt_vocab_size,
                                           cfg_.d_model, cfg_.max_positions);
  decoder_.reserve(cfg_.decoder_layers);
  for (int i = 0; i < cfg_.decoder_layers; ++i) {
    first_.decoder.push_back(next());
    decoder_.emplace_back(params_, "decoder.layers." + std::to_string(i), cfg_);
  }
  first_.dec_norm = next();
  if (cfg_.pre_norm())
    dec_norm_ = std::make_unique<LayerNorm>(params_, "decoder.norm", cfg_.d_model,
                                            sc(cfg_.layer_norm_eps));
  first_.output = next();
  out_weight_ = cfg_.tie_output
                    ? &tgt_embed_->weight
                    : &params_.add("output_projection.weight", {cfg_.tgt_vocab_size, cfg_.d_model});
  out_bias_ = &params_.add("output_projection.bias", {cfg_.tgt_vocab_size});
}

void Transformer::init_parameters(uint64_t seed) {
  Rng rng(seed);
  for (Param& p : params_.params()) {
    const bool is_embedding = p.name.find("embed_tokens") != std::string::npos;
    if (is_embedding) {
      normal_init(p.value, sc(1.0 / std::sqrt(double(cfg_.d_model))), rng);
    } else if (p.shape.size() == 2) {
      xavier_uniform(p.value, rng);
    } else if (p.name.find("norm") != std::string::npos && p.name.size() > 7 &&
               p.name.compare(p.name.size() - 7, 7, ".weight") == 0) {
      p.value.setOnes();
    } else {
      p.value.setZero();
    }
  }
}

std::vector<Param*> Transformer::product_weights() {
  std::vector<Param*> w;
  for (DecoderLayer& l : decoder_)
    for (Linear* lin : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj,
                        &l.self_attn.out_proj, &l.cross_attn.q_proj, &l.cross_attn.out_proj,
                        &l.ffn.linear1, &l.ffn.linear2})
      w.push_back(&lin->weight);
  w.push_back(out_weight_);
  // The encoder's and the cross-attention K/V projections run once per sentence, on its source
  // rows: in bfloat16 too they gain the dot-product kernel (measured: small batch 1 +20-45 %).
  for (EncoderLayer& l : encoder_)
    for (Linear* lin : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj,
                        &l.self_attn.out_proj, &l.ffn.linear1, &l.ffn.linear2})
      w.push_back(&lin->weight);
  for (DecoderLayer& l : decoder_)
    for (Linear* lin : {&l.cross_attn.k_proj, &l.cross_attn.v_proj}) w.push_back(&lin->weight);
  return w;
}

int64_t Transformer::product_weight_bytes() const {
  int64_t values = 0;
  for (const Param* p : const_cast<Transformer*>(this)->product_weights())
    values += int64_t(p->rows()) * int64_t(p->cols());
  return 4 * values;
}

void Transformer::set_compute_type(ComputeType type) {
  if (type == ComputeType::kAuto) type = auto_compute_type(product_weight_bytes());
  if (type == compute_type_) return;
  const std::vector<Param*> weights = product_weights();
  for (size_t i = 0; i < weights.size(); ++i) {
    Param* p = weights[i];
    if (!p->bf16.empty()) p->value = from_bf16(p->bf16);  // back to float32 first
    if (!p->int8.empty()) p->value = from_int8(p->int8);
    p->bf16 = Bf16Matrix();
    p->int8 = Int8Matrix();
    if (type == ComputeType::kBfloat16) {
      p->bf16 = to_bf16(p->value);
      p->value = Mat();  // freed: the heap block is reused by the next (smaller) bf16 copy
      // Multiplied once per sentence: held once, packed for oneDNN where it multiplies them.
      if (i >= per_step_weights()) pack_for_onednn_only(p->bf16);
    } else if (type == ComputeType::kInt8) {
      p->int8 = to_int8(p->value);
      p->value = Mat();
    }
  }
  compute_type_ = type;
}

void Transformer::encode(const TokenIds& src, const Packing& src_rows, const DropoutContext& dctx,
                         ForwardCache& cache) const {
  cache.enc_x.resize(encoder_.size() + 1);
  cache.enc.resize(encoder_.size());
  const DropoutContext d = dctx.over(src_rows);
  make_dropout_mask(1, sc(cfg_.dropout_src), d.site(dropout_site::kSrcWords), cache.src_word_drop);
  src_embed_->forward(src, src_rows, cache.enc_x[0], cache.src_word_drop);
  make_dropout_mask(cfg_.d_model, sc(cfg_.dropout), d.site(dropout_site::kSrcEmbedding), cache.src_embed_drop);
  apply_dropout(cache.enc_x[0], cache.src_embed_drop);
  const DropoutContext layers = dctx.site(dropout_site::kEncoderLayer);
  if (cache.inference) {
    // Two activation buffers (enc_x[0] and enc_x[1]) and one layer cache, reused layer by layer.
    Mat& x = cache.enc_x[0];
    Mat& y = cache.enc_x.back();
    for (size_t l = 0; l < encoder_.size(); ++l) {
      encoder_[l].forward(x, src_rows, layers.site(l), cache.enc_scratch, y);
      cache.enc[l].self_attn.probs = cache.enc_scratch.self_attn.probs;
      x.swap(y);
    }
    x.swap(y);  // the output in enc_x.back()
  } else {
    for (size_t l = 0; l < encoder_.size(); ++l)
      encoder_[l].forward(cache.enc_x[l], src_rows, layers.site(l), cache.enc[l], cache.enc_x[l + 1]);
  }
  if (enc_norm_) {
    enc_norm_->forward(cache.enc_x.back(), cache.memory, cache.enc_norm);
  } else {
    cache.memory = cache.enc_x.back();
  }
}

void Transformer::output_projection(const Eigen::Ref<const Mat>& h, Eigen::Ref<Mat> logits) const {
  ANUVAD_CHECK_SHAPE(logits.rows() == h.rows() && logits.cols() == out_weight_->rows(),
                     "output_projection: logits must be [N, V]");
  param_affine(h, *out_weight_, out_bias_->value, logits);
}

void Transformer::decoder_forward(const TokenIds& tgt_in, const Packing& tgt_rows,
                                  const Packing& src_rows, const DropoutContext& dctx,
                                  ForwardCache& cache, Mat& logits) const {
  ANUVAD_CHECK_SHAPE(tgt_rows.batch_size() == src_rows.batch_size() &&
                         cache.memory.rows() == src_rows.rows(),
                     "decoder_forward: target and memory batches differ");
  cache.dec_x.resize(decoder_.size() + 1);
  cache.dec.resize(decoder_.size());
  const DropoutContext d = dctx.over(tgt_rows);
  make_dropout_mask(1, sc(cfg_.dropout_trg), d.site(dropout_site::kTgtWords), cache.tgt_word_drop);
  tgt_embed_->forward(tgt_in, tgt_rows, cache.dec_x[0], cache.tgt_word_drop);
  make_dropout_mask(cfg_.d_model, sc(cfg_.dropout), d.site(dropout_site::kTgtEmbedding), cache.tgt_embed_drop);
  apply_dropout(cache.dec_x[0], cache.tgt_embed_drop);
  const DropoutContext layers = dctx.site(dropout_site::kDecoderLayer);
  for (size_t l = 0; l < decoder_.size(); ++l)
    decoder_[l].forward(cache.dec_x[l], cache.memory, tgt_rows, src_rows, layers.site(l),
                        cache.dec[l], cache.dec_x[l + 1]);
  if (dec_norm_) {
    dec_norm_->forward(cache.dec_x.back(), cache.dec_out, cache.dec_norm);
  } else {
    cache.dec_out = cache.dec_x.back();
  }
  logits.resize(cache.dec_out.rows(), out_weight_->rows());
  output_projection(cache.dec_out, logits);
}

void Transformer::forward(const Batch& b, const DropoutContext& dctx, ForwardCache& cache,
                          Mat& logits) const {
  encode(b.src, b.src_rows, dctx, cache);
  decoder_forward(b.tgt_in, b.tgt_rows, b.src_rows, dctx, cache, logits);
}

void Transformer::backward(const Batch& b, const Mat& dlogits, const ForwardCache& cache,
                           const GradientsFinal& final) const {
  ANUVAD_CHECK_SHAPE(!cache.inference, "backward: the forward pass ran in inference mode");
  ANUVAD_CHECK_SHAPE(compute_type_ == ComputeType::kFloat32, "backward: the model's weights are bfloat16 or int8");
  const auto done = [&final](size_t first) {
    if (final) final(first);
  };
  // forward: logits = h·Wᵀ + bias  ⇒  dW += dlogitsᵀ·h, dh = dlogits·W
  Mat dh;
  affine_backward(dlogits, cache.dec_out, out_weight_->value, out_weight_->grad_acc(),
                  out_bias_->grad_acc(), dh, /*accumulate=*/false);
  done(first_.output);  // (a tied weight belongs to the target embedding, final below)
  Mat dx;
  if (dec_norm_) {
    dec_norm_->backward(dh, cache.dec_norm, dx);
    done(first_.dec_norm);
  } else {
    dx = std::move(dh);
  }
  Mat dmemory = Mat::Zero(cache.memory.rows(), cache.memory.cols());
  for (size_t l = decoder_.size(); l-- > 0;) {
    Mat dprev;
    decoder_[l].backward(dx, cache.memory, b.tgt_rows, b.src_rows, cache.dec[l], dprev, dmemory);
    dx = std::move(dprev);
    done(first_.decoder[l]);
  }
  apply_dropout(dx, cache.tgt_embed_drop);
  tgt_embed_->backward(dx, b.tgt_in, cache.tgt_word_drop);
  done(first_.tgt_embed);

  if (enc_norm_) {
    enc_norm_->backward(dmemory, cache.enc_norm, dx);
    done(first_.enc_norm);
  } else {
    dx = std::move(dmemory);
  }
  for (size_t l = encoder_.size(); l-- > 0;) {
    Mat dprev;
    encoder_[l].backward(dx, b.src_rows, cache.enc[l], dprev);
    dx = std::move(dprev);
    done(first_.encoder[l]);
  }
  apply_dropout(dx, cache.src_embed_drop);
  src_embed_->backward(dx, b.src, cache.src_word_drop);
  done(0);
}

// ---------------------------------------------------------------------------------------------
// Incremental decoding with a key/value cache

DecoderState Transformer::begin_decoding(const Mat& memory, const Packing& src_rows,
                                         int capacity, int beam_size) const {
  ANUVAD_CHECK_SHAPE(memory.rows() == src_rows.rows() && memory.cols() == cfg_.d_model,
                     "begin_decoding: memory must be [Σ source lengths, d_model]");
  const int batch = src_rows.batch_size();
  ANUVAD_CHECK_SHAPE(capacity >= 1 && capacity <= cfg_.max_positions,
                     "begin_decoding: capacity " + std::to_string(capacity) +
                         " outside [1, max_positions]");
  ANUVAD_CHECK_SHAPE(beam_size >= 1, "begin_decoding: beam_size must be at least 1");
  DecoderState st;
  st.batch_size = batch * beam_size;
  st.capacity = capacity;
  st.src_len = src_rows.max_length;
  st.src_rows = src_rows;
  for (int b = 0; b < batch; ++b)
    for (int k = 0; k < beam_size; ++k) {
      st.src_lengths.push_back(src_rows.lengths[b]);
      st.row_source.push_back(b);
    }
  st.layers.resize(decoder_.size());
  st.last_self_probs.resize(decoder_.size());
  st.last_cross_probs.resize(decoder_.size());
  for (size_t l = 0; l < decoder_.size(); ++l)
    decoder_[l].begin_decoding(memory, st.batch_size, capacity, st.layers[l]);
  return st;
}

void DecoderState::select_rows(const std::vector<int>& parents) {
  ANUVAD_CHECK_SHAPE(static_cast<int>(parents.size()) == batch_size, "select_rows: one parent per row");
  bool identity = true;
  for (int r = 0; r < batch_size; ++r) {
    ANUVAD_CHECK_SHAPE(parents[r] >= 0 && parents[r] < batch_size &&
                           row_source[parents[r]] == row_source[r],
                       "select_rows: parent of another sentence");
    identity = identity && parents[r] == r;
  }
  if (identity || length == 0) return;
  for (DecoderLayerState& ls : layers) {
    for (Mat* m : {&ls.self_k, &ls.self_v}) {
      gather_scratch.resize(m->rows(), m->cols());  // same size every time: no reallocation
      for (int r = 0; r < batch_size; ++r)
        gather_scratch.middleRows(Index(r) * capacity, length) =
            m->middleRows(Index(parents[r]) * capacity, length);
      m->swap(gather_scratch);
    }
  }
}

void DecoderState::keep_rows(const std::vector<int>& keep) {
  for (size_t j = 0; j < keep.size(); ++j)
    ANUVAD_CHECK_SHAPE(keep[j] >= (j == 0 ? 0 : keep[j - 1] + 1) && keep[j] < batch_size,
                       "keep_rows: row indices must be increasing and below the batch size");
  for (size_t j = 0; j < keep.size(); ++j) {
    const int from = keep[j], to = static_cast<int>(j);
    src_lengths[size_t(to)] = src_lengths[size_t(from)];
    row_source[size_t(to)] = row_source[size_t(from)];
    if (from == to || length == 0) continue;
    // Blocks of `capacity` rows: the target block ends before the source block starts.
    for (DecoderLayerState& ls : layers)
      for (Mat* m : {&ls.self_k, &ls.self_v})
        m->middleRows(Index(to) * capacity, length) = m->middleRows(Index(from) * capacity, length);
  }
  batch_size = static_cast<int>(keep.size());
  src_lengths.resize(keep.size());
  row_source.resize(keep.size());
}

void Transformer::decode_step(const std::vector<int32_t>& tokens, DecoderState& st,
                              Mat& logits) const {
  ANUVAD_CHECK_SHAPE(static_cast<int>(tokens.size()) == st.batch_size, "decode_step: one token per sentence");
  ANUVAD_CHECK_SHAPE(st.length < st.capacity, "decode_step: key/value cache is full");
  const Index vocab = tgt_embed_->vocab_size();
  for (int32_t id : tokens)
    ANUVAD_CHECK_SHAPE(id >= 0 && id < vocab,
                       "decode_step: token id " + std::to_string(id) + " out of range");
  const int H = cfg_.n_heads;
  logits.resize(st.batch_size, out_weight_->rows());
  for (size_t l = 0; l < decoder_.size(); ++l) {
    st.last_self_probs[l].resize(Index(st.batch_size) * H, st.length + 1);
    st.last_cross_probs[l].resize(Index(st.batch_size) * H, st.src_len);
  }
  // Rows are independent given the cache: split them into one block per thread. Each block's
  // matrix products are then single-threaded (Eigen runs serially inside a parallel region),
  // which beats splitting every small product across threads and synchronising in between.
  constexpr int kMinRowsPerBlock = 8;
  int n_blocks = 1;
  if (!omp_in_parallel())
    n_blocks = std::max(1, std::min(omp_get_max_threads(), st.batch_size / kMinRowsPerBlock));
  if (static_cast<int>(st.workspaces.size()) < n_blocks) st.workspaces.resize(n_blocks);
  if (n_blocks == 1) {
    // One block: the products large enough to split across the threads (the output projection
    // first) run on one team held for the whole step, not a fork/join each (core/step_team.h).
    // Not where bfloat16 products go to oneDNN (kOnednnMinRows rows or more), which threads
    // itself and would run on one thread inside the team.
    const double widest = double(st.batch_size) * double(cfg_.d_model) *
                          double(std::max<Index>(out_weight_->rows(), cfg_.d_ff));
    const bool onednn_rows = compute_type_ == ComputeType::kBfloat16 && st.batch_size >= kOnednnMinRows;
    const int team = omp_in_parallel() || onednn_rows || widest < kGemmColumnSplitMinMultiplyAdds
                         ? 1
                         : omp_get_max_threads();
    StepTeam::run(team, [&] { decode_rows(tokens, st, 0, st.batch_size, st.workspaces[0], logits); });
  } else {
    std::exception_ptr error;
#pragma omp parallel for schedule(static) num_threads(n_blocks)
    for (int blk = 0; blk < n_blocks; ++blk) {
      const int r0 = int(int64_t(st.batch_size) * blk / n_blocks);
      const int r1 = int(int64_t(st.batch_size) * (blk + 1) / n_blocks);
      try {
        decode_rows(tokens, st, r0, r1 - r0, st.workspaces[blk], logits);
      } catch (...) {
#pragma omp critical(anuvad_decode_step_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }
  st.length += 1;
}

void Transformer::decode_rows(const std::vector<int32_t>& tokens, DecoderState& st, int r0, int n,
                              DecoderWorkspace& ws, Mat& logits) const {
  ws.tokens.assign(tokens.begin() + r0, tokens.begin() + r0 + n);
  tgt_embed_->forward(ws.tokens, n, 1, st.length, ws.x);
  for (size_t l = 0; l < decoder_.size(); ++l) decoder_[l].step(st, l, r0, n, ws);
  const Mat* out = &ws.x;
  if (dec_norm_) {
    dec_norm_->forward(ws.x, ws.out, ws.ln);
    out = &ws.out;
  }
  output_projection(*out, logits.middleRows(r0, n));
}

}  // namespace anuvad
