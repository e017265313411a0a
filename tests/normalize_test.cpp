// The text normalization (include/anuvad/text/normalize.h): NFC, whitespace, byte-order marks.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "anuvad/core/error.h"
#include "anuvad/text/corpus.h"
#include "anuvad/text/normalize.h"
#include "anuvad/text/tokenizer.h"

using anuvad::normalize_text;
using anuvad::TextNormalization;

namespace {
std::string nfc(const std::string& s) { return normalize_text(s, TextNormalization::kNfcSpaces); }
}  // namespace

TEST_CASE("NFC: canonically equal spellings become the same code points", "[normalize]") {
  const std::string precomposed = "\xE0\xA5\x9E\xE0\xA5\x8B\xE0\xA4\xA8";       // U+095E ो न
  const std::string nukta = "\xE0\xA4\xAB\xE0\xA4\xBC\xE0\xA5\x8B\xE0\xA4\xA8";  // U+092B U+093C ो न
  CHECK(precomposed != nukta);
  CHECK(nfc(precomposed) == nfc(nukta));
  // U+095E is a composition exclusion: NFC keeps the decomposed letter + nukta.
  CHECK(nfc(precomposed) == nukta);
  // Latin: e + combining acute → é (U+00E9).
  CHECK(nfc("cafe\xCC\x81") == "caf\xC3\xA9");
  // NFC, not NFKC: compatibility characters (the ligature ﬁ, full-width Ａ) stay as typed.
  CHECK(nfc("\xEF\xAC\x81") == "\xEF\xAC\x81");
  CHECK(nfc("\xEF\xBC\xA1") == "\xEF\xBC\xA1");
}

TEST_CASE("Every Unicode whitespace becomes one space; runs collapse; ends are trimmed",
          "[normalize]") {
  CHECK(nfc("We are\tfriends.") == "We are friends.");
  CHECK(nfc("We are\xC2\xA0" "friends.") == "We are friends.");             // no-break space
  CHECK(nfc("We are\xE2\x80\x83\xE2\x80\xAF" "friends.") == "We are friends.");  // em space, narrow nbsp
  CHECK(nfc("We are\xE3\x80\x80" "friends.") == "We are friends.");         // ideographic space
  CHECK(nfc("We\x0B" "are\x0C" "friends\xC2\x85" ".") == "We are friends .");
  CHECK(nfc("\tWe  are \t friends.  ") == "We are friends.");
  CHECK(nfc("a\xE2\x80\xA8" "b\xE2\x80\xA9" "c") == "a b c");  // line and paragraph separators
  // Zero-width joiners are not whitespace: they change how Devanagari is drawn.
  CHECK(nfc("\xE0\xA4\x95\xE0\xA5\x8D\xE2\x80\x8D") == "\xE0\xA4\x95\xE0\xA5\x8D\xE2\x80\x8D");
}

TEST_CASE("A line of nothing but whitespace or byte-order marks is empty", "[normalize]") {
  for (const std::string s : {"", " ", "\t", "\x0B", "\xC2\xA0", "\n", "\r\n", "\xEF\xBB\xBF",
                              " \xEF\xBB\xBF\t\xC2\xA0 "})
    CHECK(nfc(s).empty());
}

TEST_CASE("Byte-order marks are removed anywhere in a line", "[normalize]") {
  CHECK(nfc("\xEF\xBB\xBFWe are friends.") == "We are friends.");
  CHECK(nfc("We are\xEF\xBB\xBF friends.") == "We are friends.");
}

TEST_CASE("The identity rule keeps text as typed", "[normalize]") {
  const std::string s = "\tWe\xC2\xA0 are\xEF\xBB\xBF \xE0\xA5\x9E ";
  CHECK(normalize_text(s, TextNormalization::kIdentity) == s);
}

TEST_CASE("Normalization names round-trip; invalid input is refused", "[normalize]") {
  for (auto n : {TextNormalization::kIdentity, TextNormalization::kNfcSpaces})
    CHECK(anuvad::normalization_from_name(anuvad::normalization_name(n)) == n);
  CHECK_THROWS_AS(anuvad::normalization_from_name("nfkc"), anuvad::ConfigError);
  CHECK_THROWS_AS(nfc("ab\xFF"), anuvad::DataError);
}

TEST_CASE("The bundled corpus is already normalized (the default run does not change)",
          "[normalize]") {
  for (const char* name : {"train.tsv", "dev.tsv", "test.tsv"}) {
    const auto pairs = anuvad::read_parallel_corpus({std::string(ANUVAD_SOURCE_DIR) + "/data/" + name});
    REQUIRE(!pairs.empty());
    for (const auto& p : pairs) {
      INFO(p.origin);
      CHECK(nfc(p.src) == p.src);
      CHECK(nfc(p.tgt) == p.tgt);
    }
  }
}

TEST_CASE("An unseen character decodes to ⁇ in its place, with only the spaces typed around it",
          "[normalize][tokenizer]") {
  const std::vector<std::string> sentences = {"I like snow.", "We are friends.", "snow is cold",
                                              "I am here.", "friends like snow"};
  anuvad::TokenizerOptions opts;
  opts.vocab_size = 40;
  const anuvad::Tokenizer tok = anuvad::Tokenizer::train(sentences, opts);
  const std::string snowman = "\xE2\x98\x83", unk = "\xE2\x81\x87";
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"I" + snowman + "snow", "I" + unk + "snow"},
           {"I " + snowman + " snow", "I " + unk + " snow"},
           {"I " + snowman + "snow", "I " + unk + "snow"},
           {snowman + " snow", unk + " snow"},
           {"snow " + snowman, "snow " + unk},
           {snowman, unk},
           {"I like snow.", "I like snow."}}) {
    INFO(in);
    const auto ids = tok.encode(in);
    CHECK(tok.detokenize(ids) == out);
    // The decoded text encodes to the same ids (⁇ is unseen too), so translate | score agree.
    CHECK(tok.encode(tok.detokenize(ids)) == ids);
  }
}

TEST_CASE("A vocabulary too small for the text's characters is refused in anuvad's terms, with "
          "the exact size that works",
          "[tokenizer]") {
  std::vector<std::string> hindi;
  for (const auto& p : anuvad::read_parallel_corpus({std::string(ANUVAD_SOURCE_DIR) + "/data/train.tsv"}))
    hindi.push_back(p.tgt);
  anuvad::TokenizerOptions opts;
  opts.name = "target vocabulary (--tgt-vocab-size)";
  // 63 distinct characters besides the space, + the word boundary ▁ + 4 specials = 68.
  for (int size : {20, 67}) {
    opts.vocab_size = size;
    try {
      (void)anuvad::Tokenizer::train(hindi, opts);
      FAIL("no error for vocab_size " << size);
    } catch (const anuvad::TokenizerError& e) {
      const std::string msg = e.what();
      CHECK(msg == "target vocabulary (--tgt-vocab-size) of " + std::to_string(size) +
                       " pieces is too small for the 63 distinct characters of its text (each needs a piece, as do "
                       "the word boundary ▁ and 4 specials): use at least 68");
      CHECK(msg.find("character_coverage") == std::string::npos);
    }
  }
  opts.vocab_size = 68;  // the size the message names is enough for SentencePiece
  CHECK(anuvad::Tokenizer::train(hindi, opts).vocab_size() == 68);
}
