// Model hyperparameters (the JSON config of `anuvad train -c FILE` and the "config" entry of a
// model file's metadata).
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>

namespace anuvad {

/// Transformer hyperparameters (Vaswani et al. 2017, Table 3 names). JSON keys equal the
/// field names; unknown keys are rejected. A new field needs, besides its member here, one row
/// (key, member, range rules) in the field table of src/nn/config.cpp, which to_json,
/// from_json and validate iterate; and parameter_count if it changes the parameters.
struct ModelConfig {
  int src_vocab_size = 1000;   ///< source SentencePiece vocabulary size (set at training time)
  int tgt_vocab_size = 1000;   ///< target SentencePiece vocabulary size (set at training time)
  int d_model = 128;           ///< width of every residual-stream vector
  int n_heads = 4;             ///< attention heads; d_head = d_model / n_heads
  int d_ff = 512;              ///< hidden width of the feed-forward network
  int encoder_layers = 2;
  int decoder_layers = 2;
  double dropout = 0.1;            ///< on embeddings and residual branches
  double attention_dropout = 0.0;  ///< on attention weights
  double ffn_dropout = 0.0;        ///< on the feed-forward hidden activation
  /// Word dropout (Marian's --dropout-src / --dropout-trg; Sennrich et al. 2016): the
  /// probability that a source token's (a target input token's) embedding vector is zeroed for
  /// an update, the kept ones scaled by 1/(1−p) as Marian does; positions are kept.
  double dropout_src = 0.0;
  double dropout_trg = 0.0;
  /// Layer dropout: the probability that a training sentence skips an encoder or decoder
  /// layer for an update (all its residual branches zeroed, the kept ones scaled by 1/(1−p):
  /// stochastic depth per sentence, Huang et al. 2016; LayerDrop, Fan et al. 2019). In
  /// pre-norm a skipped layer is the identity; in post-norm its layer norms still apply.
  double layer_dropout = 0.0;
  std::string norm = "pre";        ///< "pre" (pre-norm, final LayerNorm per stack) or "post"
  bool tie_output = true;          ///< output projection weight = target embedding
  int max_positions = 256;         ///< longest sequence (tokens, EOS/BOS included)
  double layer_norm_eps = 1e-5;

  bool pre_norm() const { return norm == "pre"; }
  /// Number of scalar parameters the Transformer built from this config has (computed without
  /// allocating anything, so a model file's config can be checked against its size first).
  int64_t parameter_count() const;
  /// Throws ConfigError naming the field when a value is out of range.
  void validate() const;
  nlohmann::json to_json() const;
  /// Reads a config, starting from the defaults; throws ConfigError on unknown keys or bad
  /// types, naming the key and `origin` (a file name, or "model file").
  static ModelConfig from_json(const nlohmann::json& j, const std::string& origin);
  /// Parses JSON text (a config file's contents) strictly; throws ConfigError naming `origin`
  /// for invalid JSON, unknown keys, wrong types or out-of-range values.
  static ModelConfig from_json_text(const std::string& text, const std::string& origin);
};

}  // namespace anuvad
