// Translation metrics (src/text/metrics.cpp) and validation during training (src/train/trainer.cpp):
//   - sacreBLEU's published test cases (sacreBLEU test/test_chrf.py and test/test_bleu.py, 2.x,
//     as reproduced in shared/bench/metrics.py), each to the precision it is published with;
//   - edge cases: empty hypotheses, empty corpus, one-word references, bad input;
//   - Hindi: the danda rule of "13a+danda" (our one deviation from sacreBLEU) and chrF++ words;
//   - a golden file (tests/data/metrics/golden.json, made by tests/tools/make_metrics_golden.py
//     with the independent Python implementation shared/bench/metrics.py): every score to 1e-6
//     and every n-gram statistic exactly;
//   - fit() with chrf/bleu validation: same training as without, early stopping, best models.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anuvad/text/corpus.h"
#include "anuvad/core/error.h"
#include "anuvad/text/metrics.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/decode/translator.h"
#include "anuvad/train/trainer.h"
#include "anuvad/nn/transformer.h"
#include "support/test_support.h"

using namespace anuvad;
using Strings = std::vector<std::string>;

namespace {

/// |got − want| within one unit of the last digit `want` is written with (the published values
/// are rounded or truncated), never tighter than 1e-12.
void check_published(double got, const std::string& want) {
  const auto dot = want.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(want.size() - dot - 1);
  const double tol = std::max(std::pow(10.0, -decimals), 1e-12);
  INFO("got " << std::to_string(got) << " (" << got << "), published " << want << ", tolerance " << tol);
  CHECK(std::abs(got - std::stod(want)) <= tol);
}

double chrf(const Strings& h, const Strings& r, double beta, bool eps, bool ws = false, int words = 0) {
  ChrfOptions o;
  o.beta = beta;
  o.eps_smoothing = eps;
  o.whitespace = ws;
  o.word_order = words;
  return corpus_chrf(h, r, o).score;
}

/// sacreBLEU's raw_corpus_bleu: tokenize none, floor smoothing, effective order; 0..1.
double raw_bleu(const Strings& h, const Strings& r, double floor = 0.01) {
  BleuOptions o;
  o.tokenize = "none";
  o.smooth = "floor";
  o.smooth_value = floor;
  o.effective_order = true;
  return corpus_bleu(h, r, o).score / 100.0;
}

const std::vector<Strings> kDogRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
const Strings kDogHyps = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};

}  // namespace

// ---- sacreBLEU's published cases -------------------------------------------------------------

TEST_CASE("chrF: sacreBLEU test_chrf.py, beta 3, epsilon smoothing", "[metrics][chrf][published]") {
  check_published(chrf({"abcdefg"}, {"hijklmnop"}, 3, true), "0.0");
  check_published(chrf({"a"}, {"b"}, 3, true), "0.0");
  check_published(chrf({""}, {"b"}, 3, true), "0.0");
  check_published(chrf({""}, {"ref"}, 3, true), "0.0");
  check_published(chrf({""}, {"reference"}, 3, true), "0.0");
  check_published(chrf({"aa"}, {"ab"}, 3, true), "8.3333");
  check_published(chrf({"a", "b"}, {"a", "c"}, 3, true), "8.3333");
  check_published(chrf({"a"}, {"a"}, 3, true), "16.6667");
  check_published(chrf({"a b c"}, {"a b c"}, 3, true), "50.0");
  check_published(chrf({"a b c"}, {"abc"}, 3, true), "50.0");
  check_published(chrf({" risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
                       {"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."},
                       3, true),
                  "63.361730");
  // Published as 64.1302698, which sacreBLEU 2.x itself only meets within its test tolerance
  // EPSILON = 1e-4 (it computes 64.13022156, as do metrics.py and we): checked to 1e-4.
  CHECK(std::abs(chrf({" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
                      {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, 3, true) -
                 64.1302698) < 1e-4);
  check_published(chrf({"Niemand hat die Absicht, eine Mauer zu errichten"},
                       {"Niemand hat die Absicht, eine Mauer zu errichten"}, 3, true),
                  "100.0");
}

TEST_CASE("chrF: sacreBLEU test_chrf.py, beta 3, effective order", "[metrics][chrf][published]") {
  check_published(chrf({"a"}, {"a"}, 3, false), "100.0");
  check_published(chrf({""}, {"reference"}, 3, false), "0.0");
  check_published(chrf({"a b c"}, {"a b c"}, 3, false), "100.0");
  check_published(chrf({"a b c"}, {"abc"}, 3, false), "100.0");
  check_published(chrf({""}, {"c"}, 3, false), "0.0");
  check_published(chrf({"a", "b"}, {"a", "c"}, 3, false), "50.0");
  check_published(chrf({"aa"}, {"ab"}, 3, false), "25.0");
}

TEST_CASE("chrF: sacreBLEU test_chrf.py, whitespace kept", "[metrics][chrf][published]") {
  check_published(chrf({"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
                       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
                       3, false, true),
                  "67.3481606");
  check_published(chrf({"risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
                       {"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."},
                       3, false, true),
                  "65.2414427");
}

TEST_CASE("chrF2: sacreBLEU test_chrf.py, sentence level with epsilon smoothing", "[metrics][chrf][published]") {
  check_published(chrf({"Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře."},
                       {"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."},
                       2, true),
                  "39.14078509");
  check_published(chrf({"Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři."},
                       {"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."}, 2, true),
                  "31.22557079");
  check_published(chrf({"Lapali po dechu, jejich životy skončily dřív, než skutečně začaly."},
                       {"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."},
                       2, true),
                  "57.15704367");
}

TEST_CASE("BLEU: sacreBLEU test_bleu.py corpus cases (two references)", "[metrics][bleu][published]") {
  check_published(corpus_bleu_multi(kDogHyps, kDogRefs).score, "48.530827");
  BleuOptions exp13a;
  exp13a.tokenize = "13a";  // sacreBLEU's default: the same here, the text has no danda
  check_published(corpus_bleu_multi(kDogHyps, kDogRefs, exp13a).score, "48.530827");
  check_published(corpus_bleu_multi({"", "", ""}, kDogRefs).score, "0.0");
  BleuOptions none_tok;
  none_tok.tokenize = "none";
  check_published(corpus_bleu_multi(kDogHyps, kDogRefs, none_tok).score, "49.1919566");
  BleuOptions no_smooth;
  no_smooth.smooth = "none";
  check_published(corpus_bleu_multi(kDogHyps, kDogRefs, no_smooth).score, "48.530827");
  const std::vector<std::pair<int, std::string>> orders = {
      {1, "77.65"}, {2, "60.50"}, {3, "53.93"}, {4, "48.53"}, {5, "46.14"}, {6, "43.28"}};
  for (const auto& [order, want] : orders) {
    BleuOptions o;
    o.max_order = order;
    INFO("max order " << order);
    check_published(corpus_bleu_multi(kDogHyps, kDogRefs, o).score, want);
  }
}

TEST_CASE("BLEU: sacreBLEU test_bleu.py raw BLEU, effective order and statistics", "[metrics][bleu][published]") {
  check_published(raw_bleu({"this is a test", "another test"}, {"ref1", "ref2"}), "0.0");
  check_published(raw_bleu({"this is a test"}, {"this is a test"}), "1.0");
  check_published(raw_bleu({"this is a fest"}, {"this is a test"}), "0.223606797749979");
  check_published(raw_bleu({"test"}, {"a test"}), "0.3678794411714425");
  check_published(raw_bleu({"a test"}, {"a test"}), "1.0");
  check_published(raw_bleu({"a little test"}, {"a test"}), "0.03218297948685433");
  check_published(raw_bleu({"am I am a character sequence"}, {"I am a symbol string sequence a a"}, 0.0), "0.0");
  check_published(raw_bleu({"am I am a character sequence"}, {"I am a symbol string sequence a a"}, 0.1),
                  "0.1555722182");

  BleuOptions none_tok;
  none_tok.tokenize = "none";
  const BleuScore s = corpus_bleu({"am I am a character sequence"}, {"I am a symbol string sequence a a"}, none_tok);
  CHECK(s.counts == std::vector<int64_t>{4, 2, 1, 0});
  CHECK(s.totals == std::vector<int64_t>{6, 5, 4, 3});

  BleuOptions no_smooth;
  no_smooth.smooth = "none";
  check_published(bleu_from_stats({9, 7, 5, 3}, {10, 8, 6, 4}, 11, 11, no_smooth).score / 100, "0.8375922397");

  // Degenerate statistics with floor smoothing: 0, never a division by zero or NaN.
  struct Case {
    std::vector<int64_t> c, t;
    int64_t sys, ref;
    double floor;
  };
  const std::vector<Case> cases = {{{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1, 0.0},
                                   {{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10, 0.0},
                                   {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.0},
                                   {{6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, 0.0},
                                   {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.1},
                                   {{0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5, 0.01}};
  for (const auto& c : cases) {
    BleuOptions o;
    o.smooth = "floor";
    o.smooth_value = c.floor;
    CHECK(bleu_from_stats(c.c, c.t, c.sys, c.ref, o).score == 0.0);
  }
}

TEST_CASE("chrF++: hand-computed example", "[metrics][chrf]") {
  // "ab c" vs "ab d": chars "abc"/"abd": n1 2/3, n2 1/2, n3 0/1; words [ab c]/[ab d]: 1-grams
  // 1/2, 2-grams 0/1 → P = R = (2/3 + 1/2 + 0 + 1/2 + 0) / 5 = 1/3 → F = 33.33.
  ChrfOptions pp;
  pp.word_order = 2;
  const ChrfScore s = corpus_chrf({"ab c"}, {"ab d"}, pp);
  CHECK(s.score == Approx(100.0 / 3).epsilon(1e-12));
  CHECK(s.stats == std::vector<int64_t>{3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        2, 2, 1, 1, 1, 0});
}

TEST_CASE("13a tokenization matches sacreBLEU's", "[metrics][bleu]") {
  CHECK(tokenize_13a("Hello, world! It's 3.5-4 (ok).") == "Hello , world ! It's 3.5 - 4 ( ok ) .");
  CHECK(tokenize_13a("a.,b 1,000.5 x-1 1-x &lt;tag&gt; <skipped>done") == "a . , b 1,000.5 x-1 1 - x < tag > done");
  CHECK(tokenize_13a("line one-\nline two\nend") == "line oneline two end");
  CHECK(tokenize_13a("  spaces\u00a0and\u3000ideographic  ") == "spaces and ideographic");
  CHECK(tokenize_13a("") == "");
}

// ---- Edge cases ------------------------------------------------------------------------------

TEST_CASE("Metrics of empty hypotheses and an empty corpus are 0, not NaN", "[metrics][edge]") {
  const Strings hi = {"मुझे एक कुत्ता चाहिए।", "तुम कहाँ हो?", "वह घर गया।"};
  const Strings empty3 = {"", "", ""};
  ChrfOptions pp;
  pp.word_order = 2;
  CHECK(corpus_bleu(empty3, hi).score == 0.0);
  CHECK(corpus_bleu(empty3, hi).brevity_penalty == 0.0);
  CHECK(corpus_chrf(empty3, hi).score == 0.0);
  CHECK(corpus_chrf(empty3, hi, pp).score == 0.0);
  CHECK(exact_match(empty3, hi) == 0.0);

  CHECK(corpus_bleu({}, {}).score == 0.0);
  CHECK(corpus_chrf({}, {}).score == 0.0);
  CHECK(corpus_chrf({}, {}, pp).score == 0.0);
  CHECK(exact_match({}, {}) == 0.0);
  const EvaluationScores e = evaluate_translations({}, {});
  CHECK(e.sentences == 0);
  CHECK(e.bleu.score == 0.0);
  CHECK(e.chrf.score == 0.0);

  // Empty hypothesis against an empty reference: an exact match, no n-grams anywhere.
  CHECK(exact_match({""}, {""}) == 100.0);
  CHECK(corpus_chrf({""}, {""}).score == 0.0);
  CHECK(corpus_bleu({""}, {""}).score == 0.0);

  // Identical text scores 100 everywhere.
  CHECK(corpus_bleu(hi, hi).score == Approx(100.0).epsilon(1e-12));
  CHECK(corpus_chrf(hi, hi).score == Approx(100.0).epsilon(1e-12));
  CHECK(corpus_chrf(hi, hi, pp).score == Approx(100.0).epsilon(1e-12));
  CHECK(exact_match(hi, hi) == 100.0);
}

TEST_CASE("One-word references: shorter than the n-gram order, no division by zero", "[metrics][edge]") {
  // A corpus of one-word sentences has no 2-grams: sacreBLEU's BLEU stops at the first order
  // with no n-gram and scores 0 (without effective order), even for a perfect match.
  const BleuScore b = corpus_bleu({"Hello", "Thanks"}, {"Hello", "Thanks"});
  CHECK(b.score == 0.0);
  CHECK(b.counts == std::vector<int64_t>{2, 0, 0, 0});
  CHECK(b.totals == std::vector<int64_t>{2, 0, 0, 0});
  CHECK(std::isfinite(b.score));
  BleuOptions eff;
  eff.effective_order = true;
  CHECK(corpus_bleu({"Hello", "Thanks"}, {"Hello", "Thanks"}, eff).score == Approx(100.0));
  // chrF averages over the orders that exist.
  CHECK(corpus_chrf({"a"}, {"a"}).score == Approx(100.0));
  // "Hi" vs "Hello": 1-grams P 1/2 R 1/5, 2-grams P 0 R 0; no hypothesis 3..6-grams.
  CHECK(corpus_chrf({"Hi"}, {"Hello"}).score == Approx(100.0 * 5 * 0.25 * 0.1 / (4 * 0.25 + 0.1)));
  ChrfOptions pp;
  pp.word_order = 2;
  CHECK(std::isfinite(corpus_chrf({"Hello"}, {"Hello"}, pp).score));
  CHECK(corpus_chrf({"Hello"}, {"Hello"}, pp).score == Approx(100.0));
  // A longer hypothesis than its one-word reference: BP 1, one 1-gram match, and the orders
  // without a match get the "exp" smoothing precisions 100/(2·3), 100/(4·2), 100/(8·1).
  const BleuScore longer = corpus_bleu({"Hello there my friend"}, {"Hello"});
  CHECK(longer.brevity_penalty == 1.0);
  CHECK(longer.totals == std::vector<int64_t>{4, 3, 2, 1});
  CHECK(longer.score == Approx(std::exp((std::log(25.0) + std::log(100.0 / 6) + 2 * std::log(12.5)) / 4)));
  CHECK(exact_match({" Hello\t"}, {"Hello"}) == 100.0);
  CHECK(exact_match({"Hello", "Bye"}, {"Hello", "bye"}) == 50.0);
}

TEST_CASE("Metrics reject mismatched sizes and unknown options", "[metrics][edge]") {
  CHECK_THROWS_AS(corpus_bleu({"a", "b"}, {"a"}), DataError);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {"a", "b"}), DataError);
  CHECK_THROWS_AS(exact_match({"a"}, {}), DataError);
  BleuOptions bad_tok;
  bad_tok.tokenize = "intl";
  CHECK_THROWS_AS(corpus_bleu({"a"}, {"a"}, bad_tok), ConfigError);
  BleuOptions bad_smooth;
  bad_smooth.smooth = "add-one";
  CHECK_THROWS_AS(corpus_bleu({"a"}, {"a"}, bad_smooth), ConfigError);
  ChrfOptions bad_chrf;
  bad_chrf.char_order = 0;
  CHECK_THROWS_AS(corpus_chrf({"a"}, {"a"}, bad_chrf), ConfigError);
  // Invalid UTF-8 is read as U+FFFD, not an exception.
  CHECK(std::isfinite(corpus_chrf({"ab\xff"}, {"ab"}).score));
}

TEST_CASE("Signatures name every setting", "[metrics]") {
  CHECK(bleu_signature() == "nrefs:1|case:mixed|eff:no|tok:13a+danda|smooth:exp|version:anuvad-1");
  BleuOptions plain;
  plain.tokenize = "13a";
  CHECK(bleu_signature(plain) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:anuvad-1");
  CHECK(chrf_signature() == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:anuvad-1");
  ChrfOptions pp;
  pp.word_order = 2;
  CHECK(chrf_signature(pp) == "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:anuvad-1");
  const EvaluationScores e = evaluate_translations({"a b"}, {"a b"});
  CHECK(e.bleu_signature == bleu_signature());
  CHECK(e.chrf_pp_signature == chrf_signature(pp));
}

// ---- Hindi -----------------------------------------------------------------------------------

TEST_CASE("Hindi: the danda is its own BLEU token (13a+danda), chrF++ words follow sacreBLEU",
          "[metrics][hindi]") {
  CHECK(tokenize_13a("वह घर गया।") == "वह घर गया।");  // plain 13a does not know the danda
  CHECK(tokenize_13a("वह घर गया।", true) == "वह घर गया ।");
  CHECK(tokenize_13a("राम ने कहा॥सीता", true) == "राम ने कहा ॥ सीता");
  CHECK(tokenize_13a("तुम कहाँ हो?", true) == "तुम कहाँ हो ?");

  // Missing only the danda: 13a+danda matches 4 of 5 tokens; plain 13a misses the last word.
  const Strings hyp = {"मैं घर जा रहा हूँ"}, ref = {"मैं घर जा रहा हूँ।"};
  const BleuScore with = corpus_bleu(hyp, ref);
  CHECK(with.sys_len == 5);
  CHECK(with.ref_len == 6);
  CHECK(with.counts == std::vector<int64_t>{5, 4, 3, 2});
  CHECK(with.score == Approx(std::exp(1.0 - 6.0 / 5.0) * 100.0));
  BleuOptions plain;
  plain.tokenize = "13a";
  const BleuScore without = corpus_bleu(hyp, ref, plain);
  CHECK(without.sys_len == 5);
  CHECK(without.ref_len == 5);
  CHECK(without.counts == std::vector<int64_t>{4, 3, 2, 1});
  CHECK(without.score < with.score);

  // chrF removes whitespace and the danda is just a character; chrF++'s word split knows
  // only ASCII punctuation (sacreBLEU's _remove_punctuation), so "हूँ।" stays one word.
  ChrfOptions pp;
  pp.word_order = 2;
  const ChrfScore words = corpus_chrf(hyp, ref, pp);
  // word 1-grams: hyp 5, ref 5 ("हूँ।" one word), 4 match; word 2-grams: 4, 4, 3 match.
  CHECK(std::vector<int64_t>(words.stats.end() - 6, words.stats.end()) ==
        std::vector<int64_t>{5, 5, 4, 4, 4, 3});
  // Code points, not bytes: "हूँ" is 3 code points (9 UTF-8 bytes).
  const ChrfScore chars = corpus_chrf({"हूँ"}, {"हूँ"});
  CHECK(chars.stats[0] == 3);
  CHECK(chars.stats[1] == 3);
  CHECK(chars.score == Approx(100.0));
}

// ---- Golden file from the independent Python implementation ----------------------------------

TEST_CASE("Golden: BLEU, chrF, chrF++ and exact match equal shared/bench/metrics.py to 1e-6",
          "[metrics][golden]") {
  const std::string path = std::string(ANUVAD_TEST_DATA) + "/metrics/golden.json";
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json doc = nlohmann::json::parse(in);
  ChrfOptions c2, c2pp;
  c2pp.word_order = 2;
  BleuOptions plain;
  plain.tokenize = "13a";
  double max_diff = 0;
  auto compare = [&](const nlohmann::json& e, const Strings& hyps, const Strings& refs) {
    const BleuScore b = corpus_bleu(hyps, refs);
    const BleuScore b13 = corpus_bleu(hyps, refs, plain);
    const ChrfScore f = corpus_chrf(hyps, refs, c2);
    const ChrfScore fpp = corpus_chrf(hyps, refs, c2pp);
    const double x = exact_match(hyps, refs);
    const std::pair<double, double> scores[] = {{b.score, e["bleu"].get<double>()},
                                                {b13.score, e["bleu_13a"].get<double>()},
                                                {f.score, e["chrf"].get<double>()},
                                                {fpp.score, e["chrfpp"].get<double>()},
                                                {x, e["exact"].get<double>()}};
    for (const auto& [got, want] : scores) {
      CHECK(std::abs(got - want) <= 1e-6);
      max_diff = std::max(max_diff, std::abs(got - want));
    }
    CHECK(b.counts == e["bleu_counts"].get<std::vector<int64_t>>());
    CHECK(b.totals == e["bleu_totals"].get<std::vector<int64_t>>());
    CHECK(b.sys_len == e["bleu_sys_len"].get<int64_t>());
    CHECK(b.ref_len == e["bleu_ref_len"].get<int64_t>());
    CHECK(b13.counts == e["bleu_13a_counts"].get<std::vector<int64_t>>());
    CHECK(b13.totals == e["bleu_13a_totals"].get<std::vector<int64_t>>());
    CHECK(f.stats == e["chrf_stats"].get<std::vector<int64_t>>());
    CHECK(fpp.stats == e["chrfpp_stats"].get<std::vector<int64_t>>());
  };
  const auto& pairs = doc["pairs"];
  REQUIRE(pairs.size() >= 30);
  Strings all_h, all_r;
  for (const auto& p : pairs) {
    const std::string h = p["hyp"], r = p["ref"];
    INFO("pair: hyp [" << h << "] ref [" << r << "]");
    compare(p, {h}, {r});
    all_h.push_back(h);
    all_r.push_back(r);
  }
  for (const auto& c : doc["corpora"]) {
    INFO("corpus " << c["name"].get<std::string>());
    Strings h, r;
    for (int i : c["indices"]) {
      h.push_back(all_h.at(i));
      r.push_back(all_r.at(i));
    }
    compare(c, h, r);
  }
  for (const auto& t : doc["tokenize"]) {
    const std::string text = t["text"];
    INFO("tokenize [" << text << "]");
    CHECK(tokenize_13a(text) == t["13a"].get<std::string>());
    CHECK(tokenize_13a(text, true) == t["13a+danda"].get<std::string>());
  }
  // In practice the C++ and Python numbers agree to the last bit or two of a double.
  INFO("largest difference " << max_diff);
  CHECK(max_diff < 1e-9);
}

// ---- Validation during training --------------------------------------------------------------

namespace {

struct TinySetup {
  std::vector<SentencePair> pairs;
  std::unique_ptr<Tokenizer> src, tgt;
  std::vector<Example> examples;
  ValidationText text;
  ModelConfig cfg;
};

TinySetup tiny_setup() {
  omp_set_num_threads(1);  // a 16-wide model gains nothing from threads, and a busy machine hurts
  TinySetup s;
  s.pairs = read_parallel_corpus({std::string(ANUVAD_TEST_DATA) + "/cli/tiny.tsv"});
  Strings src, tgt;
  std::vector<std::pair<std::string, std::string>> text;
  for (const auto& p : s.pairs) {
    src.push_back(p.src);
    tgt.push_back(p.tgt);
    text.emplace_back(p.src, p.tgt);
  }
  s.src = std::make_unique<Tokenizer>(Tokenizer::train(src, {60, "unigram"}));
  s.tgt = std::make_unique<Tokenizer>(Tokenizer::train(tgt, {80, "unigram"}));
  s.cfg = test::tiny_config({s.src->vocab_size(), s.tgt->vocab_size(), 16, 2, 32, 1, 1, 64});
  s.cfg.dropout = 0.1;  // so that any extra use of the training RNG would show
  std::vector<size_t> kept;
  s.examples = make_examples(text, *s.src, *s.tgt, 63, nullptr, &kept);
  s.text.tgt_tokenizer = s.tgt.get();
  for (size_t i : kept) s.text.references.push_back(s.pairs[i].tgt);
  return s;
}

TrainOptions tiny_options() {
  TrainOptions o;
  o.after_epochs = 0;
  o.after_steps = 12;
  o.batch_tokens = 64;
  o.learning_rate = 3e-3;
  o.warmup_steps = 4;
  o.valid_freq = 4;
  o.disp_freq = 0;
  o.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("chrf/bleu validation leaves training unchanged and logs every metric",
          "[metrics][train][valid]") {
  const TinySetup s = tiny_setup();
  REQUIRE(s.examples.size() == 20);
  TrainOptions plain = tiny_options();
  TrainOptions full = tiny_options();
  full.valid_metrics = {"chrf", "bleu", "cross-entropy", "perplexity"};
  full.valid_mini_batch = 7;  // batches of 7, 7, 6
  const std::string out_path =
      (std::filesystem::temp_directory_path() / "anuvad_metrics_test_valid.txt").string();
  full.valid_translation_output = out_path;

  Transformer a(s.cfg), b(s.cfg);
  a.init_parameters(3);
  b.init_parameters(3);
  std::vector<std::string> saves;
  const TrainResult ra = fit(a, s.examples, s.examples, plain);
  const TrainResult rb = fit(b, s.examples, s.examples, full,
                             {[&](const std::string& which, const TrainResult&) { saves.push_back(which); },
                              &s.text});
  CHECK(ra.epoch_losses == rb.epoch_losses);
  for (size_t i = 0; i < a.params().params().size(); ++i)
    CHECK(a.params().params()[i].value == b.params().params()[i].value);

  REQUIRE(ra.validations.size() == 3);
  REQUIRE(rb.validations.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(rb.validations[k].step == static_cast<int64_t>(4 * (k + 1)));
    CHECK(rb.validations[k].scores.size() == 4);
    CHECK(ra.validations[k].scores.size() == 1);
    CHECK(rb.validations[k].scores.at("cross-entropy") == ra.validations[k].scores.at("cross-entropy"));
    CHECK(rb.validations[k].scores.at("perplexity") ==
          Approx(std::exp(rb.validations[k].scores.at("cross-entropy"))));
  }
  // The first validation is a new best of everything; each best saves its own model.
  CHECK(rb.validations[0].improved == Strings{"chrf", "bleu", "cross-entropy", "perplexity"});
  CHECK(saves.front() == "best-chrf");
  CHECK(saves.back() == "final");
  CHECK(std::count(saves.begin(), saves.end(), "best-cross-entropy") >= 1);

  // The last validation ran on the final model: its translations are in the output file and
  // its chrF / BLEU are those of the metrics library.
  const Strings hyps = best_translations(b, s.examples, *s.tgt, 32);
  std::ifstream in(out_path);
  Strings lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  CHECK(lines == hyps);
  CHECK(rb.validations.back().scores.at("chrf") == corpus_chrf(hyps, s.text.references).score);
  CHECK(rb.validations.back().scores.at("bleu") == corpus_bleu(hyps, s.text.references).score);
  CHECK(rb.best_valid.at("chrf") >= rb.validations.back().scores.at("chrf"));
  std::filesystem::remove(out_path);
}

TEST_CASE("Early stopping ends training after N validations without a better first metric",
          "[metrics][train][valid]") {
  const TinySetup s = tiny_setup();
  TrainOptions o = tiny_options();
  o.learning_rate = 1e-30;  // the model does not change: chrF never improves after the first
  o.after_steps = 50;
  o.valid_freq = 1;
  o.valid_metrics = {"chrf", "cross-entropy"};
  o.early_stopping = 2;
  Transformer m(s.cfg);
  m.init_parameters(5);
  std::vector<std::string> saves;
  const TrainResult r = fit(m, s.examples, s.examples, o,
                            {[&](const std::string& which, const TrainResult&) { saves.push_back(which); },
                             &s.text});
  CHECK(r.early_stopped);
  CHECK(r.steps == 3);
  REQUIRE(r.validations.size() == 3);
  CHECK(r.validations[1].scores.at("chrf") == r.validations[0].scores.at("chrf"));
  CHECK(std::count(saves.begin(), saves.end(), "best-chrf") == 1);
  CHECK(saves.back() == "final");
}

TEST_CASE("Validation options are checked before training", "[metrics][train][valid]") {
  const TinySetup s = tiny_setup();
  Transformer m(s.cfg);
  m.init_parameters(1);
  TrainOptions o = tiny_options();
  o.valid_metrics = {"accuracy"};
  CHECK_THROWS_AS(fit(m, s.examples, s.examples, o), ConfigError);
  o.valid_metrics = {"chrf", "chrf"};
  CHECK_THROWS_AS(fit(m, s.examples, s.examples, o, {{}, &s.text}), ConfigError);
  o.valid_metrics = {"bleu"};
  CHECK_THROWS_AS(fit(m, s.examples, s.examples, o), ConfigError);  // no target tokenizer
  o.valid_metrics = {};
  CHECK_THROWS_AS(fit(m, s.examples, s.examples, o), ConfigError);
  CHECK(best_model_path("models/x.safetensors", "chrf") == "models/x.best-chrf.safetensors");
  CHECK(best_model_path("m.safetensors", "cross-entropy") == "m.best-cross-entropy.safetensors");
}
