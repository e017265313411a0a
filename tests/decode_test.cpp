// Greedy and beam search on the key/value cache: beam 1 equals an independent greedy loop,
// n-best lists are sorted and distinct, batches translate exactly as single sentences, EOS
// first gives an empty output, length limits hold, and beam search with a beam wider than the
// output space reproduces exhaustive search (parent bookkeeping, early-finished ancestry).
// The decoding objects: SentenceBeam (parent pointers, shared attention records), NBestCollector,
// StoppingRule, the Translator's ordering, alignment extraction, and results as bytes
// (decode/result_bytes.h: every field read back bit for bit; truncated bytes refused).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "anuvad/core/error.h"
#include "anuvad/decode/alignment.h"
#include "anuvad/decode/beam.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/result_bytes.h"
#include "anuvad/decode/translator.h"
#include "anuvad/nn/loss.h"
#include "support/test_support.h"

using namespace anuvad;

namespace {

ModelConfig config(int tgt_vocab = 30) { return test::tiny_config({30, tgt_vocab, 32, 4, 48, 2, 2, 64}); }

/// Greedy decoding written directly on decode_step, one sentence at a time.
std::vector<int32_t> reference_greedy(const Transformer& m, const std::vector<int32_t>& src, int limit) {
  Example e{src, {}};
  const Batch b = make_batch({&e});
  ForwardCache cache;
  m.encode(b.src, b.src_rows, DropoutContext{}, cache);
  DecoderState st = m.begin_decoding(cache.memory, b.src_rows, limit + 1);
  std::vector<int32_t> out;
  int32_t tok = kBosId;
  Mat logits;
  for (int t = 0; t < limit; ++t) {
    m.decode_step({tok}, st, logits);
    int32_t best = -1;
    for (int32_t v = 0; v < logits.cols(); ++v) {
      if (v == kPadId || v == kBosId || v == kUnkId) continue;
      if (best < 0 || logits(0, v) > logits(0, best)) best = v;
    }
    if (best == kEosId) break;
    out.push_back(best);
    tok = best;
  }
  return out;
}

const std::vector<std::vector<int32_t>> kSources = {
    {5, 6, 7}, {8, 9, 10, 11, 12, 13}, {14}, {15, 16, 17, 18}, {19, 20, 21, 22, 23, 24, 25, 26}};

}  // namespace

TEST_CASE("Beam size 1 equals an independent greedy loop", "[decode][beam]") {
  // 300 target tokens: the proposals' scan skips whole blocks of 64 logits (decode.cpp).
  for (const int tgt_vocab : {30, 300}) {
    Transformer m(config(tgt_vocab));
    m.init_parameters(4);
    m.params().find("output_projection.bias")->value(0, kEosId) = -2;
    DecodeOptions o;
    o.max_length = 15;
    const auto hyps = beam_search(m, kSources, o);
    INFO("target vocabulary " << tgt_vocab);
    for (size_t i = 0; i < kSources.size(); ++i)
      CHECK(hyps[i][0].tokens == reference_greedy(m, kSources[i], max_output_length(m.config(), o, int(kSources[i].size()))));
  }
}

TEST_CASE("n-best lists are sorted, distinct, and batch-independent under beam search", "[decode][beam]") {
  Transformer m(config());
  m.init_parameters(5);
  m.params().find("output_projection.bias")->value(0, kEosId) = -1;
  for (double alpha : {0.0, 1.0}) {
    DecodeOptions o;
    o.beam_size = 5;
    o.n_best = 5;
    o.normalize = alpha;
    o.max_length = 12;
    const auto batched = beam_search(m, kSources, o);
    for (size_t i = 0; i < kSources.size(); ++i) {
      const auto& nb = batched[i];
      REQUIRE(nb.size() == 5);
      std::set<std::vector<int32_t>> distinct;
      for (size_t j = 0; j < nb.size(); ++j) {
        distinct.insert(nb[j].tokens);
        if (j > 0) CHECK(nb[j - 1].normalized_score >= nb[j].normalized_score);
        double sum = 0;
        for (double s : nb[j].token_scores) sum += s;
        CHECK(sum == Approx(nb[j].score).margin(1e-9));
      }
      CHECK(distinct.size() == nb.size());
      const auto alone = beam_search(m, {kSources[i]}, o)[0];
      REQUIRE(alone.size() == nb.size());
      for (size_t j = 0; j < nb.size(); ++j) {
        CHECK(alone[j].tokens == nb[j].tokens);
        CHECK(alone[j].score == Approx(nb[j].score).margin(1e-4));
      }
      // Beam search never returns a worse model score than greedy when α = 0. When both find
      // the same words, their float scores still differ by rounding between batch shapes (by
      // 1.2e-6 in the -O2 sanitizer build), hence the same 1e-4 margin as the batch check above.
      if (alpha == 0.0) CHECK(nb[0].score >= greedy_decode(m, {kSources[i]}, o)[0].score - 1e-4);
    }
  }
}

TEST_CASE("EOS as the first token gives an empty translation", "[decode]") {
  Transformer m(config());
  m.init_parameters(6);
  m.params().find("output_projection.bias")->value(0, kEosId) = 100;
  for (int beam : {1, 4}) {
    DecodeOptions o;
    o.beam_size = beam;
    const auto h = beam_search(m, {{5, 6, 7}}, o)[0][0];
    CHECK(h.tokens.empty());
    CHECK(h.finished);
    CHECK(h.token_scores.size() == 1);
  }
}

TEST_CASE("The length limit is respected and the n-best list stays complete", "[decode]") {
  Transformer m(config());
  m.init_parameters(7);
  m.params().find("output_projection.bias")->value(0, kEosId) = -100;  // never ends by itself
  for (int beam : {1, 3}) {
    DecodeOptions o;
    o.beam_size = beam;
    o.n_best = beam;
    o.max_length = 7;
    const auto nb = beam_search(m, {{5, 6, 7, 8}}, o)[0];
    REQUIRE(nb.size() == size_t(beam));
    for (const auto& h : nb) {
      CHECK(h.tokens.size() == 7);
      CHECK_FALSE(h.finished);
    }
    o.max_length = 100;
    o.max_length_factor = 1.0;  // 1·(4 + 1) + 10 = 15 tokens
    CHECK(beam_search(m, {{5, 6, 7, 8}}, o)[0][0].tokens.size() == 15);
  }
}

TEST_CASE("Beam search wider than the output space equals exhaustive search", "[decode][beam][exhaustive]") {
  // Target vocabulary: PAD, UNK, BOS, EOS and two real tokens 4, 5 (UNK is never produced).
  // With max_length 3 the outputs are: 7 sequences of 0–2 tokens ending in EOS, and 8
  // sequences of 3 tokens cut at the limit. A beam of 16 never prunes.
  ModelConfig cfg = config(6);
  Transformer m(cfg);
  m.init_parameters(8);
  for (double alpha : {0.0, 0.7}) {
    DecodeOptions o;
    o.beam_size = 16;
    o.n_best = 15;
    o.max_length = 3;
    o.normalize = alpha;
    const std::vector<int32_t> src = {5, 6, 7, 8};
    const auto nb = beam_search(m, {src}, o)[0];
    // Exhaustive: score every output with forced decoding (teacher forcing, not the cache).
    struct Scored {
      std::vector<int32_t> tokens;
      double score;
      double norm;
    };
    std::vector<Scored> all;
    for (int len = 0; len <= 3; ++len)
      for (int code = 0; code < (1 << len); ++code) {
        std::vector<int32_t> seq;
        for (int p = 0; p < len; ++p) seq.push_back(4 + ((code >> p) & 1));
        const auto lp = forced_scores(m, {{src, seq}})[0];  // tokens then EOS
        double s = 0;
        const int n = len < 3 ? len + 1 : len;  // length-3 outputs end at the limit, no EOS
        for (int p = 0; p < n; ++p) s += lp[p];
        all.push_back({seq, s, s / std::pow(double(n), alpha)});
      }
    std::sort(all.begin(), all.end(), [](const Scored& a, const Scored& b) { return a.norm > b.norm; });
    REQUIRE(nb.size() == all.size());
    for (size_t j = 0; j < all.size(); ++j) {
      INFO("alpha " << alpha << ", rank " << j);
      CHECK(nb[j].tokens == all[j].tokens);
      CHECK(nb[j].score == Approx(all[j].score).margin(1e-4));
      CHECK(nb[j].normalized_score == Approx(all[j].norm).margin(1e-4));
    }
  }
}

TEST_CASE("Attention records of the cached decode equal one teacher-forced pass, also under beam search", "[decode][attention]") {
  Transformer m(config());
  m.init_parameters(9);
  m.params().find("output_projection.bias")->value(0, kEosId) = -1;
  for (int beam : {1, 4}) {
    DecodeOptions o;
    o.beam_size = beam;
    o.max_length = 10;
    o.return_attention = true;
    const auto out = beam_search(m, {kSources[1], kSources[0]}, o);
    for (size_t i = 0; i < 2; ++i) {
      const Hypothesis& h = out[i][0];
      const std::vector<int32_t>& src = i == 0 ? kSources[1] : kSources[0];
      Example e{src, h.tokens};
      const Batch b = make_batch({&e});
      ForwardCache cache;
      Mat logits;
      m.forward(b, DropoutContext{}, cache, logits);
      const int T = static_cast<int>(h.token_scores.size()), S = b.src_len, H = m.config().n_heads;
      REQUIRE(h.attention.cross.size() == 2);
      REQUIRE(h.attention.encoder_self.size() == 2);
      for (int l = 0; l < 2; ++l) {
        REQUIRE(h.attention.cross[l].rows() == H * T);
        REQUIRE(h.attention.cross[l].cols() == S);
        REQUIRE(h.attention.decoder_self[l].rows() == H * T);
        for (int hd = 0; hd < H; ++hd) {
          const Mat tf_self = cache.dec[l].self_attn.probs.block(Index(hd) * b.tgt_len, 0, T, T);
          const Mat tf_cross = cache.dec[l].cross_attn.probs.block(Index(hd) * b.tgt_len, 0, T, S);
          CHECK((h.attention.decoder_self[l].middleRows(Index(hd) * T, T) - tf_self).cwiseAbs().maxCoeff() < 1e-5);
          CHECK((h.attention.cross[l].middleRows(Index(hd) * T, T) - tf_cross).cwiseAbs().maxCoeff() < 1e-5);
          CHECK((h.attention.encoder_self[l].middleRows(Index(hd) * S, S) -
                 cache.enc[l].self_attn.probs.block(Index(hd) * S, 0, S, S)).cwiseAbs().maxCoeff() < 1e-5);
        }
      }
    }
  }
}

TEST_CASE("Every n-best hypothesis's attention (shared through parent pointers) equals its teacher-forced pass", "[decode][beam][attention]") {
  // Beam 4 with all 4 hypotheses returned: hypotheses share prefixes, so their step records
  // are shared tree nodes; each must still equal the teacher-forced pass of its own tokens, as
  // the per-candidate copies did. max_length 6 makes some of them end at the limit (no EOS).
  Transformer m(config());
  m.init_parameters(10);
  m.params().find("output_projection.bias")->value(0, kEosId) = -1.5;
  DecodeOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  o.max_length = 6;
  o.return_attention = true;
  const auto out = beam_search(m, {kSources[3], kSources[2]}, o);
  const int H = m.config().n_heads;
  int unfinished = 0;
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(out[i].size() == 4);
    for (const Hypothesis& h : out[i]) {
      unfinished += !h.finished;
      Example e{i == 0 ? kSources[3] : kSources[2], h.tokens};
      const Batch b = make_batch({&e});
      ForwardCache cache;
      Mat logits;
      m.forward(b, DropoutContext{}, cache, logits);
      const int T = static_cast<int>(h.token_scores.size()), S = b.src_len;
      REQUIRE(T == static_cast<int>(h.tokens.size()) + (h.finished ? 1 : 0));
      const auto forced = forced_scores(m, {e})[0];
      for (int t = 0; t < T; ++t) CHECK(h.token_scores[t] == Approx(forced[t]).margin(1e-4));
      for (int l = 0; l < 2; ++l) {
        REQUIRE(h.attention.decoder_self[l].rows() == H * T);
        REQUIRE(h.attention.cross[l].cols() == S);
        for (int hd = 0; hd < H; ++hd) {
          const Mat tf_self = cache.dec[l].self_attn.probs.block(Index(hd) * b.tgt_len, 0, T, T);
          const Mat tf_cross = cache.dec[l].cross_attn.probs.block(Index(hd) * b.tgt_len, 0, T, S);
          CHECK((h.attention.decoder_self[l].middleRows(Index(hd) * T, T) - tf_self).cwiseAbs().maxCoeff() < 1e-5);
          CHECK((h.attention.cross[l].middleRows(Index(hd) * T, T) - tf_cross).cwiseAbs().maxCoeff() < 1e-5);
        }
      }
    }
  }
  CHECK(unfinished > 0);  // the length-limit path was exercised
}

namespace {

/// A decoder state holding only what SentenceBeam reads: one layer, one head, `rows` rows,
/// self-attention weights 100·t + 10·row + key and cross weights 1000 + 10·row + key at step t.
DecoderState fake_step_state(int rows, int t, int src_len) {
  DecoderState st;
  st.batch_size = rows;
  st.last_self_probs.assign(1, Mat(rows, t + 1));
  st.last_cross_probs.assign(1, Mat(rows, src_len));
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k <= t; ++k) st.last_self_probs[0](r, k) = Scalar(100 * t + 10 * r + k);
    for (int k = 0; k < src_len; ++k) st.last_cross_probs[0](r, k) = Scalar(1000 + 10 * r + k);
  }
  return st;
}

}  // namespace

TEST_CASE("SentenceBeam: candidates, parents, EOS among the top K, the length limit and materialised records", "[decode][beam]") {
  DecodeOptions o;
  o.beam_size = 2;
  o.n_best = 2;
  o.normalize = 0.0;  // raw scores (the default α is 1)
  o.return_attention = true;
  SentenceBeam beam(o, /*limit=*/3, /*n_layers=*/1, /*n_heads=*/1);
  const int first_row = 4;  // the sentence's rows 4 and 5 of a larger batch
  int parents[2];
  int32_t tokens[2];
  const Scalar none = -std::numeric_limits<Scalar>::infinity();
  // Step 0: only slot 0 (BOS) is live. EOS is the 3rd candidate (not among the top 2): ignored.
  Proposal p0[] = {{-0.1f, 5}, {-0.5f, 6}, {-1.0f, kEosId}, {-2.0f, 7}, {none, -1}, {none, -1}, {none, -1}, {none, -1}};
  beam.advance(p0, 4, fake_step_state(6, 0, 3), first_row, parents, tokens);
  CHECK(parents[0] == 4);
  CHECK(parents[1] == 4);
  CHECK(tokens[0] == 5);
  CHECK(tokens[1] == 6);
  CHECK(beam.live(0));
  CHECK(beam.live(1));
  CHECK_FALSE(beam.done());
  // Step 1: slot 0 = [5] (−0.1), slot 1 = [6] (−0.5). [5] EOS (−0.3) finishes; [5 8] (−0.4) and
  // [6 9] (−0.55) continue, [6 9] in slot 1 continuing decoder row 5.
  Proposal p1[] = {{-0.2f, kEosId}, {-0.3f, 8}, {none, -1}, {none, -1}, {-0.05f, 9}, {-3.0f, kEosId}, {none, -1}, {none, -1}};
  beam.advance(p1, 4, fake_step_state(6, 1, 3), first_row, parents, tokens);
  CHECK(parents[0] == 4);
  CHECK(parents[1] == 5);
  CHECK(tokens[0] == 8);
  CHECK(tokens[1] == 9);
  CHECK_FALSE(beam.done());  // one finished < n_best
  // Step 2 reaches the limit: [5 8 10] (−0.5) ends without EOS, [6 9] EOS (−0.56) finishes.
  Proposal p2[] = {{-0.1f, 10}, {-0.7f, kEosId}, {none, -1}, {none, -1}, {-0.01f, kEosId}, {-1.0f, 11}, {none, -1}, {none, -1}};
  beam.advance(p2, 4, fake_step_state(6, 2, 3), first_row, parents, tokens);
  CHECK(beam.done());
  const std::vector<Hypothesis> nb = beam.n_best(/*src_tokens=*/2);
  REQUIRE(nb.size() == 2);
  CHECK(nb[0].tokens == std::vector<int32_t>{5});
  CHECK(nb[0].finished);
  REQUIRE(nb[0].token_scores.size() == 2);
  CHECK(nb[0].token_scores[1] == Approx(-0.2));
  CHECK(nb[0].score == Approx(-0.3));
  CHECK(nb[1].tokens == std::vector<int32_t>{5, 8, 10});
  CHECK_FALSE(nb[1].finished);
  CHECK(nb[1].score == Approx(-0.5));
  CHECK(nb[1].normalized_score == nb[1].score);  // α = 0, no word penalty
  // Attention: step t of both hypotheses came from row 4 (slot 0); [5]'s EOS step shares the
  // record of [5 8]'s step 1. Self rows are zero above the diagonal; cross keeps 2 columns.
  for (const Hypothesis& h : nb) {
    const Index T = static_cast<Index>(h.token_scores.size());
    const Mat& self = h.attention.decoder_self.at(0);
    const Mat& cross = h.attention.cross.at(0);
    REQUIRE(self.rows() == T);
    REQUIRE(self.cols() == T);
    REQUIRE(cross.cols() == 2);
    for (Index t = 0; t < T; ++t) {
      for (Index k = 0; k < T; ++k) CHECK(self(t, k) == (k <= t ? Scalar(100 * t + 40 + k) : Scalar(0)));
      CHECK(cross(t, 0) == Scalar(1040));
      CHECK(cross(t, 1) == Scalar(1041));
    }
  }
}

TEST_CASE("A SentenceBeam with limit 0 holds one empty, unfinished hypothesis", "[decode][beam]") {
  DecodeOptions o;
  o.word_penalty = 0.5;
  const SentenceBeam beam(o, 0, 2, 4);
  CHECK(beam.done());
  const auto nb = beam.n_best(3);
  REQUIRE(nb.size() == 1);
  CHECK(nb[0].tokens.empty());
  CHECK_FALSE(nb[0].finished);
  CHECK(nb[0].normalized_score == 0.5);  // (0 + 0.5·1) / 1^α
}

TEST_CASE("NBestCollector ranks stably and StoppingRule bounds what live beams can reach", "[decode][beam]") {
  DecodeOptions o;
  o.beam_size = 3;
  o.normalize = 0.0;  // no length normalisation first (the default is 1)
  NBestCollector nb;
  nb.add({1, -1.0, true});
  nb.add({2, -0.5, true});
  nb.add({3, -0.5, false});
  const auto best = nb.best(2);
  REQUIRE(best.size() == 2);
  CHECK(best[0].node == 2);  // equal scores: the one that finished first
  CHECK(best[1].node == 3);
  CHECK(nb.best(5).size() == 3);
  CHECK(nb.nth_best_score(3) == -1.0);
  CHECK_THROWS_AS(nb.nth_best_score(0), ShapeError);
  CHECK_THROWS_AS(nb.nth_best_score(4), ShapeError);

  NBestCollector one;
  one.add({1, -0.5, true});
  const StoppingRule rule(o, /*limit=*/10);
  CHECK(rule.done(2, {-1.0}, one));       // α = 0: a live beam can only lose score
  CHECK_FALSE(rule.done(2, {-0.4}, one));  // it may still beat −0.5
  CHECK(rule.done(2, {}, NBestCollector{}));  // nothing live
  CHECK(rule.done(10, {-0.1}, NBestCollector{}));  // the limit
  CHECK(rule.done(2, {-0.1}, nb));  // beam_size hypotheses finished
  o.normalize = 1.0;
  const StoppingRule normalized(o, 10);
  // score −1 after 2 tokens can still reach −1/11 (11 tokens incl. EOS): better than −0.5.
  CHECK(normalized.best_reachable(-1.0, 2) == Approx(-1.0 / 11));
  CHECK_FALSE(normalized.done(2, {-1.0}, one));
}

TEST_CASE("The Translator returns every result in input order, equal to unbatched decoding", "[decode][translator]") {
  std::vector<std::string> text = {"the cat sat on the mat", "a dog ran in the park", "the sun is hot",
                                   "we like green tea", "she reads a long book", "it is cold at night"};
  TokenizerOptions topts;
  topts.vocab_size = 40;
  const Tokenizer tok = Tokenizer::train(text, topts);
  Transformer m(config(tok.vocab_size()));
  m.init_parameters(12);
  m.params().find("output_projection.bias")->value(0, kEosId) = -1;
  std::vector<std::vector<int32_t>> sources = kSources;
  sources.insert(sources.begin() + 2, std::vector<int32_t>{});  // an empty line among them
  sources.push_back({7, 8});
  for (int beam : {1, 3}) {
    DecodeOptions o;
    o.beam_size = beam;
    o.n_best = beam;
    o.max_length = 8;
    for (int mini_batch : {0, 2, 3, 100}) {  // 0 counts as 1
      const Translator translator(m, o, mini_batch);
      const auto got = translator.translate(sources);
      const auto text_out = translator.translate_text(sources, tok);
      REQUIRE(got.size() == sources.size());
      REQUIRE(text_out.size() == sources.size());
      for (size_t i = 0; i < sources.size(); ++i) {
        INFO("beam " << beam << ", mini-batch " << mini_batch << ", sentence " << i);
        const auto alone = beam_search(m, {sources[i]}, o)[0];
        REQUIRE(got[i].size() == alone.size());
        for (size_t j = 0; j < alone.size(); ++j) {
          CHECK(got[i][j].tokens == alone[j].tokens);
          CHECK(got[i][j].score == Approx(alone[j].score).margin(1e-4));
        }
        CHECK(text_out[i] == tok.detokenize(alone[0].tokens));
      }
    }
  }
  std::vector<Example> examples;
  for (const auto& s : sources) examples.push_back({s, {}});
  CHECK(best_translations(m, examples, tok, 2) == Translator(m, DecodeOptions{}, 2).translate_text(sources, tok));
}

TEST_CASE("Alignments from a hand-made cross-attention matrix", "[decode][alignment]") {
  // 2 heads, T = 3 decoder steps (2 output tokens + EOS), S = 4 source tokens (3 + EOS).
  Hypothesis h;
  h.tokens = {7, 8};
  Mat cross(6, 4);
  cross << 0.50, 0.25, 0.25, 0.00,   // head 0, t = 0
           0.00, 0.50, 0.50, 0.00,   // head 0, t = 1
           0.25, 0.25, 0.25, 0.25,   // head 0, t = 2 (EOS step: not aligned)
           0.50, 0.25, 0.00, 0.25,   // head 1, t = 0
           0.00, 0.00, 1.00, 0.00,   // head 1, t = 1
           0.25, 0.25, 0.25, 0.25;   // head 1, t = 2
  h.attention.cross = {Mat::Zero(6, 4), cross};
  const Mat avg = head_average(h.attention, 1, 2);
  REQUIRE(avg.rows() == 3);
  CHECK(avg(0, 0) == Scalar(0.5));
  CHECK(avg(0, 1) == Scalar(0.25));
  CHECK(avg(1, 2) == Scalar(0.75));
  CHECK(hard_alignment(avg, 2, 3) == std::vector<std::pair<Index, Index>>{{0, 0}, {2, 1}});
  CHECK(threshold_alignment(avg, 2, 3, 0.25) ==
        std::vector<std::pair<Index, Index>>{{0, 0}, {1, 0}, {1, 1}, {2, 1}});
  CHECK(format_alignment(h, parse_alignment("hard"), 2, 1) == "0-0 2-1");
  CHECK(format_alignment(h, parse_alignment("0.3"), 2, 1) == "0-0 2-1");
  CHECK(format_alignment(h, parse_alignment("0.25"), 2, 1) == "0-0 1-0 1-1 2-1");
  // Soft: the source EOS column dropped, each row renormalised (row 0 had 0.125 on EOS).
  CHECK(format_alignment(h, parse_alignment("soft"), 2, 1) == "0.5714,0.2857,0.1429 0.0000,0.2500,0.7500");
  // Ties: the first source token. Layer 0 is all zeros: every target token aligns to 0.
  CHECK(format_alignment(h, parse_alignment("hard"), 2, 0) == "0-0 0-1");
  CHECK(format_alignment(h, parse_alignment("1"), 2, 0).empty());
  CHECK_THROWS_AS(head_average(h.attention, 2, 2), std::out_of_range);
  for (const char* bad : {"0", "1.5", "x", "0.5x", "", "-0.2"})
    CHECK_THROWS_AS(parse_alignment(bad), ConfigError);
}

TEST_CASE("Soft alignment rows are distributions over the source subwords", "[decode][alignment]") {
  // Rows of a softmax over S = 6 source tokens (5 + EOS) with uneven EOS mass; the last row has
  // all its mass on EOS and stays zero.
  Mat avg(4, 6);
  avg << 0.10, 0.20, 0.05, 0.05, 0.30, 0.30,
         0.01, 0.02, 0.03, 0.04, 0.62, 0.28,
         0.30, 0.10, 0.10, 0.20, 0.29, 0.01,
         0.00, 0.00, 0.00, 0.00, 0.00, 1.00;
  const Mat soft = soft_alignment(avg, 4, 5);
  REQUIRE(soft.rows() == 4);
  REQUIRE(soft.cols() == 5);
  for (Index t = 0; t < 3; ++t) {
    double sum = 0;
    for (Index s = 0; s < 5; ++s) sum += soft(t, s);
    CHECK(std::abs(sum - 1.0) < 1e-6);
    // Proportional: ratios between source tokens are kept.
    CHECK(soft(t, 1) * avg(t, 0) == Approx(soft(t, 0) * avg(t, 1)).margin(1e-7));
  }
  CHECK(soft.row(3).isZero());
}

TEST_CASE("Results as bytes read back bit for bit, attention and search included; truncated bytes throw", "[decode][translator]") {
  Transformer m(config());
  m.init_parameters(9);
  m.params().find("output_projection.bias")->value(0, kEosId) = -1;
  DecodeOptions o;
  o.beam_size = 3;
  o.n_best = 3;
  o.max_length = 6;
  o.return_attention = true;
  const std::vector<std::vector<int32_t>> sources = {kSources[1], {}, kSources[0]};
  BeamTrace trace{2, {}};
  const auto results = beam_search(m, sources, o, &trace);
  std::string bytes;
  for (size_t i = 0; i < sources.size(); ++i)
    append_result_bytes(bytes, 10 + i, results[i], i == 1 ? nullptr : &trace.sentences[i]);
  size_t pos = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    INFO("source " << i);
    const SourceResult r = read_result_bytes(bytes, pos);
    CHECK(r.index == 10 + i);
    REQUIRE(r.n_best.size() == results[i].size());
    for (size_t j = 0; j < r.n_best.size(); ++j) {
      const Hypothesis &a = r.n_best[j], &b = results[i][j];
      CHECK(a.tokens == b.tokens);
      CHECK(a.token_scores == b.token_scores);
      CHECK((a.score == b.score && a.finished == b.finished && a.normalized_score == b.normalized_score));
      CHECK(a.attention.encoder_self == b.attention.encoder_self);
      CHECK(a.attention.decoder_self == b.attention.decoder_self);
      CHECK(a.attention.cross == b.attention.cross);
    }
    REQUIRE(r.has_trace == (i != 1));
    if (!r.has_trace) continue;
    const SentenceTrace &a = r.trace, &b = trace.sentences[i];
    REQUIRE(a.steps.size() == b.steps.size());
    CHECK(!a.steps.empty());
    for (size_t t = 0; t < a.steps.size(); ++t) {
      REQUIRE(a.steps[t].size() == b.steps[t].size());
      for (size_t k = 0; k < a.steps[t].size(); ++k) {
        const TraceHypothesis &x = a.steps[t][k], &y = b.steps[t][k];
        CHECK((x.id == y.id && x.parent == y.parent && x.token == y.token && x.logprob == y.logprob &&
               x.score == y.score && x.normalized == y.normalized && x.cross == y.cross));
        REQUIRE(x.candidates.size() == y.candidates.size());
        for (size_t c = 0; c < x.candidates.size(); ++c)
          CHECK((x.candidates[c].token == y.candidates[c].token && x.candidates[c].score == y.candidates[c].score &&
                 x.candidates[c].status == y.candidates[c].status && x.candidates[c].id == y.candidates[c].id));
      }
    }
    REQUIRE(a.finished.size() == b.finished.size());
    for (size_t f = 0; f < a.finished.size(); ++f)
      CHECK((a.finished[f].id == b.finished[f].id && a.finished[f].normalized == b.finished[f].normalized &&
             a.finished[f].eos == b.finished[f].eos));
    CHECK(a.n_best == b.n_best);
  }
  CHECK(pos == bytes.size());
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    size_t at = 0;
    const std::string part = bytes.substr(0, cut);
    CHECK_THROWS_AS(([&] { while (true) read_result_bytes(part, at); })(), DataError);
  }
}
