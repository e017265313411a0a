// Data parallelism across threads (train/thread_shards.h): the shards' cut, sub-batches, and
// that a sharded step computes the one-shard step's loss and gradients.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/gemm_stats.h"
#include "anuvad/train/thread_shards.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::batch_of;

namespace {

/// n random pairs: ids in [4, vocab), lengths in [1, max_len].
std::vector<Example> random_pairs(int n, int vocab, int max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> tok(4, vocab - 1), len(1, max_len);
  std::vector<Example> ex(static_cast<size_t>(n));
  for (auto& e : ex) {
    for (int i = len(rng); i > 0; --i) e.src.push_back(tok(rng));
    for (int i = len(rng); i > 0; --i) e.tgt.push_back(tok(rng));
  }
  return ex;
}

/// Every gradient of `reg` (registry order), copied.
std::vector<Mat> gradients(const ParamRegistry& reg) {
  std::vector<Mat> g;
  for (const Param& p : reg.params()) g.push_back(p.grad);
  return g;
}

}  // namespace

TEST_CASE("Shard cuts cover the batch in order, each at the boundary nearest its share of the cost", "[train][shards]") {
  const auto ex = random_pairs(9, 30, 12, 1);
  const Batch b = batch_of(ex);
  for (int shards : {1, 2, 3, 9, 20}) {
    const auto cuts = balanced_shard_cuts(b, shards, 2.0, 3.0);
    REQUIRE(cuts.size() == size_t(std::min(shards, 9)) + 1);
    CHECK(cuts.front() == 0);
    CHECK(cuts.back() == 9);
    for (size_t k = 1; k < cuts.size(); ++k) CHECK(cuts[k] > cuts[k - 1]);  // none empty
  }
  // Sentences of costs 1, 1, 1, 5 (source 0 + target lengths with tgt_cost 1, src_cost 0):
  // half of 8 is 4; the boundary after sentence 2 (cost 3 so far) is nearer than after 3 (8).
  Batch c;
  c.batch_size = 4;
  c.src_lengths = {1, 1, 1, 1};
  c.tgt_lengths = {1, 1, 1, 5};
  CHECK(balanced_shard_cuts(c, 2, 0.0, 1.0) == std::vector<int>{0, 3, 4});
  c.tgt_lengths = {5, 1, 1, 1};  // the first sentence alone is nearest to half
  CHECK(balanced_shard_cuts(c, 2, 0.0, 1.0) == std::vector<int>{0, 1, 4});
  CHECK_THROWS_AS(balanced_shard_cuts(c, 0), ShapeError);
  CHECK_THROWS_AS(balanced_shard_cuts(Batch{}, 2), ShapeError);
}

TEST_CASE("sub_batch gives what make_batch gives for the same examples", "[train][shards]") {
  const auto ex = random_pairs(7, 30, 9, 2);
  const Batch whole = batch_of(ex);
  const Batch part = sub_batch(whole, 2, 6);
  const Batch made = batch_of(std::vector<Example>(ex.begin() + 2, ex.begin() + 6));
  CHECK(part.batch_size == made.batch_size);
  CHECK(part.src_len == made.src_len);
  CHECK(part.tgt_len == made.tgt_len);
  CHECK(part.src == made.src);
  CHECK(part.tgt_in == made.tgt_in);
  CHECK(part.tgt_out == made.tgt_out);
  CHECK(part.src_rows.offsets == made.src_rows.offsets);
  CHECK(part.tgt_rows.offsets == made.tgt_rows.offsets);
  CHECK_THROWS_AS(sub_batch(whole, 3, 3), ShapeError);
  CHECK_THROWS_AS(sub_batch(whole, 5, 8), ShapeError);
}

TEST_CASE("A step cut into thread shards gives the one-shard loss and gradients, every dropout on", "[train][shards]") {
  ModelConfig cfg = test::tiny_config({40, 50, 32, 4, 64, 2, 2, 64}, "pre", true, 0.1);
  cfg.dropout_src = cfg.dropout_trg = 0.1;
  Transformer model(cfg);
  model.init_parameters(3);
  const auto ex = random_pairs(11, 40, 10, 3);
  const Batch b = batch_of(ex);
  // Masks are drawn per sentence of the global batch (nn/dropout.h), so a shard's sentences
  // get the masks they have in the whole batch: only the summation order differs.
  const DropoutContext dctx = DropoutContext::training(7, 5);
  const double scale = double(b.n_tgt_tokens());
  ShardedStep one(1);
  const LossStats l1 = one.run(model, b, dctx, {0.1}, scale);
  CHECK(one.last_shards() == 1);
  const std::vector<Mat> g1 = gradients(model.params());
  for (int shards : {2, 3, 11, 16}) {
    ShardedStep sharded(shards);
    const LossStats ln = sharded.run(model, b, dctx, {0.1}, scale);
    CHECK(sharded.last_shards() == std::min(shards, 11));
    CHECK(t_gradient_slot == 0);
    CHECK(ln.n_tokens == l1.n_tokens);
    CHECK(ln.loss_sum == Approx(l1.loss_sum).epsilon(1e-6));
    CHECK(ln.nll_sum == Approx(l1.nll_sum).epsilon(1e-6));
    const std::vector<Mat> gn = gradients(model.params());
    for (size_t i = 0; i < g1.size(); ++i) {
      INFO(model.params().params()[i].name << " with " << shards << " shards");
      const double tol = 1e-5 * std::max(1.0, double(g1[i].cwiseAbs().maxCoeff()));
      CHECK((gn[i] - g1[i]).cwiseAbs().maxCoeff() <= tol);
    }
    // The same shards again (buffers and slots reused): the same bits.
    sharded.run(model, b, dctx, {0.1}, scale);
    for (size_t i = 0; i < gn.size(); ++i) CHECK(model.params().params()[i].grad == gn[i]);
  }
  // A one-sentence batch is never cut.
  ShardedStep two(2);
  two.run(model, sub_batch(b, 0, 1), dctx, {0.1}, scale);
  CHECK(two.last_shards() == 1);
}

TEST_CASE("An R-Drop step is the mean of a step and its twin's, plus the divergence; shards agree", "[train][shards]") {
  ModelConfig cfg = test::tiny_config({40, 50, 32, 4, 64, 2, 2, 64}, "pre", true, 0.1);
  Transformer model(cfg);
  model.init_parameters(5);
  const Batch b = batch_of(random_pairs(9, 40, 10, 6));
  const DropoutContext dctx = DropoutContext::training(3, 2);
  const double scale = double(b.n_tgt_tokens());
  ShardedStep one(1);
  // α → 0: ½ (the step with dctx + the step with dctx.twin()), loss and gradients.
  const LossStats la = one.run(model, b, dctx, {0.1}, scale);
  const std::vector<Mat> ga = gradients(model.params());
  const LossStats lb = one.run(model, b, dctx.twin(), {0.1}, scale);
  const std::vector<Mat> gb = gradients(model.params());
  CHECK(lb.loss_sum != la.loss_sum);  // the twin's masks differ
  // The two-pass path (α > 0) with a divergence term too small to count.
  const LossStats l0 = one.run(model, b, dctx, {0.1, 1e-300}, scale);
  CHECK(l0.loss_sum == Approx(0.5 * (la.loss_sum + lb.loss_sum)).epsilon(1e-6));
  CHECK(l0.nll_sum == Approx(0.5 * (la.nll_sum + lb.nll_sum)).epsilon(1e-6));
  const std::vector<Mat> g0 = gradients(model.params());
  for (size_t i = 0; i < g0.size(); ++i) {
    INFO(model.params().params()[i].name);
    const Mat mean = 0.5 * (ga[i] + gb[i]);
    CHECK((g0[i] - mean).cwiseAbs().maxCoeff() <= 1e-5 * std::max(1.0, double(mean.cwiseAbs().maxCoeff())));
  }
  // α = 5: the divergence of the two passes adds to the loss, and the shards agree.
  const LossStats l5 = one.run(model, b, dctx, {0.1, 5.0}, scale);
  CHECK(l5.loss_sum > l0.loss_sum + 1e-3);
  CHECK(l5.nll_sum == Approx(l0.nll_sum).epsilon(1e-12));
  const std::vector<Mat> g5 = gradients(model.params());
  ShardedStep three(3);
  const LossStats l5s = three.run(model, b, dctx, {0.1, 5.0}, scale);
  CHECK(three.last_shards() == 3);
  CHECK(l5s.loss_sum == Approx(l5.loss_sum).epsilon(1e-6));
  const std::vector<Mat> g5s = gradients(model.params());
  for (size_t i = 0; i < g5.size(); ++i) {
    INFO(model.params().params()[i].name << " with 3 shards");
    CHECK((g5s[i] - g5[i]).cwiseAbs().maxCoeff() <= 1e-5 * std::max(1.0, double(g5[i].cwiseAbs().maxCoeff())));
  }
}

TEST_CASE("A shard's error reaches the caller after every shard has stopped", "[train][shards]") {
  const ModelConfig cfg = test::tiny_config({40, 50, 32, 4, 64, 1, 1, 64});
  Transformer model(cfg);
  model.init_parameters(4);
  auto ex = random_pairs(6, 40, 8, 4);
  ex[5].tgt[0] = 999;  // outside the target vocabulary: the last shard's embedding throws
  ShardedStep sharded(2);
  CHECK_THROWS_AS(sharded.run(model, batch_of(ex), DropoutContext{}, {0.0}, 1.0), ShapeError);
  CHECK(t_gradient_slot == 0);
  ex[5].tgt[0] = 7;
  const LossStats ls = sharded.run(model, batch_of(ex), DropoutContext{}, {0.0}, 1.0);
  CHECK(std::isfinite(ls.loss_sum));
  CHECK(sharded.last_shards() == 2);
  // Nothing of the failed step's shard gradients is left in the slots: the step after the
  // failure gives the same bits as the one after it.
  const std::vector<Mat> after_error = gradients(model.params());
  sharded.run(model, batch_of(ex), DropoutContext{}, {0.0}, 1.0);
  for (size_t i = 0; i < after_error.size(); ++i) CHECK(model.params().params()[i].grad == after_error[i]);
}

TEST_CASE("Two shards by default up to base's feed-forward size, one above it", "[train][shards]") {
  ModelConfig cfg;
  cfg.d_model = 256;
  cfg.d_ff = 1024;
  CHECK(default_thread_shards(cfg, 2) == 2);
  CHECK(default_thread_shards(cfg, 1) == 1);
  cfg.d_model = 512;
  cfg.d_ff = 2048;
  CHECK(default_thread_shards(cfg, 2) == 2);
  cfg.d_model = 1024;
  cfg.d_ff = 4096;
  CHECK(default_thread_shards(cfg, 2) == 1);
}

TEST_CASE("gemm_stats counts the products of every thread of a parallel region", "[gemm][shards]") {
  const Mat a = Mat::Random(64, 32), b = Mat::Random(32, 48);
  start_gemm_stats();
  int team = 1;
#pragma omp parallel num_threads(2)
  {
    Mat c(64, 48);
    gemm(a, false, b, false, Scalar(1), Scalar(0), c);
#pragma omp single
    team = omp_get_num_threads();
  }
  const GemmStats s = gemm_stats();
  CHECK(s.calls == team);
  CHECK(s.flops == team * 2.0 * 64 * 32 * 48);
  CHECK(s.seconds > 0);
}
