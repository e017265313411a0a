// The parallel-corpus reader in the float build (TSV and .en/.hi pairs, BOM, CRLF, every
// rejected line naming file:line) and the bundled corpus under data/.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/text/corpus.h"
#include "support/io_fixtures.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

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
