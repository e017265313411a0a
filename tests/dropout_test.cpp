// Counter-based dropout (nn/dropout.h, issue #17) and word dropout (issue #16): masks are a
// function of (seed, step, global sentence index, site, coordinates), whatever the shard cut,
// the thread count or the packing; their rates; word dropout zeroes whole embedding rows.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>

#include "anuvad/core/error.h"
#include "anuvad/nn/dropout.h"
#include "anuvad/nn/transformer.h"
#include "support/test_support.h"

using namespace anuvad;

namespace {

/// Seven pairs of different lengths (ids ≥ 4, below the tiny vocabularies).
std::vector<Example> seven_pairs() {
  std::vector<Example> ex;
  for (int i = 0; i < 7; ++i) {
    Example e;
    for (int t = 0; t < 2 + (i * 5) % 7; ++t) e.src.push_back(4 + (i * 3 + t) % 30);
    for (int t = 0; t < 1 + (i * 3) % 6; ++t) e.tgt.push_back(4 + (i * 7 + t) % 40);
    ex.push_back(e);
  }
  return ex;
}

Batch batch_of(const std::vector<Example>& ex, size_t first, size_t last) {
  std::vector<const Example*> ptrs;
  for (size_t i = first; i < last; ++i) ptrs.push_back(&ex[i]);
  return make_batch(ptrs);
}

/// Rows of sentence b of a token-row mask laid out as `rows`.
Mat sentence_rows(const Mat& mask, const Packing& rows, int b) {
  return mask.middleRows(rows.offsets[b], rows.lengths[b]);
}

/// The real rows and columns of sentence b of an attention-weight mask ([B·H·Tq, Tk]).
Mat attention_rows(const Mat& mask, const Packing& q_rows, int n_heads, int b, int n_keys) {
  Mat out(Index(n_heads) * q_rows.lengths[b], n_keys);
  for (int h = 0; h < n_heads; ++h)
    out.middleRows(Index(h) * q_rows.lengths[b], q_rows.lengths[b]) =
        mask.block((Index(b) * n_heads + h) * q_rows.max_length, 0, q_rows.lengths[b], n_keys);
  return out;
}

ModelConfig dropout_config(double p, double word) {
  ModelConfig cfg = test::tiny_config({40, 50, 16, 2, 32, 2, 2, 64}, "pre", true, p);
  cfg.dropout_src = cfg.dropout_trg = word;
  return cfg;
}

}  // namespace

TEST_CASE("A sentence's dropout masks depend on its global index, not on the shard cut", "[dropout]") {
  const auto ex = seven_pairs();
  const Batch whole = batch_of(ex, 0, ex.size());
  const Scalar p = Scalar(0.3);
  const DropoutContext ctx = DropoutContext::training(7, 12).site(dropout_site::kFfnHidden);
  Mat rows_whole, attn_whole;
  make_dropout_mask(10, p, ctx.over(whole.tgt_rows), rows_whole);
  make_attention_dropout_mask(whole.tgt_rows, 2, whole.src_len, p, ctx, attn_whole);
  REQUIRE(rows_whole.rows() == whole.tgt_rows.rows());
  // Cuts into 2, 3 and 7 contiguous shards, and one sentence alone: each shard's context
  // starts at its first sentence's global index.
  for (const std::vector<size_t>& cut : {std::vector<size_t>{0, 3, 7}, {0, 2, 4, 7}, {0, 1, 2, 3, 4, 5, 6, 7}, {5, 6}}) {
    for (size_t k = 0; k + 1 < cut.size(); ++k) {
      const Batch shard = batch_of(ex, cut[k], cut[k + 1]);
      const DropoutContext sctx = DropoutContext::training(7, 12, int64_t(cut[k])).site(dropout_site::kFfnHidden);
      Mat rows_shard, attn_shard;
      make_dropout_mask(10, p, sctx.over(shard.tgt_rows), rows_shard);
      make_attention_dropout_mask(shard.tgt_rows, 2, shard.src_len, p, sctx, attn_shard);
      for (int b = 0; b < shard.batch_size; ++b) {
        const int g = int(cut[k]) + b;
        INFO("shard from " << cut[k] << ", sentence " << g);
        CHECK(sentence_rows(rows_shard, shard.tgt_rows, b) == sentence_rows(rows_whole, whole.tgt_rows, g));
        const int keys = std::min(shard.src_len, whole.src_len);
        CHECK(attention_rows(attn_shard, shard.tgt_rows, 2, b, keys) ==
              attention_rows(attn_whole, whole.tgt_rows, 2, g, keys));
      }
    }
  }
}

TEST_CASE("Dropout masks differ between seeds, steps, sites and sentences, and not between thread counts", "[dropout]") {
  const Packing rows = Packing::of({30, 30});
  auto mask = [&](const DropoutContext& c) {
    Mat m;
    make_dropout_mask(64, Scalar(0.5), c.over(rows), m);
    return m;
  };
  const DropoutContext base = DropoutContext::training(1, 5).site(dropout_site::kEncoderLayer).site(0);
  const Mat m = mask(base);
  CHECK(m == mask(DropoutContext::training(1, 5).site(dropout_site::kEncoderLayer).site(0)));
  CHECK(m != mask(DropoutContext::training(2, 5).site(dropout_site::kEncoderLayer).site(0)));
  CHECK(m != mask(DropoutContext::training(1, 6).site(dropout_site::kEncoderLayer).site(0)));
  CHECK(m != mask(DropoutContext::training(1, 5).site(dropout_site::kEncoderLayer).site(1)));
  CHECK(m != mask(DropoutContext::training(1, 5).site(dropout_site::kDecoderLayer).site(0)));
  CHECK(m.topRows(30) != m.bottomRows(30));          // sentence 0 vs sentence 1
  CHECK(m.row(0) != m.row(1));                       // position 0 vs 1
  // A mask big enough to be split across threads is the same with one thread.
  const Packing big = Packing::of(std::vector<int>(40, 50));
  Mat two, one;
  make_dropout_mask(512, Scalar(0.1), base.over(big), two);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  make_dropout_mask(512, Scalar(0.1), base.over(big), one);
  omp_set_num_threads(threads);
  CHECK(one == two);
  // Inactive context or p = 0: no mask (identity).
  Mat none;
  make_dropout_mask(64, Scalar(0.5), DropoutContext{}.over(rows), none);
  CHECK(none.size() == 0);
  make_dropout_mask(64, Scalar(0), base.over(rows), none);
  CHECK(none.size() == 0);
  CHECK_THROWS_AS(make_dropout_mask(64, Scalar(0.5), base, none), ShapeError);  // no rows
}

TEST_CASE("Dropout masks drop at rate p and scale the rest by 1/(1-p)", "[dropout]") {
  const Packing rows = Packing::of(std::vector<int>(50, 40));  // 2000 rows
  for (const double p : {0.05, 0.1, 0.3, 0.5}) {
    // Odd column count: the last column uses the low half of one more output.
    Mat m, a;
    make_dropout_mask(257, Scalar(p), DropoutContext::training(3, 1).over(rows), m);
    make_attention_dropout_mask(rows, 4, 33, Scalar(p), DropoutContext::training(3, 1), a);
    const Scalar keep = Scalar(1) / (Scalar(1) - Scalar(p));
    CHECK((m.array() == Scalar(0) || m.array() == keep).all());
    const double n = double(m.size());
    const double rate = double((m.array() == Scalar(0)).count()) / n;
    const double sigma = std::sqrt(p * (1 - p) / n);
    INFO("p " << p << ": drop rate " << rate);
    CHECK(std::abs(rate - p) < 5 * sigma);
    // Even and odd columns (the two halves of one 64-bit output) each drop at rate p.
    for (int parity : {0, 1}) {
      double dropped = 0, count = 0;
      for (Index c = parity; c < m.cols(); c += 2) {
        dropped += double((m.col(c).array() == Scalar(0)).count());
        count += double(m.rows());
      }
      CHECK(std::abs(dropped / count - p) < 5 * std::sqrt(p * (1 - p) / count));
    }
    const double attn_rate = double((a.array() == Scalar(0)).count()) / double(a.size());
    CHECK(std::abs(attn_rate - p) < 5 * std::sqrt(p * (1 - p) / double(a.size())));
  }
}

TEST_CASE("A shard's forward pass draws the masks of its sentences in the whole batch", "[dropout][model]") {
  // Every dropout of the model on (word and layer dropout too): the masks of shard [2, 5) in a forward
  // pass equal the rows of sentences 2..4 of the whole batch's, site by site, and so the
  // shard's logits equal those rows of the whole batch's up to summation order.
  const auto ex = seven_pairs();
  ModelConfig cfg = dropout_config(0.2, 0.25);
  cfg.layer_dropout = 0.3;
  Transformer model(cfg);
  model.init_parameters(3);
  const Batch whole = batch_of(ex, 0, ex.size()), shard = batch_of(ex, 2, 5);
  ForwardCache cw, cs;
  Mat lw, ls;
  model.forward(whole, DropoutContext::training(9, 4), cw, lw);
  model.forward(shard, DropoutContext::training(9, 4, 2), cs, ls);
  for (int b = 0; b < shard.batch_size; ++b) {
    const int g = b + 2;
    INFO("sentence " << g);
    const Packing &ss = shard.src_rows, &st = shard.tgt_rows, &ws = whole.src_rows, &wt = whole.tgt_rows;
    CHECK(sentence_rows(cs.src_word_drop, ss, b) == sentence_rows(cw.src_word_drop, ws, g));
    CHECK(sentence_rows(cs.tgt_word_drop, st, b) == sentence_rows(cw.tgt_word_drop, wt, g));
    CHECK(sentence_rows(cs.src_embed_drop, ss, b) == sentence_rows(cw.src_embed_drop, ws, g));
    CHECK(sentence_rows(cs.tgt_embed_drop, st, b) == sentence_rows(cw.tgt_embed_drop, wt, g));
    for (size_t l = 0; l < 2; ++l) {
      CHECK(sentence_rows(cs.enc[l].ffn.drop, ss, b) == sentence_rows(cw.enc[l].ffn.drop, ws, g));
      CHECK(sentence_rows(cs.enc[l].self_attn_res.drop, ss, b) == sentence_rows(cw.enc[l].self_attn_res.drop, ws, g));
      CHECK(sentence_rows(cs.dec[l].cross_attn_res.drop, st, b) == sentence_rows(cw.dec[l].cross_attn_res.drop, wt, g));
      CHECK(sentence_rows(cs.dec[l].ffn_res.drop, st, b) == sentence_rows(cw.dec[l].ffn_res.drop, wt, g));
      const int n = ss.lengths[b];
      CHECK(attention_rows(cs.enc[l].self_attn.drop, ss, 2, b, n) == attention_rows(cw.enc[l].self_attn.drop, ws, 2, g, n));
      CHECK(attention_rows(cs.dec[l].cross_attn.drop, st, 2, b, n) == attention_rows(cw.dec[l].cross_attn.drop, wt, 2, g, n));
    }
    // Different sites draw different masks (unless layer dropout zeroed both).
    const Mat ffn0 = sentence_rows(cw.enc[0].ffn_res.drop, ws, g), attn0 = sentence_rows(cw.enc[0].self_attn_res.drop, ws, g),
              ffn1 = sentence_rows(cw.enc[1].ffn_res.drop, ws, g);
    if (!ffn0.isZero()) CHECK(ffn0 != attn0);
    if (!ffn0.isZero() || !ffn1.isZero()) CHECK(ffn0 != ffn1);
    const Mat lg = sentence_rows(lw, wt, g);
    CHECK((sentence_rows(ls, st, b) - lg).cwiseAbs().maxCoeff() <= 1e-4 * (1 + lg.cwiseAbs().maxCoeff()));
  }
}

TEST_CASE("Word dropout zeroes whole embedding vectors at rate p, and p = 0 changes nothing", "[dropout][model]") {
  // 120 sentences of 2..8 source and 1..6 target tokens.
  std::vector<Example> ex;
  for (int i = 0; i < 120; ++i) ex.push_back(seven_pairs()[size_t(i % 7)]);
  const Batch b = batch_of(ex, 0, ex.size());
  const DropoutContext train = DropoutContext::training(5, 2);
  for (const double p : {0.1, 0.3}) {
    Transformer model(dropout_config(0.0, p));  // no other dropout
    model.init_parameters(4);
    ForwardCache on, off;
    Mat l_on, l_off;
    model.forward(b, train, on, l_on);
    model.forward(b, DropoutContext{}, off, l_off);
    const Scalar keep = Scalar(1) / (Scalar(1) - Scalar(p));
    for (const auto& [mask, drop_in, plain, ids] :
         {std::tuple{&on.src_word_drop, &on.enc_x[0], &off.enc_x[0], &b.src},
          std::tuple{&on.tgt_word_drop, &on.dec_x[0], &off.dec_x[0], &b.tgt_in}}) {
      REQUIRE(mask->rows() == drop_in->rows());
      REQUIRE(mask->cols() == 1);
      const Mat& emb = mask == &on.src_word_drop ? model.params().find("encoder.embed_tokens.weight")->value
                                                 : model.params().find("decoder.embed_tokens.weight")->value;
      const Scalar scale = std::sqrt(Scalar(16));
      int dropped = 0;
      for (Index r = 0; r < mask->rows(); ++r) {
        const Mat word = emb.row((*ids)[size_t(r)]) * scale;
        const Mat position = plain->row(r) - word;  // PE[pos]
        if ((*mask)(r, 0) == Scalar(0)) {
          ++dropped;
          CHECK(drop_in->row(r).isApprox(position, Scalar(1e-5)));
        } else {
          CHECK((*mask)(r, 0) == keep);
          CHECK(drop_in->row(r).isApprox(word * keep + position, Scalar(1e-5)));
        }
      }
      const double rate = double(dropped) / double(mask->rows());
      INFO("p " << p << ": " << dropped << " of " << mask->rows() << " rows dropped");
      CHECK(std::abs(rate - p) < 5 * std::sqrt(p * (1 - p) / double(mask->rows())));
    }
  }
  // p = 0: no word mask, and the embeddings are exactly the inference ones times the
  // embedding dropout; at inference word dropout is off whatever p.
  Transformer zero(dropout_config(0.1, 0.0)), half(dropout_config(0.1, 0.5));
  zero.init_parameters(6);
  half.init_parameters(6);
  ForwardCache c0, c1, c2;
  Mat l0, l1, l2;
  zero.forward(b, train, c0, l0);
  zero.forward(b, DropoutContext{}, c1, l1);
  CHECK(c0.src_word_drop.size() == 0);
  CHECK(c0.tgt_word_drop.size() == 0);
  REQUIRE(c0.src_embed_drop.size() > 0);
  CHECK(c0.enc_x[0] == Mat(c1.enc_x[0].cwiseProduct(c0.src_embed_drop)));
  CHECK(c0.dec_x[0] == Mat(c1.dec_x[0].cwiseProduct(c0.tgt_embed_drop)));
  half.forward(b, DropoutContext{}, c2, l2);
  CHECK(l1 == l2);
}

TEST_CASE("Layer dropout skips a layer for whole sentences at rate p; kept layers scale by 1/(1-p)", "[dropout][model]") {
  // 120 sentences, no other dropout: a sentence's residual masks in one layer are all 0 (the
  // layer's output is its input, exactly) or all 1/(1−p), the same for every branch of it.
  std::vector<Example> ex;
  for (int i = 0; i < 120; ++i) ex.push_back(seven_pairs()[size_t(i % 7)]);
  const Batch b = batch_of(ex, 0, ex.size());
  const double p = 0.3;
  ModelConfig cfg = dropout_config(0.0, 0.0);
  cfg.layer_dropout = p;
  Transformer model(cfg);
  model.init_parameters(4);
  ForwardCache c;
  Mat logits;
  model.forward(b, DropoutContext::training(5, 2), c, logits);
  const Scalar keep = Scalar(1) / (Scalar(1) - Scalar(p));
  int skipped = 0, draws = 0;
  auto check_layer = [&](const std::vector<const ResidualCache*>& branches, const Packing& rows, const Mat& in,
                         const Mat& out) {
    for (int s = 0; s < rows.batch_size(); ++s) {
      const Mat first = sentence_rows(branches.front()->drop, rows, s);
      const bool skip = first.isZero();
      CHECK((skip || (first.array() == keep).all()));
      for (const ResidualCache* r : branches) CHECK(sentence_rows(r->drop, rows, s) == first);
      if (skip) CHECK(sentence_rows(out, rows, s) == sentence_rows(in, rows, s));
      skipped += skip;
      ++draws;
    }
  };
  for (size_t l = 0; l < 2; ++l) {
    check_layer({&c.enc[l].self_attn_res, &c.enc[l].ffn_res}, b.src_rows, c.enc_x[l], c.enc_x[l + 1]);
    check_layer({&c.dec[l].self_attn_res, &c.dec[l].cross_attn_res, &c.dec[l].ffn_res}, b.tgt_rows, c.dec_x[l],
                c.dec_x[l + 1]);
  }
  const double rate = double(skipped) / draws;
  INFO(skipped << " of " << draws << " sentence-layers skipped");
  CHECK(std::abs(rate - p) < 5 * std::sqrt(p * (1 - p) / draws));
  // Inference ignores it.
  ForwardCache inference;
  model.forward(b, DropoutContext{}, inference, logits);
  CHECK(inference.enc[0].ffn_res.drop.size() == 0);
}
