// The model file in the float build: bit-exact save/load, every corruption rejected with a
// message naming the tensor or field, and hostile configs that cost no memory.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/text/tokenizer.h"
#include "support/io_fixtures.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

namespace {

const std::vector<std::pair<std::string, std::string>>& tiny_pairs() {
  static const std::vector<std::pair<std::string, std::string>> pairs = {
      {"hello", "नमस्ते"},
      {"How are you?", "आप कैसे हैं?"},
      {"I am fine.", "मैं ठीक हूँ।"},
      {"We are friends.", "हम दोस्त हैं।"},
      {"Thank you.", "धन्यवाद।"},
      {"The sun is hot.", "सूरज गरम है।"},
      {"The water is cold.", "पानी ठंडा है।"},
      {"I like tea.", "मुझे चाय पसंद है।"},
      {"She reads a book.", "वह एक किताब पढ़ती है।"},
      {"He plays football.", "वह फ़ुटबॉल खेलता है।"},
      {"The cat is sleeping.", "बिल्ली सो रही है।"},
      {"My name is Ravi.", "मेरा नाम रवि है।"},
      {"Where is the school?", "स्कूल कहाँ है?"},
      {"The sky is blue.", "आसमान नीला है।"},
      {"I am going home.", "मैं घर जा रहा हूँ।"},
      {"This is my house.", "यह मेरा घर है।"},
      {"The dog is barking.", "कुत्ता भौंक रहा है।"},
      {"Good morning.", "सुप्रभात।"},
      {"Please sit down.", "कृपया बैठिए।"},
      {"I like eating ice cream.", "मुझे आइसक्रीम खाना पसंद है।"},
      {"The tree is tall.", "पेड़ ऊँचा है।"},
      {"We eat rice.", "हम चावल खाते हैं।"},
      {"The child is laughing.", "बच्चा हँस रहा है।"},
      {"Open the door.", "दरवाज़ा खोलो।"},
      {"The milk is white.", "दूध सफ़ेद है।"},
      {"I have two brothers.", "मेरे दो भाई हैं।"},
      {"The train is late.", "ट्रेन देर से है।"},
      {"She sings well.", "वह अच्छा गाती है।"},
      {"It is raining.", "बारिश हो रही है।"},
      {"Come here.", "यहाँ आओ।"},
  };
  return pairs;
}

struct TinyModel {
  std::unique_ptr<Tokenizer> src, tgt;
  std::unique_ptr<Transformer> model;
};

TinyModel make_tiny_model(bool tie_output, const std::string& norm) {
  std::vector<std::string> en, hi;
  for (const auto& [s, t] : tiny_pairs()) {
    en.push_back(s);
    hi.push_back(t);
  }
  TokenizerOptions opts;
  opts.vocab_size = 40;
  TinyModel m;
  m.src = std::make_unique<Tokenizer>(Tokenizer::train(en, opts));
  opts.vocab_size = 80;  // the Hindi side has more distinct characters than 40
  m.tgt = std::make_unique<Tokenizer>(Tokenizer::train(hi, opts));
  const ModelConfig cfg =
      tiny_config({m.src->vocab_size(), m.tgt->vocab_size(), 16, 2, 24, 1, 2, 32}, norm, tie_output);
  m.model = std::make_unique<Transformer>(cfg);
  m.model->init_parameters(1234);
  return m;
}

/// A saved tiny model: its path and the safetensors contents as written.
struct SavedTiny {
  TinyModel m;
  std::string path;
  SafetensorsFile contents;
};

SavedTiny save_tiny(const TempDir& dir) {
  SavedTiny s{make_tiny_model(false, "pre"), dir.file("tiny.safetensors"), {}};
  save_model(s.path, *s.m.model, *s.m.src, *s.m.tgt, {{"step", "7"}});
  s.contents = read_safetensors(s.path);
  return s;
}

/// Name of the first parameter with a 2-D non-square shape.
std::string non_square_param(const Transformer& model) {
  for (const Param& p : model.params().params())
    if (p.shape.size() == 2 && p.shape[0] != p.shape[1]) return p.name;
  FAIL("no non-square parameter");
  return {};
}

}  // namespace

TEST_CASE("model file: save then load is bit-exact", "[io][model_file]") {
  TempDir dir;
  for (const auto& [tie, norm] : {std::pair<bool, std::string>{false, "pre"}, {true, "post"}}) {
    INFO("tie_output " << tie << ", norm " << norm);
    const TinyModel m = make_tiny_model(tie, norm);
    CHECK(m.src->vocab_size() <= 40);
    CHECK(m.tgt->vocab_size() <= 80);
    const std::string path = dir.file("model_" + norm + ".safetensors");
    save_model(path, *m.model, *m.src, *m.tgt, {{"step", "7"}, {"dev_perplexity", "12.5"}});
    CHECK(dir.entries().size() == (norm == "pre" ? 1u : 2u));  // no temporary file left

    const TranslationModel loaded = load_model(path);
    CHECK(loaded.transformer->config().to_json() == m.model->config().to_json());
    CHECK(loaded.src_tokenizer->serialized() == m.src->serialized());
    CHECK(loaded.tgt_tokenizer->serialized() == m.tgt->serialized());
    CHECK(loaded.src_tokenizer->encode("We are friends.") == m.src->encode("We are friends."));
    CHECK(loaded.metadata.at("step") == "7");
    CHECK(loaded.metadata.at("dev_perplexity") == "12.5");
    CHECK(loaded.metadata.at("format") == "anuvad");
    CHECK(loaded.metadata.at("format_version") == "1");

    const auto& saved_params = m.model->params().params();
    const auto& loaded_params = loaded.transformer->params().params();
    REQUIRE(saved_params.size() == loaded_params.size());
    for (size_t i = 0; i < saved_params.size(); ++i) {
      const Param& a = saved_params[i];
      const Param& b = loaded_params[i];
      INFO("parameter " << a.name);
      CHECK(a.name == b.name);
      CHECK(a.shape == b.shape);
      REQUIRE(a.value.rows() == b.value.rows());
      REQUIRE(a.value.cols() == b.value.cols());
      CHECK(std::memcmp(a.value.data(), b.value.data(), sizeof(Scalar) * size_t(a.value.size())) == 0);
    }
    // The file holds exactly the parameters and the two tokenizers.
    const SafetensorsFile raw = read_safetensors(path);
    CHECK(raw.tensors.size() == saved_params.size() + 2);
    CHECK(raw.tensors.at("tokenizer.src").dtype == "U8");
    CHECK(raw.tensors.at("tokenizer.tgt").bytes == m.tgt->serialized());
    CHECK(raw.tensors.count("output_projection.weight") == (tie ? 0u : 1u));
  }
}

TEST_CASE("model file: corrupted files are ModelFileErrors naming the tensor or field", "[io][model_file]") {
  TempDir dir;
  SavedTiny s = save_tiny(dir);
  REQUIRE_NOTHROW(load_model(s.path));
  const std::string bad = dir.file("bad.safetensors");
  SafetensorsFile f = s.contents;
  auto expect = [&](const std::string& what) {
    write_safetensors(bad, f);
    CHECK_THROWS_AS(load_model(bad), ModelFileError);
    CHECK_THROWS_WITH(load_model(bad), Contains(bad) && Contains(what));
  };
  const std::string some_param = s.m.model->params().params().back().name;
  const std::string matrix = non_square_param(*s.m.model);

  SECTION("a parameter tensor removed") {
    f.tensors.erase(some_param);
    expect(some_param);
    CHECK_THROWS_WITH(load_model(bad), Contains("missing"));
  }
  SECTION("a tokenizer tensor removed") {
    f.tensors.erase("tokenizer.tgt");
    expect("tokenizer.tgt");
  }
  SECTION("a tensor with the wrong shape (same number of elements)") {
    auto& t = f.tensors.at(matrix);
    std::swap(t.shape[0], t.shape[1]);
    expect(matrix);
    CHECK_THROWS_WITH(load_model(bad), Contains("shape"));
  }
  SECTION("a tensor with the wrong number of elements") {
    auto& t = f.tensors.at(some_param);
    t.shape.back() += 1;
    size_t count = 1;
    for (int64_t d : t.shape) count *= size_t(d);
    t.bytes.resize(count * 4, '\0');
    expect(some_param);
  }
  SECTION("an extra unknown tensor") {
    f.tensors["encoder.layers.9.bogus.weight"] = RawTensor{"F32", {1}, f32_bytes({0.5f})};
    expect("encoder.layers.9.bogus.weight");
  }
  SECTION("an extra unknown tensor under the tokenizer prefix") {
    f.tensors["tokenizer.extra"] = RawTensor{"U8", {3}, "abc"};
    expect("tokenizer.extra");
  }
  SECTION("a NaN weight") {
    auto& t = f.tensors.at(matrix);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(&t.bytes[4], &nan, 4);
    expect(matrix);
    CHECK_THROWS_WITH(load_model(bad), Contains("NaN"));
  }
  SECTION("an infinite weight") {
    auto& t = f.tensors.at(some_param);
    const float inf = -std::numeric_limits<float>::infinity();
    std::memcpy(&t.bytes[t.bytes.size() - 4], &inf, 4);
    expect(some_param);
  }
  SECTION("a parameter with an integer dtype") {
    auto& t = f.tensors.at(some_param);
    t.dtype = "I32";
    expect(some_param);
    CHECK_THROWS_WITH(load_model(bad), Contains("dtype"));
  }
  SECTION("format \"other\"") {
    f.metadata["format"] = "other";
    expect("format");
    CHECK_THROWS_WITH(load_model(bad), Contains("other"));
  }
  SECTION("format_version \"2\"") {
    f.metadata["format_version"] = "2";
    expect("format_version");
  }
  SECTION("no metadata at all") {
    f.metadata.clear();
    expect("format");
  }
  SECTION("config missing, not JSON, or invalid") {
    f.metadata.erase("config");
    expect("config");
    f.metadata["config"] = "{not json";
    expect("config");
    auto cfg = nlohmann::json::parse(s.contents.metadata.at("config"));
    cfg["n_heads"] = 3;  // does not divide d_model = 16
    f.metadata["config"] = cfg.dump();
    expect("n_heads");
    cfg = nlohmann::json::parse(s.contents.metadata.at("config"));
    cfg["colour"] = "blue";
    f.metadata["config"] = cfg.dump();
    expect("colour");
  }
  SECTION("a config whose vocabulary size disagrees with the tokenizer") {
    // Shrink the source embedding and the config together: the tensors fit, the tokenizer not.
    auto cfg = nlohmann::json::parse(s.contents.metadata.at("config"));
    const int v = cfg["src_vocab_size"].get<int>();
    cfg["src_vocab_size"] = v - 1;
    f.metadata["config"] = cfg.dump();
    auto& emb = f.tensors.at("encoder.embed_tokens.weight");
    REQUIRE(emb.shape[0] == v);
    emb.shape[0] = v - 1;
    emb.bytes.resize(emb.bytes.size() / size_t(v) * size_t(v - 1));
    expect("vocabulary");
  }
  SECTION("a tokenizer tensor that is not a SentencePiece model") {
    f.tensors.at("tokenizer.src") = RawTensor{"U8", {7}, "garbage"};
    expect("SentencePiece");
  }
  SECTION("a tokenizer tensor with the wrong dtype") {
    auto& t = f.tensors.at("tokenizer.src");
    t.dtype = "I8";
    expect("tokenizer.src");
  }
}

TEST_CASE("model file: F64 parameters are accepted and converted", "[io][model_file]") {
  TempDir dir;
  SavedTiny s = save_tiny(dir);
  SafetensorsFile f = s.contents;
  const std::string name = non_square_param(*s.m.model);
  RawTensor& t = f.tensors.at(name);
  std::string wide(t.bytes.size() * 2, '\0');
  for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
    float x;
    std::memcpy(&x, &t.bytes[i * 4], 4);
    const double d = x;
    std::memcpy(&wide[i * 8], &d, 8);
  }
  t.dtype = "F64";
  t.bytes = wide;
  const std::string path = dir.file("f64.safetensors");
  write_safetensors(path, f);
  const TranslationModel m = load_model(path);
  const Param* a = s.m.model->params().find(name);
  const Param* b = m.transformer->params().find(name);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->value == b->value);
}

TEST_CASE("model file: missing and non-model files", "[io][model_file]") {
  TempDir dir;
  const std::string missing = dir.file("nonexistent.safetensors");
  CHECK_THROWS_AS(load_model(missing), IoError);
  CHECK_THROWS_WITH(load_model(missing), Contains(missing));

  const std::string text = dir.file("README.md");
  write_file(text, "# models/\n\nTrained model files land here.\n");
  CHECK_THROWS_AS(load_model(text), ModelFileError);
  CHECK_THROWS_WITH(load_model(text), Contains(text));

  // A valid safetensors file that is not an anuvad model.
  const std::string other = dir.file("other.safetensors");
  write_safetensors(other, sample_file());
  CHECK_THROWS_AS(load_model(other), ModelFileError);
  CHECK_THROWS_WITH(load_model(other), Contains(other) && Contains("format"));

  // A directory.
  CHECK_THROWS_AS(load_model(dir.path().string()), Error);
}

/// Writes dir/hostile.safetensors: anuvad metadata with `config_json`, a 1-byte source
/// tokenizer and no parameter tensor at all; returns its path.
std::string write_config_only_model(const TempDir& dir, const std::string& config_json) {
  const std::string path = dir.file("hostile.safetensors");
  anuvad::SafetensorsFile f;
  f.metadata = {{"format", "anuvad"}, {"format_version", "1"}, {"config", config_json}};
  f.tensors["tokenizer.src"] = {"U8", {1}, std::string(1, 'x')};
  anuvad::write_safetensors(path, f);
  return path;
}

TEST_CASE("model file: a hostile config cannot make the loader allocate gigabytes", "[io][model_file]") {
  TempDir dir;
  const std::string path = write_config_only_model(
      dir, R"({"d_model": 65536, "n_heads": 1, "d_ff": 1048576, "src_vocab_size": 10000000,
              "tgt_vocab_size": 10000000, "encoder_layers": 1000, "decoder_layers": 1000})");
  CHECK_THROWS_AS(anuvad::load_model(path), anuvad::ModelFileError);
  CHECK_THROWS_WITH(anuvad::load_model(path), Catch::Contains("config implies"));
}

TEST_CASE("model file: max_positions costs no memory before the tensors are checked", "[io][model_file]") {
  // Within the 16M-parameter allowance (d_model 1024, 1+1 layers: ~12.6M parameters, never
  // touched) but with 65536 positions: a [max_positions, d_model] sinusoid table per embedding
  // would be 2 × 256 MiB written before "missing" could be reported. The peak resident size may
  // grow by far less than that.
  TempDir dir;
  const std::string path = write_config_only_model(
      dir, R"({"d_model": 1024, "n_heads": 1, "d_ff": 1, "src_vocab_size": 5, "tgt_vocab_size": 5,
              "encoder_layers": 1, "decoder_layers": 1, "max_positions": 65536})");
  // Loaded in a child process, whose peak RSS is its own (ru_maxrss of RUSAGE_SELF is the high
  // mark of everything this test binary did before); it starts at this process's current RSS.
  long pages = 0, resident_pages = 0;
  {
    std::ifstream statm("/proc/self/statm");
    statm >> pages >> resident_pages;
  }
  const long start_kib = resident_pages * (sysconf(_SC_PAGESIZE) / 1024);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      anuvad::load_model(path);
    } catch (const anuvad::ModelFileError& e) {
      _exit(std::string(e.what()).find("missing") != std::string::npos ? 0 : 2);
    } catch (...) {
    }
    _exit(3);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));  // refused with "tensor ... missing"
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  const long grown_kib = usage.ru_maxrss - start_kib;
  INFO("child peak RSS " << usage.ru_maxrss << " KiB, started at " << start_kib << " KiB");
  CHECK(grown_kib < 128 * 1024);
}
