// Data parallelism across threads (see include/anuvad/train/thread_shards.h).
#include "anuvad/train/thread_shards.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>

#include "anuvad/core/error.h"
#include "anuvad/core/step_team.h"

namespace anuvad {

std::vector<int> balanced_shard_cuts(const Batch& b, int shards, double src_cost, double tgt_cost) {
  ANUVAD_CHECK_SHAPE(shards >= 1 && b.batch_size >= 1,
                     "balanced_shard_cuts: " + std::to_string(shards) + " shards of " +
                         std::to_string(b.batch_size) + " sentences");
  const int n = std::min(shards, b.batch_size);
  const auto cost = [&](int i) { return src_cost * b.src_lengths[i] + tgt_cost * b.tgt_lengths[i]; };
  double total = 0;
  for (int i = 0; i < b.batch_size; ++i) total += cost(i);
  std::vector<int> cuts{0};
  double sum = 0;
  int i = 0;
  for (int k = 1; k < n; ++k) {
    const double target = total * k / n;
    // the sentence boundary nearest to the target, at least one sentence per shard, and
    // enough left for the shards after this one
    while (i < b.batch_size - (n - k) && (i < cuts.back() + 1 || sum + cost(i) / 2 < target)) sum += cost(i++);
    cuts.push_back(i);
  }
  cuts.push_back(b.batch_size);
  return cuts;
}

std::pair<double, double> token_costs(const ModelConfig& cfg) {
  const double d = cfg.d_model, ff = cfg.d_ff;
  const double layer = 4 * d * d + 2 * d * ff;  // Q, K, V, output projections; feed-forward
  const double src = cfg.encoder_layers * layer + cfg.decoder_layers * 2 * d * d;
  const double tgt = cfg.decoder_layers * (layer + 2 * d * d) + d * cfg.tgt_vocab_size;
  return {src, tgt};
}

int default_thread_shards(const ModelConfig& cfg, int threads) {
  return double(cfg.d_model) * double(cfg.d_ff) <= kThreadShardsMaxFfnWeight ? std::max(1, threads) : 1;
}

namespace {

/// Forward pass, loss and backward pass of one batch or shard into the calling thread's
/// gradient slot (which the caller has zeroed); with rdrop_alpha > 0 two passes with
/// independent dropout masks (DropoutContext::twin) and rdrop_loss. `final` is called by the
/// last backward pass only: the gradients are complete then.
template <typename Buffers>
LossStats forward_loss_backward(Transformer& model, const Batch& b, const DropoutContext& dctx,
                                const StepLoss& loss, double grad_scale, Buffers& buf,
                                const GradientsFinal& final) {
  model.forward(b, dctx, buf.cache, buf.logits);
  if (loss.rdrop_alpha <= 0) {
    const LossStats ls = label_smoothed_cross_entropy(buf.logits, b.tgt_out, loss.label_smoothing, &buf.dlogits, grad_scale);
    model.backward(b, buf.dlogits, buf.cache, final);
    return ls;
  }
  model.forward(b, dctx.twin(), buf.twin_cache, buf.twin_logits);
  const LossStats ls = rdrop_loss(buf.logits, buf.twin_logits, b.tgt_out, loss.label_smoothing, loss.rdrop_alpha,
                                  &buf.dlogits, &buf.twin_dlogits, grad_scale);
  model.backward(b, buf.dlogits, buf.cache, {});
  model.backward(b, buf.twin_dlogits, buf.twin_cache, final);
  return ls;
}

/// The shards' gradient sum (ParamRegistry::sum_gradient_slots), begun by the threads whose
/// shards are done while the others still run, instead of waiting for them idle. Shard k's
/// backward pass reports through GradientsFinal that parameters >= first_final[k] have their
/// final gradient (the pass goes from the last parameter down), so parameter i can be summed
/// once i >= first_final of every shard. Threads claim parameters from the top with one
/// atomic cursor and sum each whole (the same bits as the split sum: the order per value is the
/// slot order either way); what is unclaimed when every shard is done is summed by all the
/// threads after the shards' region.
class OverlappedSum {
 public:
  OverlappedSum(ParamRegistry& params, int shards)
      : params_(params), shards_(shards), first_final_(size_t(shards)), cursor_(params.params().size()) {
    for (auto& f : first_final_) f.store(params.params().size(), std::memory_order_relaxed);
  }
  /// Shard k's parameters >= first_final have their final gradient.
  void final(int k, size_t first_final) { first_final_[size_t(k)].store(first_final, std::memory_order_release); }
  /// Shard k has stopped (done or failed): none of its gradients will change.
  void done(int k) {
    final(k, 0);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
  /// Sums claimable parameters until every shard is done; called by a thread with no shard left.
  void help() {
    for (uint32_t polls = 0;;) {
      size_t i = cursor_.load(std::memory_order_relaxed);
      // Once every shard is done, the rest is summed after the region, each parameter split
      // across the threads (claimed whole here, the large embeddings would leave one thread idle).
      if (i == 0 || done_.load(std::memory_order_acquire) == shards_) return;
      size_t ready = 0;  // parameters >= ready are final in every shard
      for (const auto& f : first_final_) ready = std::max(ready, f.load(std::memory_order_acquire));
      if (i - 1 >= ready) {
        if (cursor_.compare_exchange_weak(i, i - 1, std::memory_order_acq_rel)) params_.sum_gradient_slots(i - 1, i);
      } else {
        spin_relax(polls++);  // (yields the core now and then: the busy shard may need it)
      }
    }
  }
  /// Parameters [0, unclaimed()) are left to sum once every shard is done.
  size_t unclaimed() const { return cursor_.load(std::memory_order_acquire); }

 private:
  ParamRegistry& params_;
  const int shards_;
  std::vector<std::atomic<size_t>> first_final_;  ///< per shard (all parameters: none final yet)
  std::atomic<size_t> cursor_;                     ///< parameters >= cursor_ are claimed
  std::atomic<int> done_{0};                       ///< shards stopped
};

}  // namespace

ShardedStep::ShardedStep(int threads) : threads_(std::max(1, threads)) {}

LossStats ShardedStep::run(Transformer& model, const Batch& b, const DropoutContext& dctx,
                           const StepLoss& loss, double grad_scale, const GradientsFinal& final) {
  const int n = b.batch_size >= 2 ? std::min(threads_, b.batch_size) : 1;
  last_shards_ = n;
  if (buffers_.size() < size_t(n)) buffers_.resize(size_t(n));
  ParamRegistry& params = model.params();
  if (n == 1) {
    params.zero_grad();
    return forward_loss_backward(model, b, dctx, loss, grad_scale, buffers_[0], final);
  }
  const auto [src_cost, tgt_cost] = token_costs(model.config());
  const std::vector<int> cuts = balanced_shard_cuts(b, n, src_cost, tgt_cost);
  params.reserve_gradient_slots(n);
  std::vector<LossStats> stats(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<double> busy(static_cast<size_t>(n), 0.0);
  OverlappedSum sum(params, n);
  params.zero_grad();  // slot 0; split across the threads here rather than on thread 0 in the region
  const double start = omp_get_wtime();
#pragma omp parallel num_threads(n)
  {
    // One shard per thread; a thread does more than one if the runtime gave fewer. Shard k
    // accumulates into gradient slot k (slots >= 1 are zero between steps: ParamRegistry).
    for (int k = omp_get_thread_num(); k < n; k += omp_get_num_threads()) {
      const double t0 = omp_get_wtime();
      t_gradient_slot = k;
      try {
        const Batch shard = sub_batch(b, cuts[k], cuts[k + 1]);
        stats[size_t(k)] = forward_loss_backward(model, shard, dctx.from_sentence(cuts[k]), loss, grad_scale,
                                                 buffers_[size_t(k)], [&sum, k](size_t f) { sum.final(k, f); });
      } catch (...) {
        errors[size_t(k)] = std::current_exception();
      }
      sum.done(k);
      t_gradient_slot = 0;
      busy[size_t(k)] += omp_get_wtime() - t0;
    }
    sum.help();
  }
  const double wall = omp_get_wtime() - start;
  double mean_busy = 0;
  for (const double t : busy) mean_busy += t / n;
  region_seconds_ += wall;
  idle_seconds_ += wall - mean_busy;
  for (const auto& e : errors)
    if (e) {
      params.reserve_gradient_slots(1);  // (frees the slots: no longer all zero)
      std::rethrow_exception(e);
    }
  params.sum_gradient_slots(0, sum.unclaimed());
  if (final) final(0);
  LossStats total;
  for (const LossStats& s : stats) {
    total.loss_sum += s.loss_sum;
    total.nll_sum += s.nll_sum;
    total.n_tokens += s.n_tokens;
  }
  return total;
}

}  // namespace anuvad
