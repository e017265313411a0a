// Model-level properties in the float build: the attention kernel against a naive loop
// (n_q ≠ n_k, cache suffixes, fully masked rows), causal leakage, KV-cache parity with teacher
// forcing, padding/batch invariance, greedy scores against forced decoding. Training runs of
// the whole model are in training_run_test.cpp.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "anuvad/nn/attention.h"
#include "anuvad/decode/decode.h"
#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"
#include "anuvad/nn/transformer.h"
#include "support/gradcheck.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::batch_of;
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

}  // namespace

TEST_CASE("Attention kernel matches a naive loop for n_q != n_k, cache suffixes and fully masked rows", "[model][mask]") {
  const int n_heads = 2, batch = 3;
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
                       Case{"causal, one query at the end of the cache", 1, 5, true, 4, true}})
  // d_head 4 runs the kernel's scalar loops, 56 its 32-, 16- and 8-value chunks.
  for (const int d_model : {8, 112}) {
    SECTION(std::string(c.name) + ", d_head " + std::to_string(d_model / n_heads)) {
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

TEST_CASE("Dropping finished rows from the decoder state (keep_rows) leaves the others' steps unchanged", "[model][cache]") {
  // Each sentence's rows are dropped once its target is fed; every remaining row must still
  // equal the teacher-forced pass: its self-attention cache moved, its cross-attention source
  // (row_source) followed it. 27 sentences on two threads: blocked steps, then unblocked ones.
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  Transformer model(small_config("pre", true));
  model.init_parameters(12);
  std::vector<Example> ex;
  for (int j = 0; j < 27; ++j) {
    Example e;
    for (int k = 0; k < 2 + j % 7; ++k) e.src.push_back(4 + (j * 3 + k) % 36);
    for (int k = 0; k < 1 + (j * 5) % 9; ++k) e.tgt.push_back(4 + (j * 5 + k) % 46);
    ex.push_back(e);
  }
  const Batch b = batch_of(ex);
  ForwardCache cache;
  Mat logits;
  model.forward(b, DropoutContext{}, cache, logits);
  DecoderState st = model.begin_decoding(cache.memory, b.src_rows, b.tgt_len);
  std::vector<int> sentence(size_t(b.batch_size));  // sentence of each state row
  for (int i = 0; i < b.batch_size; ++i) sentence[size_t(i)] = i;
  double worst = 0;
  for (int t = 0; !sentence.empty(); ++t) {
    std::vector<int32_t> tokens;
    for (int i : sentence) tokens.push_back(b.tgt_in[size_t(b.tgt_rows.offsets[i] + t)]);
    Mat step_logits;
    model.decode_step(tokens, st, step_logits);
    for (size_t r = 0; r < sentence.size(); ++r) {
      worst = std::max(worst, rel_diff(step_logits.row(Index(r)), logits.row(Index(b.tgt_rows.offsets[sentence[r]]) + t)));
      const Index tf_row = Index(sentence[r]) * model.config().n_heads * b.tgt_len + t;  // head 0
      CHECK(rel_diff(st.last_cross_probs[0].row(Index(r) * model.config().n_heads),
                     cache.dec[0].cross_attn.probs.row(tf_row)) < 1e-5);
    }
    std::vector<int> keep, still;
    for (size_t r = 0; r < sentence.size(); ++r)
      if (t + 1 < b.tgt_lengths[sentence[r]]) {
        keep.push_back(static_cast<int>(r));
        still.push_back(sentence[r]);
      }
    st.keep_rows(keep);
    CHECK(st.batch_size == static_cast<int>(keep.size()));
    sentence = still;
  }
  INFO("largest relative logit deviation " << worst);
  CHECK(worst < 1e-5);
  DecoderState st2 = model.begin_decoding(cache.memory, b.src_rows, b.tgt_len);
  CHECK_THROWS_AS(st2.keep_rows({2, 1}), ShapeError);                 // out of order
  CHECK_THROWS_AS(st2.keep_rows({0, b.batch_size}), ShapeError);      // past the last row
  CHECK_THROWS_AS(st2.keep_rows({-1}), ShapeError);
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
