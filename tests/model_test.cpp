// Model-level properties in the float build: the attention kernel against a naive loop
// (n_q ≠ n_k, cache suffixes, fully masked rows), causal leakage, KV-cache parity with teacher
// forcing, padding/batch invariance, deterministic training, overfitting 20 pairs, mid-epoch
// resume and the NaN/Inf checks.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <utility>

#include "anuvad/nn/attention.h"
#include "anuvad/decode/decode.h"
#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"
#include "anuvad/train/adam.h"
#include "anuvad/train/replicas.h"
#include "anuvad/train/trainer.h"
#include "anuvad/nn/transformer.h"
#include "support/gradcheck.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::random_mat;
using anuvad::test::rel_diff;

namespace {

ModelConfig small_config(const std::string& norm = "pre", bool tie = true) {
  return test::tiny_config({40, 50, 32, 4, 64, 2, 2, 64}, norm, tie);
}

/// Reference attention written as plain loops with a −∞ additive mask over absolute positions.
void naive_attention(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& s,
                     const std::vector<int>* key_lengths, bool causal, int query_offset,
                     Mat& probs, Mat& ctx) {
  const int dh = static_cast<int>(q.cols()) / s.n_heads;
  probs.setZero(Index(s.batch_size) * s.n_heads * s.n_queries, s.n_keys);
  ctx.setZero(q.rows(), q.cols());
  for (int b = 0; b < s.batch_size; ++b)
    for (int h = 0; h < s.n_heads; ++h)
      for (int i = 0; i < s.n_queries; ++i) {
        std::vector<double> score(s.n_keys);
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < s.n_keys; ++j) {
          double dot = 0;
          for (int d = 0; d < dh; ++d)
            dot += double(q(Index(b) * s.n_queries + i, h * dh + d)) * double(k(Index(b) * s.k_stride + j, h * dh + d));
          const bool padded = key_lengths && j >= (*key_lengths)[b];
          const bool future = causal && j > query_offset + i;  // absolute positions
          score[j] = (padded || future) ? -std::numeric_limits<double>::infinity() : dot / std::sqrt(double(dh));
          mx = std::max(mx, score[j]);
        }
        if (std::isinf(mx)) continue;  // fully masked row: zero weights, zero context
        double z = 0;
        for (double& x : score) z += (x = std::exp(x - mx));
        for (int j = 0; j < s.n_keys; ++j) {
          const double p = score[j] / z;
          probs((Index(b) * s.n_heads + h) * s.n_queries + i, j) = static_cast<Scalar>(p);
          for (int d = 0; d < dh; ++d)
            ctx(Index(b) * s.n_queries + i, h * dh + d) += static_cast<Scalar>(p * double(v(Index(b) * s.k_stride + j, h * dh + d)));
        }
      }
}

Batch batch_of(const std::vector<Example>& ex) {
  std::vector<const Example*> p;
  for (const auto& e : ex) p.push_back(&e);
  return make_batch(p);
}

}  // namespace

TEST_CASE("Attention kernel matches a naive loop for n_q != n_k, cache suffixes and fully masked rows", "[model][mask]") {
  const int n_heads = 2, d_model = 8, batch = 3;
  const std::vector<int> key_lengths = {5, 0, 3};  // sentence 1 has no visible key at all
  struct Case {
    const char* name;
    int n_q, n_k;
    bool causal;
    int query_offset;
    bool padding;
  };
  for (const Case c : {Case{"cross-attention n_q=2 < n_k=5", 2, 5, false, 0, true},
                       Case{"cross-attention n_q=6 > n_k=5", 6, 5, false, 0, true},
                       Case{"causal square", 5, 5, true, 0, true},
                       Case{"causal, queries are the suffix of the keys (cache)", 2, 5, true, 3, false},
                       Case{"causal, one query at the end of the cache", 1, 5, true, 4, true}}) {
    SECTION(c.name) {
      const Mat q = random_mat(Index(batch) * c.n_q, d_model, 1);
      const Mat k = random_mat(Index(batch) * c.n_k, d_model, 2);
      const Mat v = random_mat(Index(batch) * c.n_k, d_model, 3);
      const AttentionShape shape{batch, c.n_q, c.n_k, n_heads, c.n_k};
      const AttentionMask mask{c.padding ? &key_lengths : nullptr, c.causal, c.query_offset};
      Mat probs, ctx, ref_probs, ref_ctx;
      scaled_dot_product_attention(q, k, v, shape, mask, Mat(), probs, ctx);
      naive_attention(q, k, v, shape, c.padding ? &key_lengths : nullptr, c.causal, c.query_offset, ref_probs, ref_ctx);
      REQUIRE(probs.allFinite());
      REQUIRE(ctx.allFinite());
      CHECK(rel_diff(probs, ref_probs) < 1e-5);
      CHECK(rel_diff(ctx, ref_ctx) < 1e-5);
      // Masked weights are exactly zero, visible rows sum to one (or zero when fully masked).
      for (Index r = 0; r < probs.rows(); ++r) {
        const double sum = probs.row(r).sum();
        CHECK((std::abs(sum - 1.0) < 1e-5 || sum == 0.0));
      }
    }
  }
}

TEST_CASE("Causal mask: changing target token j changes nothing before j", "[model][mask][leakage]") {
  Transformer model(small_config("pre", /*tie=*/false));  // untied: embedding grads come only from inputs
  model.init_parameters(3);
  const std::vector<Example> ex = {{{5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15}}, {{7, 8}, {16, 17, 18}}};
  const Batch base = batch_of(ex);
  for (int j = 1; j < base.tgt_len; ++j) {
    Batch changed = base;
    changed.tgt_in[j] = 40;  // sentence 0, decoder input position j
    ForwardCache c1, c2;
    Mat l1, l2;
    model.forward(base, DropoutContext{}, c1, l1);
    model.forward(changed, DropoutContext{}, c2, l2);
    INFO("changed position " << j);
    CHECK(l1.topRows(j) == l2.topRows(j));  // positions before j of sentence 0: bit-identical
    CHECK(l1.bottomRows(base.tgt_lengths[1]) == l2.bottomRows(base.tgt_lengths[1]));  // sentence 1 untouched
    CHECK(l1.row(j) != l2.row(j));  // the change is visible at j itself
    const int H = model.config().n_heads, T = base.tgt_len;
    for (int l = 0; l < model.config().decoder_layers; ++l)
      for (int h = 0; h < H; ++h) {
        CHECK(c1.dec[l].self_attn.probs.block(Index(h) * T, 0, j, T) == c2.dec[l].self_attn.probs.block(Index(h) * T, 0, j, T));
        CHECK(c1.dec[l].cross_attn.probs.block(Index(h) * T, 0, j, base.src_len) == c2.dec[l].cross_attn.probs.block(Index(h) * T, 0, j, base.src_len));
      }
  }
  SECTION("the loss before position j has exactly zero gradient w.r.t. tokens at j and later") {
    for (int j = 1; j < base.tgt_len; ++j) {
      Batch b = base;
      for (int t = j; t < b.tgt_lengths[0]; ++t) b.tgt_out[t] = kPadId;  // loss over positions < j of sentence 0
      for (int t = 0; t < b.tgt_lengths[1]; ++t) b.tgt_out[size_t(b.tgt_rows.offsets[1] + t)] = kPadId;
      ForwardCache c;
      Mat logits, dlogits;
      model.forward(b, DropoutContext{}, c, logits);
      label_smoothed_cross_entropy(logits, b.tgt_out, 0.1, &dlogits, 1.0);
      model.params().zero_grad();
      model.backward(b, dlogits, c);
      const Mat& demb = model.params().find("decoder.embed_tokens.weight")->grad;
      INFO("loss before position " << j);
      for (int t = 0; t < b.tgt_lengths[0]; ++t) {
        const int32_t id = b.tgt_in[t];  // all ids of sentence 0 are distinct
        if (t >= j) {
          CHECK(demb.row(id).isZero(0));
        } else {
          CHECK(!demb.row(id).isZero(0));
        }
      }
    }
  }
}

TEST_CASE("KV-cached incremental decoding equals the teacher-forced pass", "[model][cache]") {
  // Two threads, so that the batch of 27 runs decode_step in parallel row blocks (≥ 8 rows each).
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  for (const char* norm : {"pre", "post"}) {
    Transformer model(small_config(norm, true));
    model.init_parameters(11);
    std::vector<Example> ex = {{{5, 6, 7, 8, 9, 10}, {11, 12, 13, 14, 15, 16, 17}},
                               {{7, 8}, {18, 19, 20}},
                               {{9, 10, 11, 12}, {21, 22, 23, 24, 25}}};
    for (int j = 0; j < 24; ++j) {  // more sentences of varied lengths: the blocked path
      Example e;
      for (int k = 0; k < 2 + j % 7; ++k) e.src.push_back(4 + (j * 3 + k) % 36);
      for (int k = 0; k < 3 + j % 5; ++k) e.tgt.push_back(4 + (j * 5 + k) % 46);
      ex.push_back(e);
    }
    for (size_t n : {size_t(1), size_t(3), ex.size()}) {  // batch 1, a padded batch, blocked
      const Batch b = batch_of(std::vector<Example>(ex.begin(), ex.begin() + n));
      ForwardCache cache;
      Mat logits;
      model.forward(b, DropoutContext{}, cache, logits);
      DecoderState st = model.begin_decoding(cache.memory, b.src_rows, b.tgt_len);
      CHECK_THROWS_AS(model.decode_step(std::vector<int32_t>(b.batch_size, 50), st, logits), ShapeError);  // id ≥ V
      CHECK(st.length == 0);
      double worst = 0;
      for (int t = 0; t < b.tgt_len; ++t) {
        std::vector<int32_t> tokens(b.batch_size);
        for (int i = 0; i < b.batch_size; ++i)
          tokens[i] = t < b.tgt_lengths[i] ? b.tgt_in[size_t(b.tgt_rows.offsets[i] + t)] : kPadId;
        Mat step_logits;
        model.decode_step(tokens, st, step_logits);
        CHECK(st.length == t + 1);
        for (int i = 0; i < b.batch_size; ++i) {
          if (t >= b.tgt_lengths[i]) continue;  // only real (non-PAD) positions
          const Mat ref = logits.row(Index(b.tgt_rows.offsets[i]) + t);
          const Mat got = step_logits.row(i);
          worst = std::max(worst, rel_diff(got, ref));
          // Attention weights of the step equal the teacher-forced row (cached path = dump path).
          for (int l = 0; l < model.config().decoder_layers; ++l)
            for (int h = 0; h < model.config().n_heads; ++h) {
              const Index tf_row = (Index(i) * model.config().n_heads + h) * b.tgt_len + t;
              const Index st_row = Index(i) * model.config().n_heads + h;
              CHECK(rel_diff(st.last_self_probs[l].row(st_row), cache.dec[l].self_attn.probs.row(tf_row).head(t + 1)) < 1e-5);
              CHECK(rel_diff(st.last_cross_probs[l].row(st_row), cache.dec[l].cross_attn.probs.row(tf_row)) < 1e-5);
            }
        }
      }
      INFO(norm << "-norm, batch " << n << ": largest relative logit deviation " << worst);
      CHECK(worst < 1e-5);
      WARN("cache parity " << norm << "-norm batch " << n << ": max rel deviation " << worst);
      CHECK_THROWS_AS(model.decode_step(std::vector<int32_t>(b.batch_size, 4), st, logits), ShapeError);
    }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("Affine products through gemm (OpenBLAS from 16 rows, Eigen below) equal plain Eigen products", "[model][linear]") {
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  std::mt19937_64 rng(7);
  for (const Index rows : {Index(1), Index(3), Index(15), Index(16), Index(37), Index(200)}) {
    for (const auto& [in, out] : {std::pair<Index, Index>{64, 96}, {256, 300}}) {
      Mat x(rows, in), w(out, in), b(1, out), dy(rows, out);
      normal_init(x, 1, rng);
      normal_init(w, 1, rng);
      normal_init(b, 1, rng);
      normal_init(dy, 1, rng);
      Mat y(rows, out);
      affine_into(x, w, b, y);
      const Mat y_ref = (x * w.transpose()).rowwise() + b.row(0);
      CHECK(rel_diff(y, y_ref) < 1e-5);
      Mat dw = Mat::Ones(out, in), db = Mat::Ones(1, out), dx;
      affine_backward(dy, x, w, dw, db, dx, /*accumulate=*/false);
      CHECK(rel_diff(dw, Mat((dy.transpose() * x).array() + 1)) < 1e-5);
      CHECK(rel_diff(db, Mat(dy.colwise().sum().array() + 1)) < 1e-5);
      CHECK(rel_diff(dx, Mat(dy * w)) < 1e-5);
      Mat dx2 = Mat::Ones(rows, in);
      affine_backward(dy, x, w, dw, db, dx2, /*accumulate=*/true);
      CHECK(rel_diff(dx2, Mat((dy * w).array() + 1)) < 1e-5);
    }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("The inference encoder gives the training encoder's memory and attention exactly", "[model][cache]") {
  for (const char* norm : {"pre", "post"}) {
    Transformer model(small_config(norm, true));
    model.init_parameters(5);
    const Batch b = batch_of({{{5, 6, 7, 8, 9, 10}, {11, 12}}, {{7, 8}, {18, 19, 20}}});
    ForwardCache train, infer;
    infer.inference = true;
    model.encode(b.src, b.src_rows, DropoutContext{}, train);
    model.encode(b.src, b.src_rows, DropoutContext{}, infer);
    CHECK(infer.memory == train.memory);
    for (size_t l = 0; l < train.enc.size(); ++l) CHECK(infer.enc[l].self_attn.probs == train.enc[l].self_attn.probs);
    Mat logits;
    model.decoder_forward(b.tgt_in, b.tgt_rows, b.src_rows, DropoutContext{}, infer, logits);
    CHECK_THROWS_AS(model.backward(b, logits, infer), ShapeError);
  }
}

TEST_CASE("A sentence gives the same encoder output, logits and translation alone and in a padded batch", "[model][padding]") {
  Transformer model(small_config());
  model.init_parameters(21);
  const std::vector<Example> ex = {{{5, 6, 7}, {11, 12}},
                                   {{8, 9, 10, 11, 12, 13, 14, 15}, {13, 14, 15, 16, 17, 18, 19, 20, 21}},
                                   {{16, 17, 18, 19, 20}, {22, 23, 24, 25}}};
  const Batch alone = batch_of({ex[0]});
  const Batch padded = batch_of(ex);
  ForwardCache ca, cb;
  Mat la, lb;
  model.forward(alone, DropoutContext{}, ca, la);
  model.forward(padded, DropoutContext{}, cb, lb);
  const double mem_dev = rel_diff(cb.memory.topRows(alone.src_len), ca.memory);
  const double logit_dev = rel_diff(lb.topRows(alone.tgt_len), la);
  WARN("padding invariance: memory " << mem_dev << ", logits " << logit_dev);
  CHECK(mem_dev < 1e-5);
  CHECK(logit_dev < 1e-5);
  const DecodeOptions opts;
  const auto one = greedy_decode(model, {ex[0].src}, opts);
  const auto all = greedy_decode(model, {ex[0].src, ex[1].src, ex[2].src}, opts);
  CHECK(one[0].tokens == all[0].tokens);
  for (int i = 0; i < 3; ++i) {
    const auto single = greedy_decode(model, {ex[i].src}, opts);
    CHECK(single[0].tokens == all[i].tokens);
    REQUIRE(single[0].token_scores.size() == all[i].token_scores.size());
    for (size_t t = 0; t < single[0].token_scores.size(); ++t)
      CHECK(single[0].token_scores[t] == Approx(all[i].token_scores[t]).margin(1e-5));
  }
}

TEST_CASE("Greedy word scores equal forced-decoding scores of the same output", "[model][score]") {
  Transformer model(small_config());
  model.init_parameters(31);
  model.params().find("output_projection.bias")->value(0, kEosId) = -4;  // no instant EOS
  DecodeOptions opts;
  opts.max_length = 12;
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}, {8, 9, 10, 11}, {12}};
  const auto hyps = greedy_decode(model, sources, opts);
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(!hyps[i].tokens.empty());
    const auto forced = forced_scores(model, {{sources[i], hyps[i].tokens}});
    // forced has |tokens| + 1 entries (EOS); greedy has that many when it finished.
    const size_t n = std::min(forced[0].size(), hyps[i].token_scores.size());
    REQUIRE(n >= hyps[i].tokens.size());
    for (size_t t = 0; t < n; ++t) CHECK(hyps[i].token_scores[t] == Approx(forced[0][t]).margin(1e-4));
    CHECK(static_cast<int>(hyps[i].tokens.size()) <= max_output_length(model.config(), opts, int(sources[i].size())));
  }
  CHECK(greedy_decode(model, {{}}, opts)[0].tokens.empty());  // empty source → empty output
}

namespace {

std::vector<Example> twenty_pairs() {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> tok(4, 39), len(2, 6);
  std::vector<Example> ex(20);
  for (auto& e : ex) {
    const int ns = len(rng), nt = len(rng);
    for (int i = 0; i < ns; ++i) e.src.push_back(tok(rng));
    for (int i = 0; i < nt; ++i) e.tgt.push_back(tok(rng) + 10);
  }
  return ex;
}

TrainOptions overfit_options() {
  TrainOptions o;
  o.after_epochs = 0;
  o.after_steps = 300;
  o.batch_tokens = 64;
  o.learning_rate = 3e-3;
  o.warmup_steps = 30;
  o.label_smoothing = 0.0;
  o.valid_freq = 0;
  o.disp_freq = 0;
  o.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("Training is deterministic for a seed and thread count", "[model][train]") {
  const auto ex = twenty_pairs();
  TrainOptions o = overfit_options();
  o.after_steps = 25;
  ModelConfig cfg = small_config();
  cfg.dropout = 0.1;
  cfg.attention_dropout = 0.1;
  Transformer a(cfg), b(cfg);
  a.init_parameters(1);
  b.init_parameters(1);
  const auto ra = fit(a, ex, {}, o);
  const auto rb = fit(b, ex, {}, o);
  CHECK(ra.epoch_losses == rb.epoch_losses);
  for (size_t i = 0; i < a.params().params().size(); ++i)
    CHECK(a.params().params()[i].value == b.params().params()[i].value);
}

TEST_CASE("A tiny model learns 20 sentence pairs exactly", "[model][train][overfit]") {
  const auto ex = twenty_pairs();
  ModelConfig cfg = small_config();
  cfg.dropout = 0.0;
  Transformer model(cfg);
  model.init_parameters(2);
  const auto r = fit(model, ex, {}, overfit_options());
  CHECK(r.epoch_losses.back() < r.epoch_losses.front() / 10);
  std::vector<std::vector<int32_t>> sources;
  for (const auto& e : ex) sources.push_back(e.src);
  const auto hyps = greedy_decode(model, sources, DecodeOptions{});
  int exact = 0;
  for (size_t i = 0; i < ex.size(); ++i) exact += hyps[i].tokens == ex[i].tgt;
  INFO("final loss " << r.epoch_losses.back());
  CHECK(exact == 20);
}

TEST_CASE("A NaN in training stops with an error naming the step", "[model][train][nan]") {
  const auto ex = twenty_pairs();
  Transformer model(small_config());
  model.init_parameters(3);
  model.params().find("decoder.layers.1.ffn.linear2.bias")->value(0, 5) = std::numeric_limits<Scalar>::quiet_NaN();
  TrainOptions o = overfit_options();
  o.after_steps = 5;
  CHECK_THROWS_AS(fit(model, ex, {}, o), NumericError);
  CHECK_THROWS_WITH(fit(model, ex, {}, o), Catch::Contains("step 1") && Catch::Contains("NaN"));
}

TEST_CASE("Training stopped mid-epoch and resumed from its state equals an uninterrupted run, bit for bit", "[model][train][resume]") {
  // Dropout and EMA on, several batches per epoch: the resumed run must restore the data
  // position, both generator states, the Adam moments and the EMA weights.
  const auto ex = twenty_pairs();
  TrainOptions o = overfit_options();
  o.after_steps = 30;
  o.save_freq = 0;
  o.exponential_smoothing = 1e-2;
  ModelConfig cfg = small_config();
  cfg.dropout = 0.1;
  cfg.attention_dropout = 0.1;
  Transformer a(cfg), b(cfg);
  a.init_parameters(4);
  b.init_parameters(4);
  // The weights a run saves at the end: the EMA weights (swapped in for the save).
  auto saved_final = [](const Transformer& m, std::vector<Mat>& out) {
    return [&m, &out](const std::string& which, const TrainResult&) {
      if (which != "final") return;
      out.clear();
      for (const Param& p : m.params().params()) out.push_back(p.value);
    };
  };
  std::vector<Mat> final_a, final_b;
  const TrainResult ra = fit(a, ex, {}, o, {saved_final(a, final_a)});

  const int64_t stop_at = 11;
  TrainOptions ob = o;
  ob.on_step = [stop_at](int64_t step) {
    if (step == stop_at) request_stop();
  };
  TrainState state;
  int checkpoints = 0;
  const TrainResult rb1 = fit(b, ex, {}, ob, {{}, nullptr, [&](const TrainState& st) {
    state = st;
    ++checkpoints;
  }});
  clear_stop_request();
  REQUIRE(rb1.interrupted);
  REQUIRE(checkpoints == 1);
  REQUIRE(state.step == stop_at);
  // The stop fell inside an epoch, not on its boundary.
  std::mt19937_64 epoch_rng;
  std::istringstream(state.rng_epoch_start) >> epoch_rng;
  const auto epoch_batches = bucket_batches(ex, o.batch_tokens, epoch_rng);
  INFO("epoch " << state.epoch << ", " << state.next_batch << " of " << epoch_batches.size() << " batches done");
  REQUIRE(state.next_batch > 0);
  REQUIRE(state.next_batch < static_cast<int64_t>(epoch_batches.size()));

  const TrainResult rb2 = fit(b, ex, {}, o, {saved_final(b, final_b), nullptr, {}, &state});
  CHECK(rb2.steps == ra.steps);
  CHECK(rb2.epoch_losses == ra.epoch_losses);
  REQUIRE(final_a.size() == a.params().params().size());
  REQUIRE(final_b.size() == final_a.size());
  for (size_t i = 0; i < a.params().params().size(); ++i) {
    INFO(a.params().params()[i].name);
    CHECK(a.params().params()[i].value == b.params().params()[i].value);  // raw weights
    CHECK(final_a[i] == final_b[i]);                                      // EMA weights
  }
  CHECK_FALSE(final_a.front() == a.params().params().front().value);  // the EMA is not the raw
}

TEST_CASE("Learning-rate decay (--lr-decay) multiplies the schedule's rate after every K stalled validations; a resume keeps it", "[model][train][lr]") {
  // Validated on the training targets shifted down by 10 ids (ids 4-39; training targets are
  // 14-49), a mapping the model never learns: that cross-entropy soon stops improving and
  // validations stall.
  const auto ex = twenty_pairs();
  std::vector<Example> valid = ex;
  for (Example& e : valid)
    for (int32_t& t : e.tgt) t -= 10;
  TrainOptions o = overfit_options();
  o.after_steps = 60;
  o.valid_freq = 3;
  o.disp_freq = 1;
  o.lr_decay = 0.5;
  o.lr_decay_stalled = 2;
  // Every update's rate from the "train" events, the stall count after each validation.
  struct Log {
    std::map<int64_t, double> lr;
    std::map<int64_t, int> stalled;
  };
  auto sink = [](Log& log) {
    return [&log](const nlohmann::json& e) {
      if (e.at("event") == "train") log.lr[e.at("step").get<int64_t>()] = e.at("learning_rate").get<double>();
      if (e.at("event") == "valid") log.stalled[e.at("step").get<int64_t>()] = e.at("stalled").get<int>();
    };
  };
  Transformer a(small_config()), b(small_config());
  a.init_parameters(6);
  b.init_parameters(6);
  Log la;
  fit(a, ex, valid, o, {{}, nullptr, {}, nullptr, sink(la)});
  REQUIRE(la.lr.size() == 60);
  double scale = 1;
  int decays = 0;
  for (const auto& [step, lr] : la.lr) {
    INFO("step " << step << ", " << decays << " decays before it");
    CHECK(lr == scale * inverse_sqrt_lr(o.learning_rate, step, o.warmup_steps));
    const auto v = la.stalled.find(step);
    if (v != la.stalled.end() && v->second > 0 && v->second % o.lr_decay_stalled == 0) {
      scale *= o.lr_decay;
      ++decays;
    }
  }
  REQUIRE(decays >= 2);  // the check above saw the rate halve, twice or more

  // Interrupted after the first decay and resumed from its state: the same run, bit for bit.
  int64_t stop_at = 0;
  for (const auto& [step, stalled] : la.stalled)
    if (!stop_at && stalled == o.lr_decay_stalled) stop_at = step + 1;
  REQUIRE(stop_at > 0);
  TrainOptions ob = o;
  ob.on_step = [stop_at](int64_t step) {
    if (step == stop_at) request_stop();
  };
  TrainState state;
  Log lb;
  fit(b, ex, valid, ob, {{}, nullptr, [&](const TrainState& st) { state = st; }, nullptr, sink(lb)});
  clear_stop_request();
  REQUIRE(state.step == stop_at);
  CHECK(state.lr_scale == o.lr_decay);
  fit(b, ex, valid, o, {{}, nullptr, {}, &state, sink(lb)});
  CHECK(lb.lr == la.lr);
  for (size_t i = 0; i < a.params().params().size(); ++i)
    CHECK(a.params().params()[i].value == b.params().params()[i].value);

  TrainOptions bad = o;
  bad.lr_decay = 1;
  CHECK_THROWS_WITH(fit(b, ex, valid, bad), Catch::Contains("--lr-decay must be in [0, 1)"));
  bad = o;
  bad.lr_decay_stalled = 0;
  CHECK_THROWS_WITH(fit(b, ex, valid, bad), Catch::Contains("--lr-decay-stalled must be >= 1"));
}

TEST_CASE("NaN or Inf in a gradient or weight is reported with the step and the tensor", "[model][train][nan]") {
  Transformer model(small_config());
  model.init_parameters(5);
  ParamRegistry& reg = model.params();
  reg.zero_grad();
  CHECK_NOTHROW(check_finite_gradients(reg, 7));
  CHECK_NOTHROW(check_finite_weights(reg, 7));
  const std::string name = "encoder.layers.0.self_attn.v_proj.weight";
  reg.find(name)->grad_acc()(1, 2) = std::numeric_limits<Scalar>::infinity();
  CHECK_THROWS_AS(check_finite_gradients(reg, 7), NumericError);
  CHECK_THROWS_WITH(check_finite_gradients(reg, 7),
                    Catch::Contains("step 7") && Catch::Contains("gradient of " + name));
  reg.find(name)->value(0, 0) = std::numeric_limits<Scalar>::quiet_NaN();
  CHECK_THROWS_WITH(check_finite_weights(reg, 12),
                    Catch::Contains("step 12") && Catch::Contains("weight " + name));
}

TEST_CASE("Shards of a batch cover it in order, sizes differing by at most one", "[train][replicas]") {
  for (size_t batch : {1, 2, 5, 16}) {
    for (int shards : {1, 2, 3, 8}) {
      size_t next = 0, smallest = batch, largest = 0;
      for (int k = 0; k < shards; ++k) {
        const auto [first, last] = shard_range(batch, k, shards);
        CHECK(first == next);
        next = last;
        smallest = std::min(smallest, last - first);
        largest = std::max(largest, last - first);
      }
      CHECK(next == batch);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("Sharded updates (--simulate-ranks) follow the one-batch updates, every dropout on", "[model][train][replicas]") {
  const auto ex = twenty_pairs();
  TrainOptions o = overfit_options();
  o.after_steps = 25;
  // Dropout masks are drawn per sentence of the global batch (nn/dropout.h), so a shard's
  // sentences get the masks they have in the whole batch: only the summation order differs.
  ModelConfig cfg = test::tiny_config({40, 50, 32, 4, 64, 2, 2, 64}, "pre", true, 0.1);
  cfg.dropout_src = cfg.dropout_trg = 0.1;
  Transformer whole(cfg);
  whole.init_parameters(1);
  const auto r1 = fit(whole, ex, {}, o);
  // 3 shards, and 64 shards: more than a batch's sentences, so some shards are empty.
  for (int shards : {3, 64}) {
    Transformer sharded(cfg);
    sharded.init_parameters(1);
    o.simulate_ranks = shards;
    const auto rn = fit(sharded, ex, {}, o);
    CHECK(rn.ranks == shards);
    REQUIRE(rn.epoch_losses.size() == r1.epoch_losses.size());
    for (size_t e = 0; e < r1.epoch_losses.size(); ++e)
      CHECK(rn.epoch_losses[e] == Approx(r1.epoch_losses[e]).epsilon(1e-5));
    // (Weights are not compared: Adam turns summation-order noise in near-zero gradients into
    // steps of ±lr, so some biases differ by ~lr while the loss agrees to 1e-5.)
  }
}

TEST_CASE("backward's GradientsFinal hook reports finished parts in reverse registry order; buckets keep the gradients", "[model][train][replicas]") {
  const auto ex = twenty_pairs();
  const Batch b = batch_of({ex.begin(), ex.begin() + 4});
  for (const char* norm : {"pre", "post"}) {
    for (bool tie : {true, false}) {
      Transformer model(small_config(norm, tie));
      model.init_parameters(3);
      ForwardCache cache;
      Mat logits, dlogits;
      model.params().zero_grad();
      model.forward(b, DropoutContext::training(1, 1), cache, logits);
      label_smoothed_cross_entropy(logits, b.tgt_out, 0.1, &dlogits);
      auto& ps = model.params().params();
      std::vector<size_t> reported;
      std::vector<Mat> at_report(ps.size());  // each gradient when first reported final
      model.backward(b, dlogits, cache, [&](size_t first) {
        reported.push_back(first);
        for (size_t i = first; i < ps.size(); ++i)
          if (at_report[i].size() == 0) at_report[i] = ps[i].grad;
      });
      INFO(norm << (tie ? " tied" : " untied"));
      REQUIRE(reported.size() >= 2 * 2 + 3);  // output, 4 layers, 2 embeddings (+ norms)
      CHECK(std::is_sorted(reported.rbegin(), reported.rend()));
      CHECK(reported.front() < ps.size());
      CHECK(reported.back() == 0);
      for (size_t i = 0; i < ps.size(); ++i) {
        INFO(ps[i].name);
        CHECK(at_report[i] == ps[i].grad);  // exact: nothing changed it after the report
      }
      // One rank: the buckets' sums are the gradients themselves, written back unchanged.
      const std::vector<Mat> before = at_report;
      CHECK(GradientBuckets(model.params(), 1, true).size() == ps.size());  // one per parameter
      CHECK(GradientBuckets(model.params(), size_t(1) << 40, true).size() == 1);
      GradientBuckets buckets(model.params(), 4096, false);
      CHECK(buckets.size() > 1);
      CHECK_THROWS_AS(buckets.finish(model.params()), Error);  // nothing started
      for (size_t r : reported) buckets.gradients_final(model.params(), r);
      for (Param& p : ps) p.grad.setConstant(7);
      buckets.finish(model.params());
      for (size_t i = 0; i < ps.size(); ++i) CHECK(ps[i].grad == before[i]);
    }
  }
}
