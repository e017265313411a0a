// ModelConfig JSON conversion and validation, all driven by one table of the fields.
#include "anuvad/nn/config.h"

#include <limits>
#include <variant>

#include "anuvad/core/error.h"

namespace anuvad {
namespace {

/// A range check on a config: `ok` false means the message `what` applies.
struct Rule {
  bool (*ok)(const ModelConfig&) = nullptr;
  const char* what = nullptr;
};

/// One ModelConfig field: its JSON key, its member and the rules checked after it is read
/// (a rule involving several fields sits on the last of them, so validate() reports the
/// first violated rule in field order).
struct Field {
  const char* key;
  std::variant<int ModelConfig::*, double ModelConfig::*, std::string ModelConfig::*,
               bool ModelConfig::*> member;
  Rule rules[2];
};

using C = const ModelConfig&;
// The single list of fields: to_json, from_json and validate iterate it in this order.
const Field kFields[] = {
    {"src_vocab_size", &ModelConfig::src_vocab_size,
     {{[](C c) { return c.src_vocab_size >= 5; }, "src_vocab_size must be at least 5"}}},
    {"tgt_vocab_size", &ModelConfig::tgt_vocab_size,
     {{[](C c) { return c.tgt_vocab_size >= 5; }, "tgt_vocab_size must be at least 5"},
      {[](C c) { return c.src_vocab_size <= 10000000 && c.tgt_vocab_size <= 10000000; },
       "vocabulary sizes must be at most 10,000,000"}}},
    {"d_model", &ModelConfig::d_model,
     {{[](C c) { return c.d_model > 0 && c.d_model <= 65536 && c.d_model % 2 == 0; },
       "d_model must be even and in [2, 65536]"}}},
    {"n_heads", &ModelConfig::n_heads,
     {{[](C c) { return c.n_heads > 0 && c.d_model % c.n_heads == 0; }, "n_heads must divide d_model"}}},
    {"d_ff", &ModelConfig::d_ff,
     {{[](C c) { return c.d_ff > 0 && c.d_ff <= 1048576; }, "d_ff must be in [1, 1048576]"}}},
    {"encoder_layers", &ModelConfig::encoder_layers, {}},
    {"decoder_layers", &ModelConfig::decoder_layers,
     {{[](C c) {
         return c.encoder_layers >= 1 && c.decoder_layers >= 1 && c.encoder_layers <= 1000 &&
                c.decoder_layers <= 1000;
       },
       "encoder_layers and decoder_layers must be in [1, 1000]"}}},
    {"dropout", &ModelConfig::dropout,
     {{[](C c) { return c.dropout >= 0 && c.dropout < 1; }, "dropout must be in [0, 1)"}}},
    {"attention_dropout", &ModelConfig::attention_dropout,
     {{[](C c) { return c.attention_dropout >= 0 && c.attention_dropout < 1; },
       "attention_dropout must be in [0, 1)"}}},
    {"ffn_dropout", &ModelConfig::ffn_dropout,
     {{[](C c) { return c.ffn_dropout >= 0 && c.ffn_dropout < 1; }, "ffn_dropout must be in [0, 1)"}}},
    {"dropout_src", &ModelConfig::dropout_src,
     {{[](C c) { return c.dropout_src >= 0 && c.dropout_src < 1; }, "dropout_src must be in [0, 1)"}}},
    {"dropout_trg", &ModelConfig::dropout_trg,
     {{[](C c) { return c.dropout_trg >= 0 && c.dropout_trg < 1; }, "dropout_trg must be in [0, 1)"}}},
    {"layer_dropout", &ModelConfig::layer_dropout,
     {{[](C c) { return c.layer_dropout >= 0 && c.layer_dropout < 1; }, "layer_dropout must be in [0, 1)"}}},
    {"norm", &ModelConfig::norm,
     {{[](C c) { return c.norm == "pre" || c.norm == "post"; }, "norm must be \"pre\" or \"post\""}}},
    {"tie_output", &ModelConfig::tie_output, {}},
    {"max_positions", &ModelConfig::max_positions,
     {{[](C c) { return c.max_positions >= 4 && c.max_positions <= 65536; },
       "max_positions must be in [4, 65536]"}}},
    {"layer_norm_eps", &ModelConfig::layer_norm_eps,
     {{[](C c) { return c.layer_norm_eps > 0; }, "layer_norm_eps must be positive"}}},
};

/// Reads j[key] into `field`; throws ConfigError naming `origin` and the key when the value
/// has the wrong type or (for int fields) is not an integer within int's range.
template <typename T>
void read_field(const nlohmann::json& v, const std::string& origin, const char* key, T& field) {
  if constexpr (std::is_same_v<T, int>) {
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
    field = v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(origin + ": config key \"" + key + "\" has the wrong type");
  }
}

}  // namespace

void ModelConfig::validate() const {
  for (const Field& f : kFields)
    for (const Rule& r : f.rules)
      if (r.ok != nullptr && !r.ok(*this)) throw ConfigError(std::string("config: ") + r.what);
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
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : kFields) std::visit([&](auto m) { j[f.key] = this->*m; }, f.member);
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw ConfigError(origin + ": config must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const Field& f : kFields) known |= it.key() == f.key;
    if (!known) throw ConfigError(origin + ": unknown config key \"" + it.key() + "\"");
  }
  ModelConfig c;
  for (const Field& f : kFields) {
    if (!j.contains(f.key)) continue;
    std::visit([&](auto m) { read_field(j.at(f.key), origin, f.key, c.*m); }, f.member);
  }
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
