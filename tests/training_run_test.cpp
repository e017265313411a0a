// Training runs of the whole model in the float build: determinism for a seed and thread
// count, overfitting 20 pairs, mid-epoch resume bit for bit, learning-rate decay on stalled
// validations, the NaN/Inf checks, and sharded updates (--simulate-ranks) against one batch.
#include <catch2/catch.hpp>

#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/train/adam.h"
#include "anuvad/train/replicas.h"
#include "anuvad/train/trainer.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::batch_of;

namespace {

ModelConfig small_config(const std::string& norm = "pre", bool tie = true) {
  return test::tiny_config({40, 50, 32, 4, 64, 2, 2, 64}, norm, tie);
}

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
