// Small Transformer configs for the test suites and test tools (no Catch2 dependency, so the
// attention_fixture tool can use it too). Each suite keeps its own sizes: its golden numbers
// and tolerances were set with them.
#pragma once

#include <optional>
#include <string>

#include "anuvad/nn/config.h"

namespace anuvad::test {

/// Sizes of a small test model, in this order (aggregate-initialise positionally).
struct TinySizes {
  int src_vocab_size;
  int tgt_vocab_size;
  int d_model;
  int n_heads;
  int d_ff;
  int encoder_layers;
  int decoder_layers;
  int max_positions;
};

/// A ModelConfig with the sizes `s`, `norm` ("pre"/"post") and `tie_output`; `dropout`, when
/// given, is the rate of all three dropouts (embedding/residual, attention weights, FFN
/// hidden), otherwise they keep ModelConfig's defaults. Other fields keep their defaults.
inline ModelConfig tiny_config(const TinySizes& s, const std::string& norm = "pre",
                               bool tie_output = true, std::optional<double> dropout = std::nullopt) {
  ModelConfig cfg;
  cfg.src_vocab_size = s.src_vocab_size;
  cfg.tgt_vocab_size = s.tgt_vocab_size;
  cfg.d_model = s.d_model;
  cfg.n_heads = s.n_heads;
  cfg.d_ff = s.d_ff;
  cfg.encoder_layers = s.encoder_layers;
  cfg.decoder_layers = s.decoder_layers;
  cfg.max_positions = s.max_positions;
  cfg.norm = norm;
  cfg.tie_output = tie_output;
  if (dropout) cfg.dropout = cfg.attention_dropout = cfg.ffn_dropout = *dropout;
  return cfg;
}

}  // namespace anuvad::test
