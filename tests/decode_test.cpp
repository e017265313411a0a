// Greedy and beam search on the key/value cache: beam 1 equals an independent greedy loop,
// n-best lists are sorted and distinct, batches translate exactly as single sentences, EOS
// first gives an empty output, length limits hold, and beam search with a beam wider than the
// output space reproduces exhaustive search (parent bookkeeping, early-finished ancestry).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "anuvad/decode/decode.h"
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
  m.encode(b.src, 1, b.src_len, b.src_lengths, DropoutContext{}, cache);
  DecoderState st = m.begin_decoding(cache.memory, 1, b.src_len, b.src_lengths, limit + 1);
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
  Transformer m(config());
  m.init_parameters(4);
  m.params().find("output_projection.bias")->value(0, kEosId) = -2;
  DecodeOptions o;
  o.max_length = 15;
  const auto hyps = decode_batch(m, kSources, o);
  for (size_t i = 0; i < kSources.size(); ++i)
    CHECK(hyps[i][0].tokens == reference_greedy(m, kSources[i], max_output_length(m.config(), o, int(kSources[i].size()))));
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
    const auto batched = decode_batch(m, kSources, o);
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
      const auto alone = decode_batch(m, {kSources[i]}, o)[0];
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
    const auto h = decode_batch(m, {{5, 6, 7}}, o)[0][0];
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
    const auto nb = decode_batch(m, {{5, 6, 7, 8}}, o)[0];
    REQUIRE(nb.size() == size_t(beam));
    for (const auto& h : nb) {
      CHECK(h.tokens.size() == 7);
      CHECK_FALSE(h.finished);
    }
    o.max_length = 100;
    o.max_length_factor = 1.0;  // 1·(4 + 1) + 10 = 15 tokens
    CHECK(decode_batch(m, {{5, 6, 7, 8}}, o)[0][0].tokens.size() == 15);
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
    const auto nb = decode_batch(m, {src}, o)[0];
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
    const auto out = decode_batch(m, {kSources[1], kSources[0]}, o);
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
