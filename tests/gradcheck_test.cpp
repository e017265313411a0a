// Finite-difference gradient checks of every module with a backward pass, in double precision
// (this file links anuvad_core_f64). Method and tolerance: tests/support/gradcheck.h.
#include <catch2/catch.hpp>

#include <cmath>

#include "anuvad/core/error.h"
#include "anuvad/nn/attention.h"
#include "anuvad/nn/layers.h"
#include "anuvad/nn/loss.h"
#include "anuvad/nn/transformer.h"
#include "support/gradcheck.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::max_grad_error;
using anuvad::test::max_param_grad_error;
using anuvad::test::random_mat;
using anuvad::test::weighted_sum;

static_assert(std::is_same_v<Scalar, double>, "gradient checks need the double build");

namespace {

constexpr double kTol = 1e-6;

void randomize(ParamRegistry& reg, uint64_t seed, double scale = 0.5) {
  uint64_t s = seed;
  for (Param& p : reg.params()) p.value = random_mat(p.value.rows(), p.value.cols(), ++s, scale);
}

}  // namespace

TEST_CASE("Linear backward matches finite differences", "[gradcheck]") {
  ParamRegistry reg;
  Linear lin(reg, "lin", 5, 3);
  randomize(reg, 1);
  Mat x = random_mat(4, 5, 2);
  const Mat r = random_mat(4, 3, 3);
  auto loss = [&] {
    Mat y;
    lin.forward(x, y);
    return weighted_sum(y, r);
  };
  Mat dx;
  lin.backward(r, x, dx);
  CHECK(max_grad_error(x, dx, loss) < kTol);
  CHECK(max_param_grad_error(reg, loss) < kTol);
}

TEST_CASE("LayerNorm backward matches finite differences", "[gradcheck]") {
  ParamRegistry reg;
  LayerNorm ln(reg, "ln", 6, 1e-5);
  randomize(reg, 4);
  Mat x = random_mat(5, 6, 5, 2.0);
  const Mat r = random_mat(5, 6, 6);
  auto loss = [&] {
    Mat y;
    LayerNormCache c;
    ln.forward(x, y, c);
    return weighted_sum(y, r);
  };
  Mat y, dx;
  LayerNormCache c;
  ln.forward(x, y, c);
  ln.backward(r, c, dx);
  CHECK(max_grad_error(x, dx, loss) < kTol);
  CHECK(max_param_grad_error(reg, loss) < kTol);
}

TEST_CASE("FeedForward backward matches finite differences, with and without FFN dropout", "[gradcheck]") {
  for (double p : {0.0, 0.3}) {
    ParamRegistry reg;
    FeedForward ffn(reg, "ffn", 4, 7);
    randomize(reg, 7);
    Mat x = random_mat(6, 4, 8);
    const Mat r = random_mat(6, 4, 9);
    // Two sentences of 2 and 4 tokens; every forward draws the same (counter-based) mask.
    const Packing rows = Packing::of({2, 4});
    auto run = [&](FeedForwardCache& c, Mat& y) {
      ffn.forward(x, p, DropoutContext::training(99, 1).over(rows), c, y);
    };
    auto loss = [&] {
      FeedForwardCache c;
      Mat y;
      run(c, y);
      return weighted_sum(y, r);
    };
    FeedForwardCache c;
    Mat y, dx;
    run(c, y);
    ffn.backward(r, x, c, dx);
    INFO("ffn_dropout " << p);
    CHECK(max_grad_error(x, dx, loss) < kTol);
    CHECK(max_param_grad_error(reg, loss) < kTol);
  }
}

TEST_CASE("Embedding backward matches finite differences", "[gradcheck]") {
  ParamRegistry reg;
  Embedding emb(reg, "emb", 9, 6, 16);
  randomize(reg, 10);
  const TokenIds ids = {4, 2, 4, 8, 0, 1};  // repeated ids accumulate
  const Mat r = random_mat(6, 6, 11);
  auto loss = [&] {
    Mat y;
    emb.forward(ids, 2, 3, 1, y);
    return weighted_sum(y, r);
  };
  emb.backward(r, ids);
  CHECK(max_param_grad_error(reg, loss) < kTol);
}

TEST_CASE("Embedding backward with word dropout matches finite differences", "[gradcheck]") {
  ParamRegistry reg;
  Embedding emb(reg, "emb", 9, 6, 16);
  randomize(reg, 12);
  const TokenIds ids = {4, 2, 4, 8, 0, 1, 4};  // repeated ids accumulate, kept or dropped
  const Packing rows = Packing::of({3, 4});
  Mat word_drop;
  make_dropout_mask(1, 0.4, DropoutContext::training(2, 1).site(dropout_site::kSrcWords).over(rows), word_drop);
  REQUIRE(word_drop.rows() == 7);
  REQUIRE((word_drop.array() == 0.0).any());  // (this seed drops some rows and keeps others)
  REQUIRE((word_drop.array() != 0.0).any());
  const Mat r = random_mat(7, 6, 13);
  auto loss = [&] {
    Mat y;
    emb.forward(ids, rows, y, word_drop);
    return weighted_sum(y, r);
  };
  emb.backward(r, ids, word_drop);
  CHECK(max_param_grad_error(reg, loss) < kTol);
}

TEST_CASE("Label-smoothed cross-entropy gradient matches finite differences", "[gradcheck]") {
  Mat logits = random_mat(5, 7, 12, 2.0);
  const TokenIds labels = {3, 0, 6, 1, 4};  // row 1 is PAD and ignored
  for (double eps : {0.0, 0.1}) {
    auto loss = [&] {
      return label_smoothed_cross_entropy(logits, labels, eps, nullptr).loss_sum / 4.0;
    };
    Mat d;
    const LossStats s = label_smoothed_cross_entropy(logits, labels, eps, &d, 4.0);
    CHECK(s.n_tokens == 4);
    CHECK(d.row(1).isZero(0));
    INFO("label_smoothing " << eps);
    CHECK(max_grad_error(logits, d, loss) < kTol);
  }
}

TEST_CASE("R-Drop loss gradient matches finite differences, and its value the definition", "[gradcheck]") {
  // Liang et al. 2021 eq. 3: ½(CE_a + CE_b) + α·½(KL(p‖q) + KL(q‖p)) per non-PAD row.
  Mat a = random_mat(5, 7, 31, 2.0), b = random_mat(5, 7, 32, 2.0);
  const TokenIds labels = {3, 0, 6, 1, 4};  // row 1 is PAD and ignored
  for (double alpha : {0.0, 0.7, 5.0}) {
    INFO("alpha " << alpha);
    const double eps = 0.1;
    auto loss = [&] { return rdrop_loss(a, b, labels, eps, alpha, nullptr, nullptr).loss_sum / 4.0; };
    Mat da, db;
    const LossStats s = rdrop_loss(a, b, labels, eps, alpha, &da, &db, 4.0);
    CHECK(s.n_tokens == 4);
    CHECK(da.row(1).isZero(0));
    CHECK(db.row(1).isZero(0));
    CHECK(max_grad_error(a, da, loss) < kTol);
    CHECK(max_grad_error(b, db, loss) < kTol);
    // The value, composed from log_softmax_rows in double.
    const Mat lp = log_softmax_rows(a), lq = log_softmax_rows(b);
    double expected = 0, nll = 0;
    for (Index r = 0; r < 5; ++r) {
      if (labels[size_t(r)] == kPadId) continue;
      const int y = labels[size_t(r)];
      expected += 0.5 * (label_smoothed_cross_entropy(a.row(r), {y}, eps, nullptr).loss_sum +
                         label_smoothed_cross_entropy(b.row(r), {y}, eps, nullptr).loss_sum);
      nll -= 0.5 * (double(lp(r, y)) + double(lq(r, y)));
      double sym = 0;
      for (Index k = 0; k < 7; ++k)
        sym += (std::exp(double(lp(r, k))) - std::exp(double(lq(r, k)))) * (double(lp(r, k)) - double(lq(r, k)));
      expected += alpha * 0.5 * sym;
    }
    CHECK(s.loss_sum == Approx(expected).epsilon(1e-5));
    CHECK(s.nll_sum == Approx(nll).epsilon(1e-5));
  }
  // The same logits in both passes: no divergence, the plain loss.
  Mat da, db;
  CHECK(rdrop_loss(a, a, labels, 0.1, 5.0, &da, &db).loss_sum ==
        Approx(label_smoothed_cross_entropy(a, labels, 0.1, nullptr).loss_sum).epsilon(1e-6));
  CHECK_THROWS_AS(rdrop_loss(a, random_mat(4, 7, 1), labels, 0.1, 1.0, nullptr, nullptr), ShapeError);
}

TEST_CASE("Label-smoothed cross-entropy equals log-softmax followed by smoothed NLL", "[gradcheck]") {
  // Fused loss vs its composition from primitives (Marian's fused-vs-composed check).
  const Mat logits = random_mat(3, 5, 13, 3.0);
  const TokenIds labels = {2, 4, 1};
  const double eps = 0.2;
  const Mat logp = log_softmax_rows(logits);
  double expected = 0;
  for (Index r = 0; r < 3; ++r)
    expected += -(1 - eps) * logp(r, labels[r]) - eps * logp.row(r).mean();
  CHECK(label_smoothed_cross_entropy(logits, labels, eps, nullptr).loss_sum ==
        Approx(expected).epsilon(1e-12));
}

TEST_CASE("MultiHeadAttention backward matches finite differences", "[gradcheck]") {
  const int n_heads = 2;
  struct Case {
    const char* name;
    int batch, n_q, n_k;
    std::vector<int> key_lengths;
    bool causal, self;
    double attention_dropout;
  };
  const std::vector<Case> cases = {
      {"encoder self-attention with key padding", 2, 4, 4, {4, 2}, false, true, 0.0},
      {"decoder causal self-attention with key padding", 2, 4, 4, {3, 4}, true, true, 0.0},
      {"cross-attention S != T with key padding", 2, 3, 5, {5, 2}, false, false, 0.0},
      {"cross-attention with a fully masked row (source length 0)", 2, 3, 4, {0, 4}, false, false, 0.0},
      {"causal self-attention with attention dropout", 2, 4, 4, {4, 4}, true, true, 0.25},
  };
  // d_head 4 runs the kernels' scalar loops, 56 their 32-, 16- and 8-value chunks.
  for (const int d_model : {8, 112})
  for (const Case& c : cases) {
    SECTION(std::string(c.name) + ", d_head " + std::to_string(d_model / n_heads)) {
      ParamRegistry reg;
      MultiHeadAttention mha(reg, "attn", d_model, n_heads);
      // Weights scaled by 1/√d_model keep the scores' spread the same at both widths: at 0.5 for
      // d_model 112 the scores reach ~±30, the softmax saturates, and the central difference's
      // truncation error (h² f''') came within 1.3x of the bound in the sanitizer build.
      randomize(reg, 20, 0.5 * std::sqrt(8.0 / d_model));
      // Packed rows (no padding): keys/values per key_lengths, queries as many (self) or n_q.
      const Packing kv_rows = Packing::of(c.key_lengths);
      const Packing q_rows = c.self ? kv_rows : Packing::of(std::vector<int>(size_t(c.batch), c.n_q));
      Mat x_q = random_mat(q_rows.rows(), d_model, 21);
      Mat x_kv = c.self ? x_q : random_mat(kv_rows.rows(), d_model, 22);
      const Mat r = random_mat(q_rows.rows(), d_model, 23);
      auto run = [&](AttentionCache& cache, Mat& y) {
        const Mat& kv = c.self ? x_q : x_kv;
        mha.forward(x_q, kv, q_rows, kv_rows, c.causal, c.attention_dropout,
                    DropoutContext::training(5, 1), cache, y);
      };
      auto loss = [&] {
        AttentionCache cache;
        Mat y;
        run(cache, y);
        return weighted_sum(y, r);
      };
      AttentionCache cache;
      Mat y;
      run(cache, y);
      REQUIRE(y.allFinite());
      if (c.self) {
        Mat dx;
        mha.backward(r, x_q, x_q, q_rows, kv_rows, cache, dx, dx);
        REQUIRE(dx.allFinite());
        CHECK(max_grad_error(x_q, dx, loss) < kTol);
      } else {
        Mat dq, dkv;
        mha.backward(r, x_q, x_kv, q_rows, kv_rows, cache, dq, dkv);
        REQUIRE(dq.allFinite());
        REQUIRE(dkv.allFinite());
        CHECK(max_grad_error(x_q, dq, loss) < kTol);
        CHECK(max_grad_error(x_kv, dkv, loss) < kTol);
      }
      std::string worst;
      CHECK(max_param_grad_error(reg, loss, 60, &worst) < kTol);
    }
  }
}

TEST_CASE("Residual sublayer backward matches finite differences (pre- and post-norm, dropout)", "[gradcheck]") {
  for (bool pre : {true, false}) {
    ParamRegistry reg;
    LayerNorm ln(reg, "ln", 6, 1e-5);
    Linear f(reg, "f", 6, 6);
    randomize(reg, 30);
    Mat x = random_mat(4, 6, 31);
    const Mat r = random_mat(4, 6, 32);
    const Packing rows = Packing::of({1, 3});
    auto run = [&](ResidualCache& c, Mat& y) {
      residual_forward(x, ln, pre, 0.3, DropoutContext::training(3, 1).over(rows),
                       [&](const Mat& in, Mat& out) { f.forward(in, out); }, c, y);
    };
    auto loss = [&] {
      ResidualCache c;
      Mat y;
      run(c, y);
      return weighted_sum(y, r);
    };
    ResidualCache c;
    Mat y, dx;
    run(c, y);
    residual_backward(r, ln, pre, [&](const Mat& dout, Mat& din) { f.backward(dout, c.f_in, din); }, c, dx);
    INFO((pre ? "pre-norm" : "post-norm"));
    CHECK(max_grad_error(x, dx, loss) < kTol);
    CHECK(max_param_grad_error(reg, loss) < kTol);
  }
}

namespace {

ModelConfig tiny_config(const std::string& norm, bool tie, double dropout) {
  return test::tiny_config({11, 13, 8, 2, 12, 2, 2, 16}, norm, tie, dropout);
}

Batch tiny_batch() {
  static const std::vector<Example> ex = {{{5, 6, 7, 8}, {4, 9, 10}}, {{9, 4}, {11, 5, 6, 12, 7}}, {{10}, {8}}};
  return make_batch({&ex[0], &ex[1], &ex[2]});
}

}  // namespace

TEST_CASE("EncoderLayer and DecoderLayer backward match finite differences", "[gradcheck]") {
  for (const char* norm : {"pre", "post"}) {
    const ModelConfig cfg = tiny_config(norm, true, 0.0);
    const Batch b = tiny_batch();
    ParamRegistry reg;
    EncoderLayer enc(reg, "enc", cfg);
    DecoderLayer dec(reg, "dec", cfg);
    randomize(reg, 40);
    Mat x_src = random_mat(b.src_rows.rows(), cfg.d_model, 41);
    Mat x_tgt = random_mat(b.tgt_rows.rows(), cfg.d_model, 42);
    const Mat r_tgt = random_mat(x_tgt.rows(), cfg.d_model, 43);
    // L = Σ R ⊙ decoder(x_tgt, memory = encoder(x_src)): exercises dmemory as well.
    auto run = [&](EncoderLayerCache& ec, DecoderLayerCache& dc, Mat& mem, Mat& y) {
      enc.forward(x_src, b.src_rows, DropoutContext{}, ec, mem);
      dec.forward(x_tgt, mem, b.tgt_rows, b.src_rows, DropoutContext{}, dc, y);
    };
    auto loss = [&] {
      EncoderLayerCache ec;
      DecoderLayerCache dc;
      Mat mem, y;
      run(ec, dc, mem, y);
      return weighted_sum(y, r_tgt);
    };
    EncoderLayerCache ec;
    DecoderLayerCache dc;
    Mat mem, y, dx_tgt, dx_src;
    run(ec, dc, mem, y);
    Mat dmem = Mat::Zero(mem.rows(), mem.cols());
    dec.backward(r_tgt, mem, b.tgt_rows, b.src_rows, dc, dx_tgt, dmem);
    enc.backward(dmem, b.src_rows, ec, dx_src);
    INFO(norm << "-norm");
    CHECK(max_grad_error(x_tgt, dx_tgt, loss) < kTol);
    CHECK(max_grad_error(x_src, dx_src, loss) < kTol);
    std::string worst;
    CHECK(max_param_grad_error(reg, loss, 40, &worst) < kTol);
  }
}

TEST_CASE("Transformer backward matches finite differences for the whole loss (dropout, word and layer dropout)", "[gradcheck]") {
  struct Case {
    const char* norm;
    bool tie;
    double dropout;
    double word_dropout;  ///< dropout_src and dropout_trg
    double layer_dropout = 0;
  };
  for (const Case c : {Case{"pre", true, 0.0, 0.0}, Case{"post", false, 0.0, 0.0}, Case{"pre", false, 0.2, 0.0},
                       Case{"post", true, 0.0, 0.3}, Case{"pre", false, 0.2, 0.3}, Case{"pre", true, 0.0, 0.0, 0.5},
                       Case{"pre", false, 0.2, 0.0, 0.5}, Case{"post", false, 0.0, 0.0, 0.5}}) {
    ModelConfig cfg = tiny_config(c.norm, c.tie, c.dropout);
    cfg.dropout_src = cfg.dropout_trg = c.word_dropout;
    cfg.layer_dropout = c.layer_dropout;
    Transformer model(cfg);
    model.init_parameters(50);
    randomize(model.params(), 51, 0.4);
    const Batch b = tiny_batch();
    const double n = static_cast<double>(b.n_tgt_tokens());
    const bool train = c.dropout > 0 || c.word_dropout > 0 || c.layer_dropout > 0;
    auto run = [&](ForwardCache& cache, Mat& logits) {
      // (seed 3 drops some tokens on both sides and keeps others: checked below)
      const uint64_t seed = c.word_dropout > 0 ? 3 : 8;
      model.forward(b, train ? DropoutContext::training(seed, 1) : DropoutContext{}, cache, logits);
    };
    auto loss = [&] {
      ForwardCache cache;
      Mat logits;
      run(cache, logits);
      return label_smoothed_cross_entropy(logits, b.tgt_out, 0.1, nullptr).loss_sum / n;
    };
    ForwardCache cache;
    Mat logits, dlogits;
    run(cache, logits);
    label_smoothed_cross_entropy(logits, b.tgt_out, 0.1, &dlogits, n);
    if (c.word_dropout > 0) {
      REQUIRE((cache.src_word_drop.array() == 0.0).any());
      REQUIRE((cache.tgt_word_drop.array() == 0.0).any());
      REQUIRE((cache.src_word_drop.array() != 0.0).any());
      REQUIRE((cache.tgt_word_drop.array() != 0.0).any());
    }
    if (c.layer_dropout > 0) {  // some sentences skip a layer, others keep it
      int skipped = 0, kept = 0;
      for (const auto* res : {&cache.enc[0].ffn_res, &cache.enc[1].ffn_res, &cache.dec[0].ffn_res, &cache.dec[1].ffn_res})
        for (Index r = 0; r < res->drop.rows(); ++r) (res->drop.row(r).isZero() ? skipped : kept) += 1;
      REQUIRE(skipped > 0);
      REQUIRE(kept > 0);
    }
    model.params().zero_grad();
    model.backward(b, dlogits, cache);
    std::string worst;
    const double err = max_param_grad_error(model.params(), loss, 30, &worst);
    INFO(c.norm << "-norm, tie_output " << c.tie << ", dropout " << c.dropout << ", word dropout "
                << c.word_dropout << ", layer dropout " << c.layer_dropout << ", worst " << worst);
    CHECK(err < kTol);
  }
}
