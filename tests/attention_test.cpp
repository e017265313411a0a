// The attention dump (attention_dump.h): shapes of every matrix, rows summing to 1, causal
// decoder self-attention, values equal to the model's to 6 digits, both from a teacher-forced
// pass and from beam_search(return_attention); valid JSON and a safe page for hostile text;
// the document against docs/attention-schema.json (valijson); errors naming the file; atomic
// writes. The page itself is exercised in Chromium by tests/browser/attention_page_test.sh.
#include <catch2/catch.hpp>

#include <utf8.h>

#include <cmath>
#include <filesystem>

#include "anuvad/inspect/attention_dump.h"
#include "anuvad/decode/decode.h"
#include "anuvad/core/error.h"
#include "support/attention_fixture.h"
#include "support/test_support.h"

#include "support/json_schema.h"

using namespace anuvad;
using anuvad::test::read_file;
using anuvad::test::TempDir;
using anuvad::test::write_file;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Checks one kind of matrices: [layers][H][nq][nk], rows summing to 1, and equal (to the
/// 6-digit rounding) to the record's [H·nq, nk] matrices; `causal`: exactly 0 above the diagonal.
void check_kind(const json& m, const std::vector<Mat>& rec, int layers, int heads, size_t nq,
                size_t nk, bool causal) {
  REQUIRE(m.is_array());
  REQUIRE(m.size() == static_cast<size_t>(layers));
  REQUIRE(rec.size() == static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    REQUIRE(m[l].size() == static_cast<size_t>(heads));
    for (int h = 0; h < heads; ++h) {
      const json& rows = m[l][h];
      REQUIRE(rows.size() == nq);
      for (size_t i = 0; i < nq; ++i) {
        REQUIRE(rows[i].size() == nk);
        double sum = 0;
        for (size_t j = 0; j < nk; ++j) {
          REQUIRE(rows[i][j].is_number());
          const double w = rows[i][j].get<double>();
          const double want = static_cast<double>(rec[l](static_cast<Index>(h * nq + i), static_cast<Index>(j)));
          CHECK(std::fabs(w - want) <= 5e-6 * std::fabs(want) + 1e-30);
          CHECK(w >= 0.0);
          if (causal && j > i) CHECK(w == 0.0);
          sum += w;
        }
        CHECK(std::fabs(sum - 1.0) < 1e-5);
      }
    }
  }
}

/// Every check of one sentence entry against its source data.
void check_sentence(const json& s, const ModelConfig& cfg, const AttentionDumpSentence& in) {
  const size_t S = in.src_ids.size(), T = in.tgt_ids.size();
  REQUIRE(s["src_tokens"].size() == S);
  REQUIRE(s["tgt_tokens"].size() == T);
  REQUIRE(s["decoder_inputs"].size() == T);
  for (size_t i = 0; i < S; ++i) {
    CHECK(s["src_tokens"][i]["id"] == in.src_ids[i]);
    CHECK(s["src_tokens"][i]["piece"] == in.src_pieces[i]);
  }
  for (size_t t = 0; t < T; ++t) {
    CHECK(s["tgt_tokens"][t]["id"] == in.tgt_ids[t]);
    CHECK(s["tgt_tokens"][t]["piece"] == in.tgt_pieces[t]);
    CHECK(s["tgt_tokens"][t]["logprob"].get<double>() == Approx(in.tgt_logprobs[t]).epsilon(1e-5));
    // Query t of the decoder is its input at t: BOS, then output token t − 1.
    CHECK(s["decoder_inputs"][t] == (t == 0 ? std::string("<s>") : in.tgt_pieces[t - 1]));
  }
  CHECK(s["src_tokens"][S - 1]["id"] == kEosId);
  CHECK(s["source"] == in.source_text);
  CHECK(s["translation"] == in.translation);
  const AttentionRecord& a = *in.attention;
  check_kind(s["encoder_self_attention"], a.encoder_self, cfg.encoder_layers, cfg.n_heads, S, S, false);
  check_kind(s["decoder_self_attention"], a.decoder_self, cfg.decoder_layers, cfg.n_heads, T, T, true);
  check_kind(s["cross_attention"], a.cross, cfg.decoder_layers, cfg.n_heads, T, S, false);
}

/// The embedded document of a page.
std::string embedded_json(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"attention-data\">";
  const size_t a = page.find(open);
  REQUIRE(a != std::string::npos);
  const size_t b = page.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return page.substr(a + open.size(), b - a - open.size());
}

/// Sentences with hostile text: quotes, markup, emoji, invalid UTF-8, and an empty one.
struct WeirdInput {
  AttentionRecord record;
  std::vector<double> logprobs;
  std::vector<AttentionDumpSentence> sentences;
};

WeirdInput weird_input(const Transformer& model) {
  WeirdInput w;
  Example ex{{5, 6, 7, 8}, {5, 6, 9}};
  w.record = test::teacher_forced_record(model, ex, &w.logprobs);
  AttentionDumpSentence s = test::fixture_sentence(ex, w.record, w.logprobs);
  s.src_pieces[0] = "\xff\xfe bad";           // invalid UTF-8 bytes
  s.src_pieces[1] = "\"q\" \\ </script><!--";  // JSON and HTML metacharacters
  s.tgt_pieces[0] = "\xe0\xa4";                // truncated Devanagari sequence
  s.tgt_pieces[1] = "▁😀\n\t\x01";             // emoji and control characters
  s.source_text = "He said \"</script><script>alert(1)</script>\" \xc3(";
  s.translation = "उसने कहा 😀 \xed\xa0\x80";  // encoded surrogate: invalid UTF-8
  w.sentences.push_back(s);
  AttentionDumpSentence empty;  // an empty source, not decoded: no attention at all
  empty.src_ids = {kEosId};
  empty.src_pieces = {"</s>"};
  w.sentences.push_back(empty);
  return w;
}

#ifdef ANUVAD_HAVE_VALIJSON
/// Validates `doc` against docs/attention-schema.json; returns the errors (empty = valid).
std::string schema_errors(const json& doc) { return test::schema_errors(doc, "docs/attention-schema.json"); }
#endif

}  // namespace

TEST_CASE("attention dump of a teacher-forced pass: shapes, row sums, causal decoder", "[attention]") {
  const ModelConfig cfg = test::attention_test_config(2, 3, 4);
  Transformer model(cfg);
  model.init_parameters(3);
  const std::vector<Example> pairs = {{{5, 6, 7, 8, 9}, {10, 11, 12, 13}},
                                      {{5, 20, 21}, {14, 15, 16, 17, 18, 19, 20}}};
  std::vector<AttentionRecord> records(pairs.size());
  std::vector<std::vector<double>> logprobs(pairs.size());
  std::vector<AttentionDumpSentence> sentences;
  for (size_t n = 0; n < pairs.size(); ++n) {
    records[n] = test::teacher_forced_record(model, pairs[n], &logprobs[n]);
    sentences.push_back(test::fixture_sentence(pairs[n], records[n], logprobs[n]));
  }
  DecodeOptions opts;
  opts.beam_size = 4;
  opts.normalize = 0.6;
  const json dump = make_attention_dump(cfg, opts, sentences);

  CHECK(dump["schema"] == "anuvad-attention");
  CHECK(dump["version"] == 1);
  CHECK(dump["model"]["n_heads"] == 4);
  CHECK(dump["model"]["encoder_layers"] == 2);
  CHECK(dump["model"]["decoder_layers"] == 3);
  CHECK(dump["model"]["d_model"] == cfg.d_model);
  CHECK(dump["decoding"]["beam_size"] == 4);
  CHECK(dump["decoding"]["normalize"].get<double>() == 0.6);
  REQUIRE(dump["sentences"].size() == pairs.size());
  for (size_t n = 0; n < pairs.size(); ++n) check_sentence(dump["sentences"][n], cfg, sentences[n]);
  CHECK_NOTHROW(check_attention_dump(dump, "test"));

  // The text round-trips exactly (rounded numbers print and parse back to the same doubles).
  const std::string text = attention_json_text(dump);
  CHECK(json::parse(text) == dump);
  // Numbers carry at most 6 significant digits.
  const std::string row = dump["sentences"][0]["cross_attention"][0][0][0].dump();
  for (const char* p = row.c_str(); *p;) {
    if (std::isdigit(static_cast<unsigned char>(*p))) {
      int digits = 0;
      bool leading = true;
      for (; *p && (std::isdigit(static_cast<unsigned char>(*p)) || *p == '.'); ++p)
        if (*p != '.' && !(leading && *p == '0')) ++digits, leading = false;
      CHECK(digits <= 6);
      if (*p == 'e') ++p;
    } else {
      ++p;
    }
  }
}

TEST_CASE("attention dump of beam_search (greedy and beam) has the documented shapes", "[attention]") {
  const ModelConfig cfg = test::attention_test_config(2, 2, 4);
  Transformer model(cfg);
  model.init_parameters(5);
  for (int beam : {1, 3}) {
    DYNAMIC_SECTION("beam " << beam) {
      DecodeOptions opts;
      opts.beam_size = beam;
      opts.return_attention = true;
      opts.max_length = 12;
      const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}, {8, 9, 10, 11, 12, 13}};
      const auto hyps = beam_search(model, sources, opts);
      REQUIRE(hyps.size() == sources.size());
      std::vector<AttentionDumpSentence> sentences;
      for (size_t n = 0; n < sources.size(); ++n) {
        const Hypothesis& h = hyps[n][0];
        AttentionDumpSentence s;
        s.src_ids = sources[n];
        s.src_ids.push_back(kEosId);
        s.tgt_ids = h.tokens;
        if (h.finished) s.tgt_ids.push_back(kEosId);
        for (int32_t id : s.src_ids) s.src_pieces.push_back(test::fake_piece(id, false));
        for (int32_t id : s.tgt_ids) s.tgt_pieces.push_back(test::fake_piece(id, true));
        s.tgt_logprobs = h.token_scores;
        s.attention = &h.attention;
        sentences.push_back(s);
      }
      const json dump = make_attention_dump(cfg, opts, sentences);
      for (size_t n = 0; n < sources.size(); ++n) check_sentence(dump["sentences"][n], cfg, sentences[n]);
      CHECK_NOTHROW(check_attention_dump(dump, "test"));
    }
  }
}

TEST_CASE("attention dump: hostile text gives valid JSON and a page that cannot break out", "[attention]") {
  const ModelConfig cfg = test::attention_test_config(1, 1, 2, 16);
  Transformer model(cfg);
  model.init_parameters(9);
  const WeirdInput in = weird_input(model);
  json dump;
  REQUIRE_NOTHROW(dump = make_attention_dump(cfg, DecodeOptions{}, in.sentences));
  const std::string text = attention_json_text(dump);
  CHECK(utf8::is_valid(text.begin(), text.end()));
  const json back = json::parse(text);
  CHECK(back == dump);
  const json& s0 = back["sentences"][0];
  CHECK(s0["src_tokens"][0]["piece"] == "\xEF\xBF\xBD\xEF\xBF\xBD bad");  // U+FFFD per bad byte
  CHECK(s0["src_tokens"][1]["piece"] == "\"q\" \\ </script><!--");
  CHECK(s0["tgt_tokens"][1]["piece"] == "▁😀\n\t\x01");
  CHECK(s0["decoder_inputs"][1] == s0["tgt_tokens"][0]["piece"]);
  CHECK(s0["translation"].get<std::string>().rfind("उसने कहा 😀 ", 0) == 0);
  // The empty sentence: one source token (EOS), no output, no attention.
  const json& s1 = back["sentences"][1];
  CHECK(s1["tgt_tokens"].empty());
  CHECK(s1["decoder_inputs"].empty());
  CHECK(s1["cross_attention"].empty());
  CHECK(s1["encoder_self_attention"].empty());
  CHECK(s1["score"].is_null());
  CHECK_NOTHROW(check_attention_dump(back, "test"));
  // A dump without sentences is valid too.
  CHECK_NOTHROW(check_attention_dump(make_attention_dump(cfg, DecodeOptions{}, {}), "test"));

  const std::string page = render_attention_html(dump);
  CHECK(utf8::is_valid(page.begin(), page.end()));
  const std::string embedded = embedded_json(page);
  CHECK(embedded.find('<') == std::string::npos);  // no "</script>", "<!--" or "<script"
  CHECK(json::parse(embedded) == dump);
  CHECK(page.find("</html>") != std::string::npos);
  // Self-contained: nothing loaded from anywhere.
  for (const char* bad : {"<link", "@import", "src=\"", "src='", "fetch(", "XMLHttpRequest",
                          "https://", "//fonts."})
    CHECK(page.find(bad) == std::string::npos);
  size_t at = 0;
  while ((at = page.find("http://", at)) != std::string::npos) {
    CHECK(page.compare(at, 26, "http://www.w3.org/2000/svg") == 0);  // only the SVG namespace
    ++at;
  }
  for (const char* hook : {"id=\"heatmap\"", "id=\"model-view\"", "id=\"headview\"", "id=\"status\"",
                           "Noto Sans Devanagari", "Lohit Devanagari", "Content-Security-Policy"})
    CHECK(page.find(hook) != std::string::npos);
}

TEST_CASE("attention dump validates against docs/attention-schema.json", "[attention]") {
#ifndef ANUVAD_HAVE_VALIJSON
  FAIL("valijson was not found at configure time: install libvalijson-dev (Debian) and re-run cmake");
#else
  const ModelConfig cfg = test::attention_test_config(2, 3, 4);
  Transformer model(cfg);
  model.init_parameters(3);
  Example ex{{5, 6, 7}, {8, 9, 10, 11}};
  std::vector<double> lp;
  const AttentionRecord rec = test::teacher_forced_record(model, ex, &lp);
  DecodeOptions opts;
  const json dump = make_attention_dump(cfg, opts, {test::fixture_sentence(ex, rec, lp)});
  CHECK(schema_errors(dump) == "");
  const ModelConfig small = test::attention_test_config(1, 1, 2, 16);
  Transformer m2(small);
  m2.init_parameters(9);
  const WeirdInput in = weird_input(m2);
  CHECK(schema_errors(make_attention_dump(small, opts, in.sentences)) == "");
  CHECK(schema_errors(make_attention_dump(small, opts, {})) == "");

  // The schema really checks something.
  json bad = dump;
  bad["schema"] = "something-else";
  CHECK(schema_errors(bad) != "");
  bad = dump;
  bad["sentences"][0].erase("src_tokens");
  CHECK(schema_errors(bad) != "");
  bad = dump;
  bad["sentences"][0]["cross_attention"][0][0][0][0] = "0.5";
  CHECK(schema_errors(bad) != "");
  bad = dump;
  bad["sentences"][0]["cross_attention"][0][0][0][0] = 1.5;
  CHECK(schema_errors(bad) != "");
  bad = dump;
  bad["sentences"][0]["tgt_tokens"][0].erase("logprob");
  CHECK(schema_errors(bad) != "");
#endif
}

TEST_CASE("attention dump: inconsistent input is a ShapeError naming the sentence", "[attention]") {
  const ModelConfig cfg = test::attention_test_config(2, 2, 2, 16);
  Transformer model(cfg);
  model.init_parameters(1);
  Example ex{{5, 6}, {7, 8, 9}};
  std::vector<double> lp;
  AttentionRecord rec = test::teacher_forced_record(model, ex, &lp);
  AttentionDumpSentence ok = test::fixture_sentence(ex, rec, lp);
  auto fails = [&](AttentionDumpSentence s, const std::string& what) {
    CHECK_THROWS_AS(make_attention_dump(cfg, DecodeOptions{}, {ok, s}), ShapeError);
    CHECK_THROWS_WITH(make_attention_dump(cfg, DecodeOptions{}, {ok, s}),
                      Catch::Contains("sentence 1") && Catch::Contains(what));
  };
  AttentionDumpSentence s = ok;
  s.src_pieces.pop_back();
  fails(s, "source pieces");
  s = ok;
  s.tgt_logprobs.pop_back();
  fails(s, "log-probabilities");
  s = ok;
  s.tgt_ids.pop_back();  // T no longer matches the matrices
  s.tgt_pieces.pop_back();
  s.tgt_logprobs.pop_back();
  fails(s, "decoder self-attention");
  AttentionRecord fewer = rec;
  fewer.cross.pop_back();
  s = ok;
  s.attention = &fewer;
  fails(s, "cross-attention has 1 layers");
  // Log-probabilities may be unknown: "logprob" and "score" are then null.
  s = ok;
  s.tgt_logprobs.clear();
  const json d = make_attention_dump(cfg, DecodeOptions{}, {s});
  CHECK(d["sentences"][0]["tgt_tokens"][0]["logprob"].is_null());
  CHECK(d["sentences"][0]["score"].is_null());
  CHECK_NOTHROW(check_attention_dump(d, "test"));
}

TEST_CASE("read_attention_json: errors name the file and the place", "[attention]") {
  TempDir dir;
  const ModelConfig cfg = test::attention_test_config(1, 1, 2, 16);
  Transformer model(cfg);
  model.init_parameters(2);
  Example ex{{5, 6}, {7}};
  std::vector<double> lp;
  const AttentionRecord rec = test::teacher_forced_record(model, ex, &lp);
  const json dump = make_attention_dump(cfg, DecodeOptions{}, {test::fixture_sentence(ex, rec, lp)});

  const std::string missing = dir.file("missing.json");
  CHECK_THROWS_AS(read_attention_json(missing), IoError);
  CHECK_THROWS_WITH(read_attention_json(missing), Catch::StartsWith(missing + ": cannot open"));

  const std::string broken = dir.file("broken.json");
  write_file(broken, "{\"schema\": \"anuvad-attention\",\n  oops }");
  CHECK_THROWS_AS(read_attention_json(broken), DataError);
  CHECK_THROWS_WITH(read_attention_json(broken),
                    Catch::StartsWith(broken + ": invalid JSON: parse error at line 2"));

  const std::string other = dir.file("other.json");
  write_file(other, "{\"schema\": \"something\", \"version\": 1}");
  CHECK_THROWS_WITH(read_attention_json(other),
                    Catch::StartsWith(other + ": not an anuvad attention dump"));
  write_file(other, "[1, 2]");
  CHECK_THROWS_WITH(read_attention_json(other),
                    Catch::StartsWith(other + ": not an anuvad attention dump"));

  const std::string newer = dir.file("newer.json");
  json v2 = dump;
  v2["version"] = 2;
  write_file(newer, v2.dump());
  CHECK_THROWS_WITH(read_attention_json(newer),
                    Catch::Contains("unsupported anuvad-attention version 2"));

  const std::string shape = dir.file("shape.json");
  json bad = dump;
  bad["sentences"][0]["cross_attention"][0][1][0].erase(0);
  write_file(shape, bad.dump());
  CHECK_THROWS_WITH(read_attention_json(shape),
                    Catch::StartsWith(shape + ": /sentences/0/cross_attention/0/1/0: expected an array of 3 weights"));
  bad = dump;
  bad["sentences"][0]["decoder_inputs"].push_back("x");
  write_file(shape, bad.dump());
  CHECK_THROWS_WITH(read_attention_json(shape), Catch::Contains("/sentences/0/decoder_inputs"));
  bad = dump;
  bad["model"].erase("n_heads");
  write_file(shape, bad.dump());
  CHECK_THROWS_WITH(read_attention_json(shape), Catch::Contains("/model: missing \"n_heads\""));

  // Every message is one line.
  for (const std::string& f : {missing, broken, other, newer, shape}) {
    try {
      read_attention_json(f);
      FAIL("no error for " << f);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("write_attention_json / write_attention_html: atomic, IoError on failure", "[attention]") {
  TempDir dir;
  const ModelConfig cfg = test::attention_test_config(1, 1, 2, 16);
  Transformer model(cfg);
  model.init_parameters(4);
  const WeirdInput in = weird_input(model);
  const json dump = make_attention_dump(cfg, DecodeOptions{}, in.sentences);

  const std::string jpath = dir.file("a.json"), hpath = dir.file("a.html");
  write_file(jpath, "old contents");
  write_attention_json(jpath, dump);
  write_attention_html(hpath, dump);
  CHECK(read_attention_json(jpath) == dump);
  CHECK(read_file(hpath) == render_attention_html(dump));
  CHECK(dir.entries() == std::vector<std::string>{"a.html", "a.json"});  // no temporary files left
  CHECK((fs::status(hpath).permissions() & fs::perms::others_read) != fs::perms::none);

  const std::string nowhere = dir.file("no/such/dir/a.json");
  CHECK_THROWS_AS(write_attention_json(nowhere, dump), IoError);
  CHECK_THROWS_WITH(write_attention_html(nowhere, dump), Catch::StartsWith(nowhere + ": "));
  // The page of a document that is not a dump is refused, not rendered.
  CHECK_THROWS_AS(render_attention_html(json{{"schema", "x"}}), DataError);
}
