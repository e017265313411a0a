// ModelConfig: JSON keys range-checked before conversion, every validation message and which
// rule a config breaking several reports, the JSON of every field both ways, and
// parameter_count equal to what a Transformer built from the config allocates.
#include <catch2/catch.hpp>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/nn/config.h"
#include "anuvad/nn/transformer.h"
#include "support/tiny_config.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

TEST_CASE("config: numbers beyond int's range for integer keys are ConfigErrors", "[io][config]") {
  // A float beyond int's range used to be converted to int before the integer check (undefined
  // behaviour, reported by -fsanitize=float-cast-overflow), and a wider integer wrapped around.
  const auto parse = [](const std::string& text) { return ModelConfig::from_json_text(text, "c.json"); };
  CHECK_THROWS_WITH(parse(R"({"d_model": 1e20})"), Contains("c.json") && Contains("\"d_model\" must be an integer"));
  CHECK_THROWS_WITH(parse(R"({"n_heads": -1e300})"), Contains("\"n_heads\" must be an integer"));
  CHECK_THROWS_WITH(parse(R"({"d_model": 128.5})"), Contains("\"d_model\" must be an integer"));
  // 2^32 + 128 would wrap to a valid d_model of 128.
  CHECK_THROWS_WITH(parse(R"({"d_model": 4294967424})"), Contains("\"d_model\" is out of range"));
  CHECK_THROWS_WITH(parse(R"({"d_ff": 18446744073709551615})"), Contains("\"d_ff\" is out of range"));
  CHECK_THROWS_WITH(parse(R"({"encoder_layers": -9223372036854775808})"),
                    Contains("\"encoder_layers\" is out of range"));
  CHECK_THROWS_WITH(parse(R"({"d_model": "128"})"), Contains("\"d_model\" has the wrong type"));
  CHECK_THROWS_AS(parse(R"({"d_model": 2147483647})"), ConfigError);  // in range, fails validation
  CHECK(parse(R"({"d_model": 64, "n_heads": 2})").d_model == 64);
}

TEST_CASE("config: every rule's message, first violated rule in field order", "[config]") {
  const auto parse = [](const std::string& text) { return ModelConfig::from_json_text(text, "c.json"); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1])", "c.json: config must be a JSON object"},
      {R"({"colour": "blue", "d_model": 0})", "c.json: unknown config key \"colour\""},
      {R"({"tie_output": 1})", "c.json: config key \"tie_output\" has the wrong type"},
      {R"({"norm": 1})", "c.json: config key \"norm\" has the wrong type"},
      {R"({"dropout": "0.1"})", "c.json: config key \"dropout\" has the wrong type"},
      {R"({"src_vocab_size": 4})", "c.json: config: src_vocab_size must be at least 5"},
      {R"({"tgt_vocab_size": 4})", "c.json: config: tgt_vocab_size must be at least 5"},
      {R"({"src_vocab_size": 10000001})", "c.json: config: vocabulary sizes must be at most 10,000,000"},
      {R"({"tgt_vocab_size": 10000001})", "c.json: config: vocabulary sizes must be at most 10,000,000"},
      {R"({"src_vocab_size": 10000001, "tgt_vocab_size": 4})", "c.json: config: tgt_vocab_size must be at least 5"},
      {R"({"d_model": 0})", "c.json: config: d_model must be even and in [2, 65536]"},
      {R"({"d_model": 131, "n_heads": 1})", "c.json: config: d_model must be even and in [2, 65536]"},
      {R"({"d_model": 65538, "n_heads": 1})", "c.json: config: d_model must be even and in [2, 65536]"},
      {R"({"d_model": 0, "n_heads": 3, "norm": "mid"})", "c.json: config: d_model must be even and in [2, 65536]"},
      {R"({"n_heads": 3})", "c.json: config: n_heads must divide d_model"},
      {R"({"n_heads": 0})", "c.json: config: n_heads must divide d_model"},
      {R"({"d_ff": 0})", "c.json: config: d_ff must be in [1, 1048576]"},
      {R"({"d_ff": 1048577})", "c.json: config: d_ff must be in [1, 1048576]"},
      {R"({"encoder_layers": 0})", "c.json: config: encoder_layers and decoder_layers must be in [1, 1000]"},
      {R"({"decoder_layers": 1001})", "c.json: config: encoder_layers and decoder_layers must be in [1, 1000]"},
      {R"({"encoder_layers": 0, "d_ff": 0})", "c.json: config: d_ff must be in [1, 1048576]"},
      {R"({"dropout": 1})", "c.json: config: dropout must be in [0, 1)"},
      {R"({"attention_dropout": -0.1})", "c.json: config: attention_dropout must be in [0, 1)"},
      {R"({"ffn_dropout": 1.0})", "c.json: config: ffn_dropout must be in [0, 1)"},
      {R"({"dropout_src": 1.0})", "c.json: config: dropout_src must be in [0, 1)"},
      {R"({"layer_dropout": -0.1})", "c.json: config: layer_dropout must be in [0, 1)"},
      {R"({"dropout_trg": -0.5})", "c.json: config: dropout_trg must be in [0, 1)"},
      {R"({"norm": "mid"})", "c.json: config: norm must be \"pre\" or \"post\""},
      {R"({"max_positions": 3})", "c.json: config: max_positions must be in [4, 65536]"},
      {R"({"max_positions": 65537})", "c.json: config: max_positions must be in [4, 65536]"},
      {R"({"layer_norm_eps": 0})", "c.json: config: layer_norm_eps must be positive"},
      {R"({"layer_norm_eps": 0, "max_positions": 2})", "c.json: config: max_positions must be in [4, 65536]"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    CHECK_THROWS_AS(parse(text), ConfigError);
    CHECK_THROWS_WITH(parse(text), Catch::Equals(message));
  }
}

TEST_CASE("config: to_json holds every field and from_json reads each one back", "[config]") {
  // The defaults' JSON is embedded in model files: its text changes only when a field is added
  // (layer_dropout was the last).
  CHECK(ModelConfig{}.to_json().dump() ==
        R"({"attention_dropout":0.0,"d_ff":512,"d_model":128,"decoder_layers":2,"dropout":0.1,)"
        R"("dropout_src":0.0,"dropout_trg":0.0,)"
        R"("encoder_layers":2,"ffn_dropout":0.0,"layer_dropout":0.0,"layer_norm_eps":1e-05,"max_positions":256,)"
        R"("n_heads":4,"norm":"pre","src_vocab_size":1000,"tgt_vocab_size":1000,"tie_output":true})");
  // Every field differs from its default.
  ModelConfig c = tiny_config({37, 41, 24, 3, 40, 3, 1, 100}, "post", false, 0.25);
  c.attention_dropout = 0.125;
  c.ffn_dropout = 0.375;
  c.dropout_src = 0.0625;
  c.dropout_trg = 0.1875;
  c.layer_dropout = 0.4375;
  c.layer_norm_eps = 1e-6;
  const nlohmann::json j = c.to_json();
  CHECK(j == nlohmann::json{{"src_vocab_size", 37}, {"tgt_vocab_size", 41}, {"d_model", 24}, {"n_heads", 3},
                            {"d_ff", 40}, {"encoder_layers", 3}, {"decoder_layers", 1}, {"dropout", 0.25},
                            {"attention_dropout", 0.125}, {"ffn_dropout", 0.375}, {"dropout_src", 0.0625},
                            {"dropout_trg", 0.1875}, {"layer_dropout", 0.4375}, {"norm", "post"},
                            {"tie_output", false}, {"max_positions", 100}, {"layer_norm_eps", 1e-6}});
  const ModelConfig r = ModelConfig::from_json(j, "round trip");
  CHECK(r.src_vocab_size == 37);
  CHECK(r.tgt_vocab_size == 41);
  CHECK(r.d_model == 24);
  CHECK(r.n_heads == 3);
  CHECK(r.d_ff == 40);
  CHECK(r.encoder_layers == 3);
  CHECK(r.decoder_layers == 1);
  CHECK(r.dropout == 0.25);
  CHECK(r.attention_dropout == 0.125);
  CHECK(r.ffn_dropout == 0.375);
  CHECK(r.dropout_src == 0.0625);
  CHECK(r.layer_dropout == 0.4375);
  CHECK(r.dropout_trg == 0.1875);
  CHECK(r.norm == "post");
  CHECK(r.tie_output == false);
  CHECK(r.max_positions == 100);
  CHECK(r.layer_norm_eps == 1e-6);
}

TEST_CASE("config: parameter_count equals the elements a Transformer allocates", "[config]") {
  const std::vector<TinySizes> sizes = {
      {11, 13, 8, 2, 12, 2, 2, 16},     // gradcheck_test's
      {40, 50, 32, 4, 64, 2, 2, 64},    // model_test's
      {5, 5, 2, 1, 1, 1, 1, 4},         // the smallest valid config
      {97, 31, 24, 3, 40, 3, 1, 100}};  // odd vocabularies, more encoder than decoder layers
  for (const TinySizes& s : sizes)
    for (const char* norm : {"pre", "post"})
      for (bool tie : {true, false}) {
        const ModelConfig cfg = tiny_config(s, norm, tie);
        INFO(cfg.to_json().dump());
        const Transformer model(cfg);
        int64_t allocated = 0;
        for (const Param& p : model.params().params()) allocated += p.value.size();
        CHECK(allocated > 0);
        CHECK(cfg.parameter_count() == allocated);
      }
}
