// File handling in the float build: the parallel-corpus reader (TSV and .en/.hi pairs, BOM,
// CRLF, every rejected line naming file:line), the bundled corpus under data/, the SentencePiece
// tokenizer (special ids, lossless round trip, serialisation), the safetensors reader/writer
// (spec layout, atomic replace, hostile files) and the model file (bit-exact save/load, every
// corruption rejected with a message naming the tensor or field).
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utf8.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "anuvad/text/corpus.h"
#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/nn/transformer.h"

using namespace anuvad;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

/// A fresh directory under the system temporary directory, removed with its contents at scope end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const fs::path p = fs::temp_directory_path() /
                         ("anuvad_io_test_" + std::to_string(::getpid()) + "_" +
                          std::to_string(counter++) + "_" + std::to_string(rd() % 1000000));
      std::error_code ec;
      if (fs::create_directory(p, ec)) {
        path_ = p;
        return;
      }
    }
    FAIL("cannot create a temporary directory");
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Full path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  /// Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string repo_path(const std::string& rel) { return std::string(ANUVAD_SOURCE_DIR) + "/" + rel; }

/// Code points of a valid UTF-8 string.
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  utf8::utf8to32(s.begin(), s.end(), std::back_inserter(out));
  return out;
}

std::string to_utf8(uint32_t cp) {
  std::string out;
  utf8::append(cp, std::back_inserter(out));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Raw safetensors construction for hostile-file tests.

/// 8-byte little-endian size + header text (padded with spaces to a multiple of 8) + data.
/// `declared_size` overrides the size field (to lie about the header length).
std::string raw_safetensors(std::string header, const std::string& data,
                            std::optional<uint64_t> declared_size = std::nullopt) {
  while (header.size() % 8 != 0) header.push_back(' ');
  const uint64_t n = declared_size ? *declared_size : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

uint64_t le_u64(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return n;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string out(v.size() * 4, '\0');
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Bundled corpus helpers.

const std::vector<SentencePair>& bundled(const std::string& name) {
  static std::map<std::string, std::vector<SentencePair>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, read_parallel_corpus({repo_path("data/" + name)})).first;
  return it->second;
}

std::vector<std::string> sides(const std::vector<SentencePair>& pairs, bool target) {
  std::vector<std::string> out;
  for (const auto& p : pairs) out.push_back(target ? p.tgt : p.src);
  return out;
}

/// Tokenizers trained once per process on data/train.tsv (vocab 1000).
const Tokenizer& bundled_tokenizer(bool target) {
  static std::unique_ptr<Tokenizer> tok[2];
  if (!tok[target]) {
    TokenizerOptions opts;
    opts.vocab_size = 1000;
    tok[target] = std::make_unique<Tokenizer>(Tokenizer::train(sides(bundled("train.tsv"), target), opts));
  }
  return *tok[target];
}

// ---------------------------------------------------------------------------------------------
// Tiny model for the model-file tests.

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
  ModelConfig cfg;
  cfg.src_vocab_size = m.src->vocab_size();
  cfg.tgt_vocab_size = m.tgt->vocab_size();
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.d_ff = 24;
  cfg.encoder_layers = 1;
  cfg.decoder_layers = 2;
  cfg.tie_output = tie_output;
  cfg.norm = norm;
  cfg.max_positions = 32;
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

// =============================================================================================
// Corpus reader
// =============================================================================================

TEST_CASE("corpus: a well-formed TSV is read line by line", "[io][corpus]") {
  TempDir dir;
  const std::string path = dir.file("ok.tsv");
  write_file(path, "hello\tनमस्ते\nWe are friends.\tहम दोस्त हैं।\nlast line\tअंतिम");  // no final newline
  const auto pairs = read_parallel_corpus({path});
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[0].src == "hello");
  CHECK(pairs[0].tgt == "नमस्ते");
  CHECK(pairs[1].src == "We are friends.");
  CHECK(pairs[1].tgt == "हम दोस्त हैं।");
  CHECK(pairs[2].tgt == "अंतिम");
  CHECK(pairs[0].origin == path + ":1");
  CHECK(pairs[2].origin == path + ":3");
}

TEST_CASE("corpus: a UTF-8 byte-order mark and CRLF line ends are removed", "[io][corpus]") {
  TempDir dir;
  SECTION("BOM") {
    const std::string path = dir.file("bom.tsv");
    write_file(path, "\xEF\xBB\xBFhello\tनमस्ते\nbye\tअलविदा\n");
    const auto pairs = read_parallel_corpus({path});
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0].src == "hello");
    CHECK(pairs[1].src == "bye");
  }
  SECTION("CRLF") {
    const std::string path = dir.file("crlf.tsv");
    write_file(path, "hello\tनमस्ते\r\nbye\tअलविदा\r\n");
    const auto pairs = read_parallel_corpus({path});
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0].tgt == "नमस्ते");
    CHECK(pairs[1].tgt == "अलविदा");
  }
  SECTION("BOM and CRLF together, .en/.hi pair") {
    write_file(dir.file("c.en"), "\xEF\xBB\xBFhello\r\nbye\r\n");
    write_file(dir.file("c.hi"), "\xEF\xBB\xBFनमस्ते\r\nअलविदा\r\n");
    const auto pairs = read_parallel_corpus({dir.file("c.en")});
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0].src == "hello");
    CHECK(pairs[0].tgt == "नमस्ते");
    CHECK(pairs[1].tgt == "अलविदा");
  }
}

TEST_CASE("corpus: malformed TSV lines are DataErrors naming file:line", "[io][corpus]") {
  TempDir dir;
  const std::string path = dir.file("bad.tsv");
  auto expect_error = [&](const std::string& content, int line, const std::string& reason) {
    INFO("content: " << content);
    write_file(path, content);
    CHECK_THROWS_AS(read_parallel_corpus({path}), DataError);
    CHECK_THROWS_WITH(read_parallel_corpus({path}), Contains(path + ":" + std::to_string(line)));
    CHECK_THROWS_WITH(read_parallel_corpus({path}), Contains(reason));
  };
  const std::string good = "hello\tनमस्ते\nbye\tअलविदा\n";
  SECTION("line without a tab") { expect_error(good + "no tab here\n", 3, "no tab"); }
  SECTION("two tabs") { expect_error("a\tb\tc\n" + good, 1, "more than one tab"); }
  SECTION("empty source side") { expect_error(good + "\tनमस्ते\n", 3, "empty source"); }
  SECTION("empty target side") { expect_error("hello\t\n" + good, 1, "empty target"); }
  SECTION("whitespace-only source side") { expect_error(good + "  \t\tx\n", 3, "tab"); }
  SECTION("whitespace-only source side (spaces)") { expect_error(good + "   \tनमस्ते\n", 3, "empty source"); }
  SECTION("whitespace-only target side") { expect_error(good + "hello\t \r\n", 3, "empty target"); }
  SECTION("empty line") { expect_error(good + "\n" + good, 3, "no tab"); }
}

TEST_CASE("corpus: invalid UTF-8 and NUL bytes are DataErrors naming the line", "[io][corpus]") {
  TempDir dir;
  const std::string path = dir.file("bytes.tsv");
  const std::string good = "hello\tनमस्ते\n";
  const std::vector<std::string> bad_texts = {
      "\xC3\x28",          // invalid continuation byte
      "\xC0\xAF",          // overlong encoding of '/'
      "\xED\xA0\x80",      // UTF-16 surrogate
      "\xF4\x90\x80\x80",  // above U+10FFFF
      "\xFF",              // never valid
      "\xE0\xA4",          // truncated Devanagari character
  };
  for (const std::string& bad : bad_texts) {
    for (bool in_target : {false, true}) {
      const std::string line = in_target ? "text\tनम" + bad + "स्ते\n" : "te" + bad + "xt\tनमस्ते\n";
      write_file(path, good + good + line + good);
      INFO("bad bytes of length " << bad.size() << (in_target ? " in the target" : " in the source"));
      CHECK_THROWS_AS(read_parallel_corpus({path}), DataError);
      CHECK_THROWS_WITH(read_parallel_corpus({path}), Contains(path + ":3") && Contains("UTF-8"));
    }
  }
  SECTION("NUL byte") {
    write_file(path, good + std::string("hel") + '\0' + "lo\tनमस्ते\n");
    CHECK_THROWS_AS(read_parallel_corpus({path}), DataError);
    CHECK_THROWS_WITH(read_parallel_corpus({path}), Contains(path + ":2") && Contains("NUL"));
  }
  SECTION("check_text reasons") {
    CHECK(check_text("hello नमस्ते").empty());
    CHECK(check_text("").empty());
    CHECK_THAT(check_text("ab\xC3\x28"), Contains("invalid UTF-8 at byte 3"));
    CHECK_THAT(check_text(std::string("abc\0", 4)), Contains("NUL byte at byte 4"));
  }
}

TEST_CASE("corpus: a missing or empty file", "[io][corpus]") {
  TempDir dir;
  const std::string missing = dir.file("does_not_exist.tsv");
  CHECK_THROWS_AS(read_parallel_corpus({missing}), IoError);
  CHECK_THROWS_WITH(read_parallel_corpus({missing}), Contains(missing));
  const std::string empty = dir.file("empty.tsv");
  write_file(empty, "");
  CHECK_THROWS_AS(read_parallel_corpus({empty}), DataError);
  CHECK_THROWS_WITH(read_parallel_corpus({empty}), Contains(empty));
  CHECK_THROWS_AS(read_parallel_corpus({}), DataError);
  CHECK_THROWS_AS(read_parallel_corpus({empty, empty, empty}), DataError);
}

TEST_CASE("corpus: .en/.hi line-aligned pairs", "[io][corpus]") {
  TempDir dir;
  const std::string en = dir.file("corpus.en"), hi = dir.file("corpus.hi");
  SECTION("a single .en path is paired with .hi") {
    write_file(en, "hello\nWe are friends.\nI like tea.\n");
    write_file(hi, "नमस्ते\nहम दोस्त हैं।\nमुझे चाय पसंद है।\n");
    const auto pairs = read_parallel_corpus({en});
    REQUIRE(pairs.size() == 3);
    CHECK(pairs[1].src == "We are friends.");
    CHECK(pairs[1].tgt == "हम दोस्त हैं।");
    CHECK(pairs[2].origin == en + ":3");
    // Two explicit paths give the same pairs.
    const auto explicit_pairs = read_parallel_corpus({en, hi});
    REQUIRE(explicit_pairs.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(explicit_pairs[i].src == pairs[i].src);
      CHECK(explicit_pairs[i].tgt == pairs[i].tgt);
    }
  }
  SECTION("line counts differ") {
    write_file(en, "hello\nbye\nthanks\n");
    write_file(hi, "नमस्ते\nअलविदा\n");
    CHECK_THROWS_AS(read_parallel_corpus({en}), DataError);
    CHECK_THROWS_WITH(read_parallel_corpus({en}), Contains(en) && Contains(hi) && Contains("3 vs 2"));
  }
  SECTION("the .hi file is missing") {
    write_file(en, "hello\n");
    CHECK_THROWS_AS(read_parallel_corpus({en}), IoError);
    CHECK_THROWS_WITH(read_parallel_corpus({en}), Contains(hi));
  }
  SECTION("an empty line on one side names that file and line") {
    write_file(en, "hello\nbye\n");
    write_file(hi, "नमस्ते\n  \n");
    CHECK_THROWS_AS(read_parallel_corpus({en}), DataError);
    CHECK_THROWS_WITH(read_parallel_corpus({en}), Contains(hi + ":2"));
  }
  SECTION("invalid UTF-8 in the .hi file names that file and line") {
    write_file(en, "hello\nbye\n");
    write_file(hi, "नमस्ते\nअल\xC3\x28विदा\n");
    CHECK_THROWS_AS(read_parallel_corpus({en}), DataError);
    CHECK_THROWS_WITH(read_parallel_corpus({en}), Contains(hi + ":2"));
  }
}

// =============================================================================================
// The bundled corpus
// =============================================================================================

TEST_CASE("bundled corpus: train, dev and test read cleanly and are disjoint", "[io][corpus]") {
  std::map<std::string, std::string> seen;  // lower-cased English sentence -> file
  size_t total = 0;
  for (const std::string name : {"train.tsv", "dev.tsv", "test.tsv"}) {
    INFO("data/" << name);
    std::vector<SentencePair> pairs;
    REQUIRE_NOTHROW(pairs = read_parallel_corpus({repo_path("data/" + name)}));
    total += pairs.size();
    if (name != "train.tsv") CHECK(pairs.size() >= 80);
    for (const auto& p : pairs) {
      INFO(p.origin << ": " << p.src);
      std::string key = p.src;
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const auto [it, inserted] = seen.emplace(key, name);
      if (!inserted) FAIL_CHECK("English sentence also in " << it->second);
      bool devanagari = false;
      for (uint32_t cp : code_points(p.tgt)) devanagari |= cp >= 0x0900 && cp <= 0x097F;
      if (!devanagari) FAIL_CHECK("Hindi side has no Devanagari: " << p.tgt);
    }
  }
  CHECK(total >= 800);
  const auto& train = bundled("train.tsv");
  for (const std::string required : {"How are you?", "We are friends.", "I like eating ice cream."}) {
    INFO("required sentence: " << required);
    CHECK(std::any_of(train.begin(), train.end(), [&](const SentencePair& p) { return p.src == required; }));
  }
}

// =============================================================================================
// Tokenizer
// =============================================================================================

TEST_CASE("tokenizer: special ids, unknown characters, empty input, bad models", "[io][tokenizer]") {
  const Tokenizer& tok = bundled_tokenizer(true);
  CHECK(tok.vocab_size() > 100);
  CHECK(tok.vocab_size() <= 1000);
  CHECK(tok.piece(0) == "<pad>");
  CHECK(tok.piece(1) == "<unk>");
  CHECK(tok.piece(2) == "<s>");
  CHECK(tok.piece(3) == "</s>");
  CHECK(kPadId == 0);
  CHECK(kUnkId == 1);
  CHECK(kBosId == 2);
  CHECK(kEosId == 3);
  // No ordinary text encodes to a special id other than UNK.
  for (int32_t id : tok.encode("हम दोस्त हैं।")) {
    CHECK(id > kEosId);
    CHECK(id < tok.vocab_size());
  }
  SECTION("an unknown character is UNK and decodes to ⁇") {
    const auto ids = tok.encode("☃");
    CHECK(std::count(ids.begin(), ids.end(), kUnkId) == 1);
    const auto mixed = tok.encode("हम ☃ हैं");
    CHECK(std::count(mixed.begin(), mixed.end(), kUnkId) == 1);
    CHECK_THAT(tok.decode(mixed), Contains("⁇"));
  }
  SECTION("the empty string encodes to no ids and decodes back") {
    CHECK(tok.encode("").empty());
    CHECK(tok.decode({}).empty());
  }
  SECTION("decode skips PAD, BOS and EOS and ignores out-of-range ids") {
    const std::string s = "हम दोस्त हैं।";
    auto ids = tok.encode(s);
    ids.insert(ids.begin(), kBosId);
    ids.push_back(kEosId);
    ids.push_back(kPadId);
    ids.push_back(kPadId);
    CHECK(tok.decode(ids) == s);
    ids.push_back(tok.vocab_size() + 5);
    ids.push_back(-7);
    CHECK(tok.decode(ids) == s);
  }
  SECTION("invalid serialized models and options are TokenizerErrors") {
    CHECK_THROWS_AS(Tokenizer::from_serialized("garbage"), TokenizerError);
    CHECK_THROWS_AS(Tokenizer::from_serialized(""), TokenizerError);
    CHECK_THROWS_AS(Tokenizer::from_serialized(tok.serialized().substr(0, tok.serialized().size() / 2)),
                    TokenizerError);
    CHECK_THROWS_AS(Tokenizer::train({}, TokenizerOptions{}), TokenizerError);
    TokenizerOptions tiny;
    tiny.vocab_size = 4;
    CHECK_THROWS_AS(Tokenizer::train({"hello"}, tiny), TokenizerError);
  }
}

TEST_CASE("tokenizer: decode(encode(s)) == s over the bundled corpus", "[io][tokenizer]") {
  for (bool target : {false, true}) {
    const std::string side = target ? "Hindi" : "English";
    INFO(side << " side");
    const Tokenizer& tok = bundled_tokenizer(target);
    std::set<uint32_t> train_chars;
    for (const auto& s : sides(bundled("train.tsv"), target))
      for (uint32_t cp : code_points(s)) train_chars.insert(cp);

    // Every training line round-trips.
    size_t train_failures = 0;
    for (const auto& p : bundled("train.tsv")) {
      const std::string& s = target ? p.tgt : p.src;
      if (tok.decode(tok.encode(s)) != s) {
        ++train_failures;
        FAIL_CHECK(p.origin << ": does not round-trip: \"" << s << "\" -> \""
                            << tok.decode(tok.encode(s)) << "\"");
      }
    }
    CHECK(train_failures == 0);

    // Dev and test lines round-trip unless they hold a character unseen in training.
    for (const std::string name : {"dev.tsv", "test.tsv"}) {
      size_t failures = 0, unseen_lines = 0;
      std::set<uint32_t> unseen;
      for (const auto& p : bundled(name)) {
        const std::string& s = target ? p.tgt : p.src;
        bool has_unseen = false;
        for (uint32_t cp : code_points(s))
          if (!train_chars.count(cp)) {
            has_unseen = true;
            unseen.insert(cp);
          }
        unseen_lines += has_unseen;
        const auto ids = tok.encode(s);
        if (tok.decode(ids) != s) {
          ++failures;
          if (!has_unseen)
            FAIL_CHECK(p.origin << ": only seen characters but does not round-trip: \"" << s << "\"");
          else
            CHECK(std::count(ids.begin(), ids.end(), kUnkId) > 0);
        } else {
          CHECK_FALSE(has_unseen);  // an unseen character must come back as " ⁇ "
        }
      }
      std::string unseen_text;
      for (uint32_t cp : unseen) {
        char hex[16];
        std::snprintf(hex, sizeof hex, " U+%04X", cp);
        unseen_text += hex + std::string(" '") + to_utf8(cp) + "'";
      }
      WARN(side << " data/" << name << ": " << failures << " line(s) do not round-trip ("
                << unseen_lines << " with characters unseen in train:" << unseen_text << ")");
      CHECK(failures == unseen_lines);
    }
  }
}

TEST_CASE("tokenizer: serialized() round trip gives identical encodings", "[io][tokenizer]") {
  for (bool target : {false, true}) {
    const Tokenizer& tok = bundled_tokenizer(target);
    const Tokenizer copy = Tokenizer::from_serialized(tok.serialized());
    CHECK(copy.serialized() == tok.serialized());
    REQUIRE(copy.vocab_size() == tok.vocab_size());
    for (int32_t id = 0; id < tok.vocab_size(); ++id) REQUIRE(copy.piece(id) == tok.piece(id));
    for (const std::string name : {"train.tsv", "dev.tsv", "test.tsv"})
      for (const auto& s : sides(bundled(name), target)) {
        INFO(s);
        REQUIRE(copy.encode(s) == tok.encode(s));
      }
    // Training is deterministic: the same sentences give the same model.
    TokenizerOptions opts;
    opts.vocab_size = 1000;
    const Tokenizer again = Tokenizer::train(sides(bundled("train.tsv"), target), opts);
    CHECK(again.serialized() == tok.serialized());
  }
}

// =============================================================================================
// safetensors
// =============================================================================================

namespace {

SafetensorsFile sample_file() {
  SafetensorsFile f;
  f.metadata = {{"format", "test"}, {"note", "हिन्दी \"quoted\" \\ text"}};
  RawTensor w;
  w.dtype = "F32";
  w.shape = {2, 3};
  w.bytes = f32_bytes({1.5f, -0.0f, std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::infinity(), std::nanf(""), -3.25e7f});
  f.tensors["layer.weight"] = w;
  RawTensor b;
  b.dtype = "U8";
  b.shape = {5};
  b.bytes = std::string("\x00\x01\xff\x7f\x80", 5);
  f.tensors["bytes"] = b;
  RawTensor d;
  d.dtype = "F64";
  d.shape = {1};
  d.bytes = std::string(8, '\0');
  const double pi = 3.141592653589793;
  std::memcpy(d.bytes.data(), &pi, 8);
  f.tensors["z.double"] = d;
  return f;
}

void check_equal(const SafetensorsFile& a, const SafetensorsFile& b) {
  CHECK(a.metadata == b.metadata);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    INFO("tensor " << name);
    const auto it = b.tensors.find(name);
    REQUIRE(it != b.tensors.end());
    CHECK(it->second.dtype == t.dtype);
    CHECK(it->second.shape == t.shape);
    CHECK(it->second.bytes == t.bytes);  // bit-exact, NaN payloads included
  }
}

}  // namespace

TEST_CASE("safetensors: write/read round trip", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const SafetensorsFile f = sample_file();
  write_safetensors(path, f);
  check_equal(f, read_safetensors(path));

  SECTION("no metadata, no tensors") {
    write_safetensors(path, SafetensorsFile{});
    const SafetensorsFile e = read_safetensors(path);
    CHECK(e.metadata.empty());
    CHECK(e.tensors.empty());
  }
  SECTION("many tensors, some with zero elements") {
    SafetensorsFile g;
    for (int i = 0; i < 40; ++i) {
      RawTensor t;
      t.dtype = i % 3 == 0 ? "U8" : "F32";
      const int64_t n = i % 4 == 1 ? 0 : i + 1;
      t.shape = i % 2 ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n};
      t.bytes = std::string(size_t(n) * size_t(dtype_size(t.dtype)), static_cast<char>(i));
      g.tensors[(i < 10 ? "t0" : "t") + std::to_string(i)] = t;
    }
    RawTensor scalar;  // shape [] = one element
    scalar.dtype = "F32";
    scalar.bytes = f32_bytes({42.0f});
    g.tensors["scalar"] = scalar;
    write_safetensors(path, g);
    check_equal(g, read_safetensors(path));
  }
}

TEST_CASE("safetensors: the header follows the spec", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const SafetensorsFile f = sample_file();
  write_safetensors(path, f);
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() >= 8);
  const uint64_t n = le_u64(bytes);
  CHECK(n % 8 == 0);  // the data section starts 8-byte aligned
  REQUIRE(n <= bytes.size() - 8);
  const std::string header_text = bytes.substr(8, n);
  nlohmann::json header;
  REQUIRE_NOTHROW(header = nlohmann::json::parse(header_text));  // padding is JSON whitespace
  REQUIRE(header.is_object());
  REQUIRE(header.contains("__metadata__"));
  CHECK(header["__metadata__"].get<std::map<std::string, std::string>>() == f.metadata);
  CHECK(header.size() == f.tensors.size() + 1);
  const std::string data = bytes.substr(8 + n);
  size_t total = 0;
  for (const auto& [name, t] : f.tensors) {
    INFO("tensor " << name);
    REQUIRE(header.contains(name));
    const auto& e = header[name];
    CHECK(e["dtype"] == t.dtype);
    CHECK(e["shape"].get<std::vector<int64_t>>() == t.shape);
    const auto off = e["data_offsets"].get<std::vector<uint64_t>>();
    REQUIRE(off.size() == 2);
    REQUIRE(off[0] <= off[1]);
    REQUIRE(off[1] <= data.size());
    CHECK(data.substr(off[0], off[1] - off[0]) == t.bytes);
    total += t.bytes.size();
  }
  CHECK(data.size() == total);  // no holes or trailing bytes
}

TEST_CASE("safetensors: the writer is atomic and leaves no temporary file", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, sample_file());
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});

  // Replace the file while a reader holds the old one open: the reader keeps the old bytes
  // (the new file was renamed into place, not written over the old one).
  const std::string old_bytes = read_file(path);
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  std::ifstream held(path, std::ios::binary);
  REQUIRE(held);
  SafetensorsFile g = sample_file();
  g.metadata["note"] = "replaced";
  g.tensors["extra"] = RawTensor{"U8", {3}, "abc"};
  write_safetensors(path, g);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  check_equal(g, read_safetensors(path));
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);
  std::ostringstream held_bytes;
  held_bytes << held.rdbuf();
  CHECK(held_bytes.str() == old_bytes);

  SECTION("an unwritable destination is an IoError and leaves nothing behind") {
    const std::string bad = dir.file("no_such_dir/model.safetensors");
    CHECK_THROWS_AS(write_safetensors(bad, g), IoError);
    CHECK_THROWS_WITH(write_safetensors(bad, g), Contains("no_such_dir"));
    CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  }
}

TEST_CASE("safetensors: every truncation of a valid file is a ModelFileError", "[io][safetensors]") {
  TempDir dir;
  const std::string full_path = dir.file("full.safetensors");
  SafetensorsFile f;
  f.metadata["k"] = "v";
  f.tensors["a"] = RawTensor{"F32", {2}, f32_bytes({1.0f, 2.0f})};
  f.tensors["b"] = RawTensor{"U8", {3}, "xyz"};
  write_safetensors(full_path, f);
  const std::string bytes = read_file(full_path);
  REQUIRE(bytes.size() < 1000);
  const std::string path = dir.file("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("prefix of " << len << " of " << bytes.size() << " bytes");
    write_file(path, bytes.substr(0, len));
    CHECK_THROWS_AS(read_safetensors(path), ModelFileError);
  }
  // Trailing bytes after the data section are not part of any tensor but harmless.
  write_file(path, bytes + "junk");
  check_equal(f, read_safetensors(path));
}

TEST_CASE("safetensors: hostile files are ModelFileErrors naming the problem", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("hostile.safetensors");
  const std::string data8 = f32_bytes({1.0f, 2.0f});
  auto expect = [&](const std::string& file_bytes, const std::string& reason) {
    write_file(path, file_bytes);
    CHECK_THROWS_AS(read_safetensors(path), ModelFileError);
    CHECK_THROWS_WITH(read_safetensors(path), Contains(path) && Contains(reason));
  };
  // A valid baseline, so each case below differs from an accepted file in one way.
  write_file(path, raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8));
  REQUIRE(read_safetensors(path).tensors.at("a").bytes == data8);

  SECTION("header size larger than the file") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8, 4096),
           "header size 4096");
  }
  SECTION("header size 2^63") {
    expect(raw_safetensors("{}", "", uint64_t(1) << 63), "header size");
  }
  SECTION("header size 2^64 - 1") {
    expect(raw_safetensors("{}", "", std::numeric_limits<uint64_t>::max()), "header size");
  }
  SECTION("header size 0") { expect(raw_safetensors("", "", 0), "header size 0"); }
  SECTION("a header of bare JSON values (parse memory ~30x its size)") {
    std::string zeros = "0";
    for (int i = 0; i < 4000; ++i) zeros += ",0";
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[)" + zeros + R"(],"data_offsets":[0,8]}})", data8),
           "more JSON values than a safetensors header holds");
  }
  SECTION("header not JSON") { expect(raw_safetensors("this is not JSON", ""), "not valid JSON"); }
  SECTION("header JSON with trailing garbage") { expect(raw_safetensors("{} x", ""), "not valid JSON"); }
  SECTION("header not UTF-8") { expect(raw_safetensors("{\"\xC3\x28\":1}", ""), "JSON"); }
  SECTION("header a JSON array") { expect(raw_safetensors("[1, 2, 3]", ""), "not a JSON object"); }
  SECTION("header a JSON string") { expect(raw_safetensors("\"abc\"", ""), "not a JSON object"); }
  SECTION("entry not an object") { expect(raw_safetensors(R"({"a":[1,2]})", ""), "tensor a"); }
  SECTION("entry with a missing field") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2]}})", data8), "tensor a");
  }
  SECTION("entry with an extra field") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
           "tensor a");
  }
  SECTION("unknown dtype") {
    expect(raw_safetensors(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", data8),
           "unknown dtype F7");
  }
  SECTION("dtype not a string") {
    expect(raw_safetensors(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data8), "dtype");
  }
  SECTION("shape with a negative entry") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
           "shape");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[-1,-2],"data_offsets":[0,8]}})", data8),
           "shape");
  }
  SECTION("shape with a fractional entry") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8),
           "shape");
  }
  SECTION("shape not an array") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data8), "shape");
  }
  SECTION("data_offsets past the end") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data8),
           "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})",
                           data8),
           "data_offsets");
  }
  SECTION("data_offsets with begin > end") {
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", data8),
           "data_offsets");
  }
  SECTION("data_offsets malformed") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e30]}})", data8), "data_offsets");
  }
  SECTION("byte range that does not match shape x dtype") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", data8),
           "does not match");
    expect(raw_safetensors(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", data8),
           "does not match");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2,0],"data_offsets":[0,8]}})", data8),
           "does not match");
  }
  SECTION("overlapping tensors") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data8),
           "overlap");
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                           data8),
           "overlap");
  }
  SECTION("duplicate tensor names") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data8),
           "duplicate tensor name a");
  }
  SECTION("duplicate keys inside a tensor entry or the metadata") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,4]}})", data8),
           "duplicate key shape");
    expect(raw_safetensors(R"({"__metadata__":{"format":"anuvad","format":"other"},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           data8),
           "duplicate key format");
    expect(raw_safetensors(R"({"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           data8),
           "duplicate key __metadata__");
  }
  SECTION("shape product overflow") {
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})",
                           ""),
           "overflow");
    // 2^62 elements fit in 64 bits, but not 2^62 * 4 bytes.
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})", ""),
           "does not match");
    // Wraps to exactly 0 modulo 2^64: 2^32 * 2^32.
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
           "overflow");
  }
  SECTION("__metadata__ with a non-string value") {
    expect(raw_safetensors(R"({"__metadata__":{"format":"anuvad","step":7}})", ""), "__metadata__.step");
    expect(raw_safetensors(R"({"__metadata__":{"x":null}})", ""), "__metadata__.x");
    expect(raw_safetensors(R"({"__metadata__":["format"]})", ""), "__metadata__");
  }
  SECTION("a plain text file") {
    expect("Trained model files land here.\nNothing else.\n", "not a safetensors file");
    expect("short", "shorter than 8 bytes");
  }
}

TEST_CASE("safetensors: a missing file is an IoError", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("missing.safetensors");
  CHECK_THROWS_AS(read_safetensors(path), IoError);
  CHECK_THROWS_WITH(read_safetensors(path), Contains(path));
}

// =============================================================================================
// Model file
// =============================================================================================

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
