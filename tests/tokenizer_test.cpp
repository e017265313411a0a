// The SentencePiece tokenizer trained on the bundled corpus: special ids, unknown characters,
// lossless round trip, serialisation.
#include <catch2/catch.hpp>

#include <utf8.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/core/tensor.h"
#include "anuvad/text/tokenizer.h"
#include "support/io_fixtures.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

namespace {

std::string to_utf8(uint32_t cp) {
  std::string out;
  utf8::append(cp, std::back_inserter(out));
  return out;
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

}  // namespace

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
    CHECK_THAT(tok.detokenize(mixed), Contains("⁇"));
  }
  SECTION("the empty string encodes to no ids and decodes back") {
    CHECK(tok.encode("").empty());
    CHECK(tok.detokenize({}).empty());
  }
  SECTION("decode skips PAD, BOS and EOS and ignores out-of-range ids") {
    const std::string s = "हम दोस्त हैं।";
    auto ids = tok.encode(s);
    ids.insert(ids.begin(), kBosId);
    ids.push_back(kEosId);
    ids.push_back(kPadId);
    ids.push_back(kPadId);
    CHECK(tok.detokenize(ids) == s);
    ids.push_back(tok.vocab_size() + 5);
    ids.push_back(-7);
    CHECK(tok.detokenize(ids) == s);
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
      if (tok.detokenize(tok.encode(s)) != s) {
        ++train_failures;
        FAIL_CHECK(p.origin << ": does not round-trip: \"" << s << "\" -> \""
                            << tok.detokenize(tok.encode(s)) << "\"");
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
        if (tok.detokenize(ids) != s) {
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
