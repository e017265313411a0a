// The beam trace (include/anuvad/decode/beam_trace.h, include/anuvad/inspect/beam_trace_dump.h):
// recording changes no result; the trace agrees with the n-best list (same finished hypotheses,
// scores and order) and with the word scores (the path's log-probabilities); candidates are
// sorted, `top` is respected, kept candidates are the next step's hypotheses, greedy is one
// path; cross-attention rows are the head average of the output's attention record; the JSON
// validates against docs/beam-trace-schema.json and, inside an attention dump, against
// docs/attention-schema.json (valijson). tests/e2e/beam_trace_agrees.py checks the CLI.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "anuvad/core/error.h"
#include "anuvad/decode/translator.h"
#include "anuvad/inspect/beam_trace_dump.h"
#include "support/attention_fixture.h"
#include "support/test_support.h"

#include "support/json_schema.h"

using namespace anuvad;
using nlohmann::json;

namespace {

const std::vector<std::vector<int32_t>> kSources = {{5, 6, 7}, {8, 9, 10, 11, 12, 13}, {}, {14}};

DecodeOptions options(int beam, double normalize = 0.0, double word_penalty = 0.0) {
  DecodeOptions o;
  o.beam_size = beam;
  o.n_best = beam;
  o.normalize = normalize;
  o.word_penalty = word_penalty;
  o.max_length = 12;
  return o;
}

void check_same(const std::vector<std::vector<Hypothesis>>& a, const std::vector<std::vector<Hypothesis>>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t r = 0; r < a[i].size(); ++r) {
      CHECK(a[i][r].tokens == b[i][r].tokens);
      CHECK(a[i][r].token_scores == b[i][r].token_scores);  // bit-identical
      CHECK(a[i][r].score == b[i][r].score);
      CHECK(a[i][r].normalized_score == b[i][r].normalized_score);
      CHECK(a[i][r].finished == b[i][r].finished);
      for (size_t l = 0; l < a[i][r].attention.cross.size(); ++l)
        CHECK(a[i][r].attention.cross[l] == b[i][r].attention.cross[l]);
    }
  }
}

/// The hypotheses and finished entries of a trace by id.
struct TraceIndex {
  std::map<int, const TraceHypothesis*> hyps;
  std::map<int, int> step_of;
  std::map<int, const TraceFinished*> finished;
  explicit TraceIndex(const SentenceTrace& t) {
    for (size_t s = 0; s < t.steps.size(); ++s)
      for (const TraceHypothesis& h : t.steps[s]) {
        CHECK(hyps.count(h.id) == 0);
        hyps[h.id] = &h;
        step_of[h.id] = int(s);
      }
    for (const TraceFinished& f : t.finished) finished[f.id] = &f;
  }
  /// Tokens and log-probabilities from the first token to finished hypothesis `id`.
  void path(int id, std::vector<int32_t>& tokens, std::vector<double>& logprobs) const {
    const TraceFinished& f = *finished.at(id);
    tokens = {f.token};
    logprobs = {f.logprob};
    for (int p = f.parent; p > 0; p = hyps.at(p)->parent) {
      tokens.insert(tokens.begin(), hyps.at(p)->token);
      logprobs.insert(logprobs.begin(), hyps.at(p)->logprob);
    }
  }
};

/// The trace of one sentence against its n-best list: the same hypotheses, scores and order.
void check_agrees(const SentenceTrace& t, const std::vector<Hypothesis>& n_best, const DecodeOptions& o) {
  const TraceIndex index(t);
  std::vector<TraceFinished> ranked = t.finished;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const TraceFinished& a, const TraceFinished& b) { return a.normalized > b.normalized; });
  REQUIRE(t.n_best.size() == n_best.size());
  REQUIRE(n_best.size() == std::min<size_t>(size_t(o.n_best), ranked.size()));
  for (size_t r = 0; r < n_best.size(); ++r) {
    CHECK(t.n_best[r] == ranked[r].id);
    const TraceFinished& f = *index.finished.at(t.n_best[r]);
    CHECK(f.score == n_best[r].score);
    CHECK(f.normalized == n_best[r].normalized_score);
    CHECK(f.eos == n_best[r].finished);
    std::vector<int32_t> tokens;
    std::vector<double> logprobs;
    index.path(f.id, tokens, logprobs);
    if (f.eos) {
      CHECK(tokens.back() == kEosId);
      tokens.pop_back();
    }
    CHECK(tokens == n_best[r].tokens);
    CHECK(logprobs == n_best[r].token_scores);  // the word scores
  }
}

/// Structure: candidates sorted and within `top` (plus kept/finished ones), kept candidates
/// are the next step's hypotheses, greedy keeps one per step, cross rows sum to 1.
void check_structure(const SentenceTrace& t, int top, int beam, int decoder_layers, Index S) {
  for (size_t s = 0; s < t.steps.size(); ++s) {
    CHECK(t.steps[s].size() <= size_t(beam));
    if (beam == 1) CHECK(t.steps[s].size() == 1);
    size_t kept = 0, taken = 0;
    for (const TraceHypothesis& h : t.steps[s]) {
      REQUIRE(h.cross.rows() == decoder_layers);
      REQUIRE(h.cross.cols() == S);
      for (Index l = 0; l < h.cross.rows(); ++l) CHECK(h.cross.row(l).sum() == Approx(1.0).epsilon(1e-5));
      REQUIRE(!h.candidates.empty());
      int within = 0;
      for (size_t c = 0; c < h.candidates.size(); ++c) {
        const TraceCandidate& cd = h.candidates[c];
        if (c > 0) {
          CHECK(cd.rank > h.candidates[c - 1].rank);
          CHECK(cd.logprob <= h.candidates[c - 1].logprob);
        }
        if (cd.rank < top) ++within; else CHECK(cd.status != TraceStatus::kPruned);
        CHECK(cd.score == h.score + cd.logprob);
        CHECK((cd.status == TraceStatus::kPruned) == (cd.id < 0));
        if (cd.status != TraceStatus::kPruned) ++taken;
        if (cd.status != TraceStatus::kKept) continue;
        ++kept;
        REQUIRE(s + 1 <= t.steps.size());
        if (s + 1 == t.steps.size()) continue;  // the search stopped with it live
        const auto next = std::find_if(t.steps[s + 1].begin(), t.steps[s + 1].end(),
                                       [&](const TraceHypothesis& n) { return n.id == cd.id; });
        REQUIRE(next != t.steps[s + 1].end());
        CHECK(next->parent == h.id);
        CHECK(next->token == cd.token);
        CHECK(next->logprob == cd.logprob);
      }
      CHECK(within == top);  // the vocabulary has more than `top` tokens
      for (int c = 0; c < within; ++c) CHECK(h.candidates[size_t(c)].rank == c);
    }
    if (s + 1 < t.steps.size()) CHECK(kept == t.steps[s + 1].size());
    // Greedy: one token taken per step; at EOS the next-best token also fills the slot, then
    // the search stops.
    if (beam == 1) CHECK((taken == 1 || (taken == 2 && s + 1 == t.steps.size())));
  }
}

}  // namespace

TEST_CASE("beam trace: recording changes no result", "[beam_trace]") {
  const ModelConfig cfg = test::attention_test_config(2, 2, 4);
  Transformer model(cfg);
  model.init_parameters(5);
  for (int beam : {1, 4}) {
    for (double alpha : {0.0, 1.0}) {
      DYNAMIC_SECTION("beam " << beam << ", normalize " << alpha) {
        DecodeOptions o = options(beam, alpha, alpha > 0 ? 0.5 : 0.0);
        o.return_attention = true;
        BeamTrace trace{3, {}};
        check_same(beam_search(model, kSources, o), beam_search(model, kSources, o, &trace));
        REQUIRE(trace.sentences.size() == kSources.size());
        CHECK(trace.sentences[2].steps.empty());  // the empty source is not searched
        CHECK(trace.sentences[2].finished.empty());
        BeamTrace bad{0, {}};
        CHECK_THROWS_AS(beam_search(model, kSources, o, &bad), ConfigError);
      }
    }
  }
}

TEST_CASE("beam trace agrees with the n-best list and the word scores", "[beam_trace]") {
  const ModelConfig cfg = test::attention_test_config(2, 2, 4);
  Transformer model(cfg);
  model.init_parameters(7);
  for (int beam : {1, 4}) {
    for (int top : {1, 3, 5}) {
      DYNAMIC_SECTION("beam " << beam << ", top " << top) {
        DecodeOptions o = options(beam, beam > 1 ? 0.6 : 0.0);
        o.return_attention = true;
        BeamTrace trace{top, {}};
        const auto hyps = beam_search(model, kSources, o, &trace);
        for (size_t i = 0; i < kSources.size(); ++i) {
          if (kSources[i].empty()) continue;
          const SentenceTrace& t = trace.sentences[i];
          check_agrees(t, hyps[i], o);
          check_structure(t, top, beam, cfg.decoder_layers, Index(kSources[i].size() + 1));
          // The output path's cross-attention rows: the head average of its attention record.
          const TraceIndex index(t);
          const Hypothesis& best = hyps[i][0];
          const Index T = Index(best.token_scores.size());
          int id = index.finished.at(t.n_best[0])->parent;
          for (Index step = T - 1; step >= 0; --step, id = index.hyps.at(id)->parent) {
            REQUIRE(index.step_of.at(id) == step);
            for (int l = 0; l < cfg.decoder_layers; ++l)
              for (Index k = 0; k < index.hyps.at(id)->cross.cols(); ++k) {
                double avg = 0;
                for (int hd = 0; hd < cfg.n_heads; ++hd) avg += double(best.attention.cross[size_t(l)](hd * T + step, k));
                CHECK(double(index.hyps.at(id)->cross(l, k)) == Approx(avg / cfg.n_heads).margin(1e-6));
              }
          }
          CHECK(id == -1);  // reached the start
        }
      }
    }
  }
}

TEST_CASE("beam trace through the Translator is in input order", "[beam_trace]") {
  const ModelConfig cfg = test::attention_test_config(1, 2, 2);
  Transformer model(cfg);
  model.init_parameters(3);
  const DecodeOptions o = options(3, 1.0);
  BeamTrace trace{2, {}};
  const auto hyps = Translator(model, o, 2).translate(kSources, &trace);
  REQUIRE(trace.sentences.size() == kSources.size());
  for (size_t i = 0; i < kSources.size(); ++i)
    if (!kSources[i].empty()) check_agrees(trace.sentences[i], hyps[i], o);
}

TEST_CASE("beam trace JSON: documented fields, schema-valid alone and inside an attention dump", "[beam_trace]") {
  const ModelConfig cfg = test::attention_test_config(1, 2, 2);
  Transformer model(cfg);
  model.init_parameters(9);
  DecodeOptions o = options(4);
  o.return_attention = true;
  BeamTrace trace{3, {}};
  const auto hyps = beam_search(model, kSources, o, &trace);
  std::vector<AttentionDumpSentence> sentences;
  for (size_t i = 0; i < kSources.size(); ++i) {
    AttentionDumpSentence s;
    s.src_ids = kSources[i];
    s.src_ids.push_back(kEosId);
    for (int32_t id : s.src_ids) s.src_pieces.push_back(test::fake_piece(id, false));
    const Hypothesis& h = hyps[i][0];
    s.tgt_ids = h.tokens;
    if (h.finished) s.tgt_ids.push_back(kEosId);
    for (int32_t id : s.tgt_ids) s.tgt_pieces.push_back(test::fake_piece(id, true));
    s.tgt_logprobs = h.token_scores;
    s.attention = &h.attention;
    s.beam_trace = beam_trace_json(trace.sentences[i], 3, [](int32_t id) { return test::fake_piece(id, true); });
    sentences.push_back(std::move(s));
  }
  const json doc = make_beam_trace_dump(cfg, o, 3, sentences);
  CHECK(doc["schema"] == "anuvad-beam-trace");
  const json& t = doc["sentences"][0]["beam_trace"];
  CHECK(t["steps"][0][0]["parent"].is_null());
  CHECK(t["steps"][0][0]["piece"] == "<s>");
  CHECK(t["steps"][0][0]["cross_attention"].size() == size_t(cfg.decoder_layers));
  CHECK(t["steps"][0][0]["candidates"][0]["status"].is_string());
  CHECK(t["n_best"].size() == 4);
  const json attention = make_attention_dump(cfg, o, sentences);
  CHECK(attention["sentences"][0]["beam_trace"] == t);
  CHECK_NOTHROW(check_attention_dump(attention, "test"));
  json broken = attention;
  broken["sentences"][0]["beam_trace"]["steps"] = json::array({1});
  CHECK_THROWS_AS(check_attention_dump(broken, "test"), DataError);
#ifdef ANUVAD_HAVE_VALIJSON
  CHECK(test::schema_errors(doc, "docs/beam-trace-schema.json") == "");
  CHECK(test::schema_errors(attention, "docs/attention-schema.json") == "");
  json bad = doc;
  bad["sentences"][0]["beam_trace"]["steps"][0][0]["candidates"][0]["status"] = "maybe";
  CHECK(test::schema_errors(bad, "docs/beam-trace-schema.json") != "");
  bad = doc;
  bad["sentences"][0]["beam_trace"].erase("n_best");
  CHECK(test::schema_errors(bad, "docs/beam-trace-schema.json") != "");
#else
  FAIL("valijson was not found at configure time: install libvalijson-dev (Debian) and re-run cmake");
#endif
}
