// ModelConfig JSON conversion and validation.
#include "anuvad/nn/config.h"

#include <limits>

#include "anuvad/core/error.h"

namespace anuvad {

void ModelConfig::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("config: " + what);
  };
  require(src_vocab_size >= 5, "src_vocab_size must be at least 5");
  require(tgt_vocab_size >= 5, "tgt_vocab_size must be at least 5");
  require(src_vocab_size <= 10000000 && tgt_vocab_size <= 10000000, "vocabulary sizes must be at most 10,000,000");
  require(d_model > 0 && d_model <= 65536 && d_model % 2 == 0, "d_model must be even and in [2, 65536]");
  require(n_heads > 0 && d_model % n_heads == 0, "n_heads must divide d_model");
  require(d_ff > 0 && d_ff <= 1048576, "d_ff must be in [1, 1048576]");
  require(encoder_layers >= 1 && decoder_layers >= 1 && encoder_layers <= 1000 && decoder_layers <= 1000,
          "encoder_layers and decoder_layers must be in [1, 1000]");
  require(dropout >= 0 && dropout < 1, "dropout must be in [0, 1)");
  require(attention_dropout >= 0 && attention_dropout < 1, "attention_dropout must be in [0, 1)");
  require(ffn_dropout >= 0 && ffn_dropout < 1, "ffn_dropout must be in [0, 1)");
  require(norm == "pre" || norm == "post", "norm must be \"pre\" or \"post\"");
  require(max_positions >= 4 && max_positions <= 65536, "max_positions must be in [4, 65536]");
  require(layer_norm_eps > 0, "layer_norm_eps must be positive");
}

int64_t ModelConfig::parameter_count() const {
  const int64_t d = d_model, f = d_ff;
  const int64_t attention = 4 * (d * d + d);
  const int64_t layer_norm = 2 * d;
  const int64_t ffn = d * f + f + f * d + d;
  const int64_t enc_layer = attention + ffn + 2 * layer_norm;
  const int64_t dec_layer = 2 * attention + ffn + 3 * layer_norm;
  int64_t n = int64_t(src_vocab_size) * d + int64_t(tgt_vocab_size) * d;
  n += encoder_layers * enc_layer + decoder_layers * dec_layer;
  if (pre_norm()) n += 2 * layer_norm;
  if (!tie_output) n += int64_t(tgt_vocab_size) * d;
  return n + tgt_vocab_size;
}

nlohmann::json ModelConfig::to_json() const {
  return {{"src_vocab_size", src_vocab_size},
          {"tgt_vocab_size", tgt_vocab_size},
          {"d_model", d_model},
          {"n_heads", n_heads},
          {"d_ff", d_ff},
          {"encoder_layers", encoder_layers},
          {"decoder_layers", decoder_layers},
          {"dropout", dropout},
          {"attention_dropout", attention_dropout},
          {"ffn_dropout", ffn_dropout},
          {"norm", norm},
          {"tie_output", tie_output},
          {"max_positions", max_positions},
          {"layer_norm_eps", layer_norm_eps}};
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw ConfigError(origin + ": config must be a JSON object");
  ModelConfig c;
  const nlohmann::json defaults = c.to_json();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!defaults.contains(it.key()))
      throw ConfigError(origin + ": unknown config key \"" + it.key() + "\"");
  }
  auto get = [&](const char* key, auto& field) {
    if (!j.contains(key)) return;
    const nlohmann::json& v = j.at(key);
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, int>) {
      // Checked before get<int>(): converting a float beyond int's range (1e20) to int is
      // undefined behaviour, and a wider integer would wrap around to a plausible value.
      if (v.is_number() && !v.is_number_integer())
        throw ConfigError(origin + ": config key \"" + key + "\" must be an integer");
      constexpr int64_t lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
      if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(hi)
                                 : v.is_number_integer() && (v.get<int64_t>() < lo || v.get<int64_t>() > hi))
        throw ConfigError(origin + ": config key \"" + key + "\" is out of range");
    }
    try {
      field = v.get<std::decay_t<decltype(field)>>();
    } catch (const nlohmann::json::exception&) {
      throw ConfigError(origin + ": config key \"" + key + "\" has the wrong type");
    }
  };
  get("src_vocab_size", c.src_vocab_size);
  get("tgt_vocab_size", c.tgt_vocab_size);
  get("d_model", c.d_model);
  get("n_heads", c.n_heads);
  get("d_ff", c.d_ff);
  get("encoder_layers", c.encoder_layers);
  get("decoder_layers", c.decoder_layers);
  get("dropout", c.dropout);
  get("attention_dropout", c.attention_dropout);
  get("ffn_dropout", c.ffn_dropout);
  get("norm", c.norm);
  get("tie_output", c.tie_output);
  get("max_positions", c.max_positions);
  get("layer_norm_eps", c.layer_norm_eps);
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(origin + ": " + e.what());
  }
  return c;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(origin + ": not valid JSON (" + e.what() + ")");
  }
  return from_json(j, origin);
}

}  // namespace anuvad
