// Ensemble decoding (decode/ensemble.h): the combined scores are Σ w_i·log_softmax_i, bit for
// bit a model's own log-softmax for one model; greedy search of two different models picks the
// argmax of the combination (an independent loop over both decoders); forced scores are the
// weighted sums of the models' scores and agree with the scores beam search reports; a model
// twice with weights 0.5 0.5 decodes as the model alone; bad ensembles are refused.
#include <catch2/catch.hpp>

#include <cmath>

#include "anuvad/core/error.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/ensemble.h"
#include "anuvad/decode/translator.h"
#include "anuvad/nn/loss.h"
#include "support/test_support.h"

using namespace anuvad;

namespace {

ModelConfig config(int tgt_vocab = 30) { return test::tiny_config({30, tgt_vocab, 32, 4, 48, 2, 2, 64}); }

const std::vector<std::vector<int32_t>> kSources = {
    {5, 6, 7}, {8, 9, 10, 11, 12, 13}, {14}, {15, 16, 17, 18}, {19, 20, 21, 22, 23, 24, 25, 26}};

/// A randomly initialised model that does not stop at once (EOS bias lowered).
std::unique_ptr<Transformer> model(uint64_t seed) {
  auto m = std::make_unique<Transformer>(config());
  m->init_parameters(seed);
  m->params().find("output_projection.bias")->value(0, kEosId) = -2;
  return m;
}

/// Greedy decoding of one source written directly on every model's decode_step: each step the
/// argmax (PAD, BOS, UNK excluded) of Σ w_i·log_softmax(logits_i).
std::vector<int32_t> reference_greedy(const std::vector<const Transformer*>& models,
                                      const std::vector<double>& weights,
                                      const std::vector<int32_t>& src, int limit) {
  Example e{src, {}};
  const Batch b = make_batch({&e});
  std::vector<ForwardCache> caches(models.size());
  std::vector<DecoderState> states;
  for (size_t i = 0; i < models.size(); ++i) {
    models[i]->encode(b.src, b.src_rows, DropoutContext{}, caches[i]);
    states.push_back(models[i]->begin_decoding(caches[i].memory, b.src_rows, limit + 1));
  }
  std::vector<int32_t> out;
  int32_t tok = kBosId;
  for (int t = 0; t < limit; ++t) {
    RowVec sum;
    for (size_t i = 0; i < models.size(); ++i) {
      Mat logits;
      models[i]->decode_step({tok}, states[i], logits);
      const RowVec lp = log_softmax_rows(logits).row(0) * Scalar(weights[i]);
      sum = i == 0 ? lp : RowVec(sum + lp);
    }
    int32_t best = -1;
    for (int32_t v = 0; v < sum.cols(); ++v) {
      if (v == kPadId || v == kBosId || v == kUnkId) continue;
      if (best < 0 || sum[v] > sum[best]) best = v;
    }
    if (best == kEosId) break;
    out.push_back(best);
    tok = best;
  }
  return out;
}

}  // namespace

TEST_CASE("ensemble_log_probs of one model is its log-softmax bit for bit; of two, the weighted sum",
          "[decode][ensemble]") {
  const auto a = model(1), b = model(2);
  Mat za(3, 30), zb(3, 30);
  za.setRandom();
  zb.setRandom();
  za *= 5;
  const std::vector<char> wanted = {1, 0, 1};
  Mat out;
  ensemble_log_probs(Ensemble(*a), {za}, wanted, out);
  const Mat la = log_softmax_rows(za), lb = log_softmax_rows(zb);
  CHECK(out.row(0) == la.row(0));
  CHECK(out.row(2) == la.row(2));
  ensemble_log_probs(Ensemble({a.get(), b.get()}, {0.25, 2.0}), {za, zb}, wanted, out);
  for (Index r : {0, 2})
    for (Index v = 0; v < 30; ++v) CHECK(out(r, v) == Approx(0.25 * la(r, v) + 2.0 * lb(r, v)).margin(1e-5));
}

TEST_CASE("Greedy search of an ensemble takes the argmax of the weighted log-probabilities",
          "[decode][ensemble]") {
  const auto a = model(1), b = model(7);
  const std::vector<double> weights = {0.3, 1.2};
  const Ensemble e({a.get(), b.get()}, weights);
  DecodeOptions o;
  o.max_length = 12;
  const auto hyps = greedy_decode(e, kSources, o);
  int differ = 0;  // sentences where the ensemble does not follow model a alone
  const auto alone = greedy_decode(*a, kSources, o);
  for (size_t i = 0; i < kSources.size(); ++i) {
    const int limit = max_output_length(a->config(), o, int(kSources[i].size()));
    CHECK(hyps[i].tokens == reference_greedy({a.get(), b.get()}, weights, kSources[i], limit));
    differ += hyps[i].tokens != alone[i].tokens;
  }
  CHECK(differ > 0);  // otherwise the test could not tell the ensemble from model a
}

TEST_CASE("Forced scores of an ensemble are the weighted sums, and beam search reports the same",
          "[decode][ensemble]") {
  const auto a = model(3), b = model(4);
  const Ensemble e({a.get(), b.get()}, {0.4, 0.6});
  DecodeOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  o.max_length = 10;
  const auto n_best = beam_search(e, kSources, o);
  for (size_t i = 0; i < kSources.size(); ++i)
    for (const Hypothesis& h : n_best[i]) {
      const Example ex{kSources[i], h.tokens};
      const auto fe = forced_scores(e, {ex})[0], fa = forced_scores(*a, {ex})[0], fb = forced_scores(*b, {ex})[0];
      REQUIRE(fe.size() == h.tokens.size() + 1);
      for (size_t t = 0; t < fe.size(); ++t) CHECK(fe[t] == Approx(0.4 * fa[t] + 0.6 * fb[t]).margin(1e-9));
      // Reported up to the length limit (no EOS score for an unfinished hypothesis).
      REQUIRE(h.token_scores.size() == h.tokens.size() + (h.finished ? 1 : 0));
      for (size_t t = 0; t < h.token_scores.size(); ++t) CHECK(h.token_scores[t] == Approx(fe[t]).margin(1e-4));
    }
}

TEST_CASE("A model twice with weights 0.5 0.5 decodes and scores as the model alone", "[decode][ensemble]") {
  const auto a = model(5);
  const Ensemble twice({a.get(), a.get()}, {0.5, 0.5});
  DecodeOptions o;
  o.beam_size = 4;
  o.n_best = 3;
  o.max_length = 10;
  o.normalize = 0.6;
  const auto alone = Translator(*a, o, 2).translate(kSources);
  const auto both = Translator(twice, o, 2).translate(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    REQUIRE(both[i].size() == alone[i].size());
    for (size_t k = 0; k < alone[i].size(); ++k) {
      CHECK(both[i][k].tokens == alone[i][k].tokens);
      CHECK(both[i][k].score == Approx(alone[i][k].score).margin(1e-5));
      CHECK(both[i][k].normalized_score == Approx(alone[i][k].normalized_score).margin(1e-5));
    }
    const Example ex{kSources[i], alone[i][0].tokens};
    const auto fa = forced_scores(*a, {ex})[0], f2 = forced_scores(twice, {ex})[0];
    for (size_t t = 0; t < fa.size(); ++t) CHECK(f2[t] == Approx(fa[t]).margin(1e-6));
  }
}

TEST_CASE("Bad ensembles are refused", "[decode][ensemble]") {
  const auto a = model(1);
  Transformer other(config(31));
  CHECK_THROWS_AS(Ensemble({}, {}), ConfigError);
  CHECK_THROWS_AS(Ensemble({a.get(), a.get()}, {1.0}), ConfigError);
  CHECK_THROWS_AS(Ensemble({a.get()}, {std::nan("")}), ConfigError);
  CHECK_THROWS_AS(Ensemble({a.get(), &other}), ConfigError);
  CHECK(Ensemble({a.get(), a.get()}).weight(1) == 1.0);
  CHECK(Ensemble(*a).single());
  CHECK_FALSE(Ensemble({a.get()}, {0.5}).single());
}
