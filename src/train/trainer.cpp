// The update loop: fit() and its parts (one update, the EMA, epochs, validation, checkpoints).
#include "anuvad/train/trainer.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>

#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"
#include "anuvad/core/runtime.h"
#include "anuvad/nn/loss.h"
#include "anuvad/train/adam.h"
#include "anuvad/train/progress.h"
#include "anuvad/train/replicas.h"
#include "anuvad/train/thread_shards.h"
#include "anuvad/train/training_log.h"

namespace anuvad {

namespace {

std::atomic<bool> g_stop_requested{false};

/// Checks that the gradients are finite (throws NumericError naming the first that is not),
/// then one Adam update at the learning rate the schedule gives for `step` (inverse_sqrt_lr)
/// times `lr_scale` (the --lr-decay steps so far) with the gradients clipped to
/// opts.clip_norm (the factor is applied in Adam's pass; the stored gradients are left
/// unscaled); returns that rate.
double clip_and_adam_step(ParamRegistry& params, Adam& adam, const TrainOptions& opts, int64_t step,
                          double lr_scale) {
  // One parallel pass for the norm (NaN or Inf exactly when a gradient is: then the slow pass
  // names the parameter); the clipping factor is applied inside Adam's pass.
  const double norm = gradient_norm(params);
  if (!std::isfinite(norm)) check_finite_gradients(params, step);
  const double lr = lr_scale * inverse_sqrt_lr(opts.learning_rate, step, opts.warmup_steps);
  adam.step(params, lr, step, clip_coefficient(norm, opts.clip_norm));
  return lr;
}

/// Exponential moving average of the weights (TrainOptions::exponential_smoothing), one
/// matrix per parameter in registry order; a no-op with decay 0.
class WeightAverage {
 public:
  /// Starts from the current weights, or from `resumed` (a checkpoint's EMA weights).
  WeightAverage(const ParamRegistry& params, double decay, const std::vector<Mat>* resumed) : decay_(decay) {
    if (decay_ <= 0) return;
    if (resumed) {
      ema_ = *resumed;
    } else {
      for (const Param& p : params.params()) ema_.push_back(p.value);
    }
  }
  /// θ_ema ← β·θ_ema + (1 − β)·θ with β = min(1 − decay, (1 + t) / (10 + t)) at step t.
  void update(const ParamRegistry& params, int64_t step) {
    if (decay_ <= 0) return;
    const double t = static_cast<double>(step);
    const Scalar beta = static_cast<Scalar>(std::min(1.0 - decay_, (1.0 + t) / (10.0 + t)));
    const auto& ps = params.params();
    for (size_t i = 0; i < ps.size(); ++i) ema_[i] = beta * ema_[i] + (Scalar(1) - beta) * ps[i].value;
  }
  /// Runs f with the averaged weights in `params` (O(1) swaps), swapping back even on a throw.
  template <class F>
  auto with_average(ParamRegistry& params, const F& f) {
    swap(params);
    struct SwapBack {
      WeightAverage& self;
      ParamRegistry& params;
      ~SwapBack() { self.swap(params); }
    } back{*this, params};
    return f();
  }
  const std::vector<Mat>& weights() const { return ema_; }

 private:
  void swap(ParamRegistry& params) {
    if (decay_ <= 0) return;
    auto& ps = params.params();
    for (size_t i = 0; i < ps.size(); ++i) ps[i].value.swap(ema_[i]);
  }
  double decay_;
  std::vector<Mat> ema_;
};

/// An epoch in progress: its batches, the next one to train on, and its loss so far.
struct Epoch {
  int number = 1;
  std::vector<std::vector<int>> batches;
  size_t next_batch = 0;
  std::string rng_epoch_start;  ///< generator state before the batches were drawn
  double loss = 0;              ///< Σ loss (nats)
  int64_t tokens = 0;
  double mean_loss() const { return loss / static_cast<double>(std::max<int64_t>(tokens, 1)); }
};

/// Draws the batches of epoch `number` with `rng`. For the epoch a checkpoint stopped in
/// (`resumed`), restores the generator state of that epoch's start first, then the generator
/// state, position and loss at the stop. Throws ConfigError for a position beyond the epoch.
Epoch begin_epoch(int number, const std::vector<Example>& examples, int batch_tokens, Rng& rng,
                  const TrainState* resumed) {
  Epoch e;
  e.number = number;
  if (resumed) std::istringstream(resumed->rng_epoch_start) >> rng;
  std::ostringstream start;
  start << rng;
  e.rng_epoch_start = start.str();
  e.batches = bucket_batches(examples, batch_tokens, rng);
  if (resumed) {
    e.loss = resumed->epoch_loss;
    e.tokens = resumed->epoch_tokens;
    std::istringstream(resumed->rng) >> rng;
    e.next_batch = static_cast<size_t>(resumed->next_batch);
    if (e.next_batch > e.batches.size()) throw ConfigError("checkpoint: batch position beyond the epoch");
  }
  return e;
}

/// Updates a run will make (for the ETA; bucketing gives nearly the same batch count every epoch).
int64_t planned_updates(const std::vector<Example>& examples, const TrainOptions& opts) {
  Rng probe_rng(opts.seed);
  const auto batches_per_epoch = static_cast<int64_t>(bucket_batches(examples, opts.batch_tokens, probe_rng).size());
  return planned_steps(batches_per_epoch, opts.after_epochs, opts.after_steps);
}

/// Throws DataError / ConfigError for what makes training impossible before it starts.
void check_run_options(const std::vector<Example>& train_examples, const TrainOptions& opts) {
  if (train_examples.empty()) throw DataError("training corpus has no usable sentence pairs");
  if (opts.after_epochs <= 0 && opts.after_steps <= 0)
    throw ConfigError("set --after-epochs or --after-steps: training needs a stopping point");
  if (!(opts.exponential_smoothing >= 0 && opts.exponential_smoothing < 1))
    throw ConfigError("--exponential-smoothing must be in [0, 1)");
  if (!(opts.lr_decay >= 0 && opts.lr_decay < 1)) throw ConfigError("--lr-decay must be in [0, 1)");
  if (opts.lr_decay_stalled < 1) throw ConfigError("--lr-decay-stalled must be >= 1");
  if (opts.simulate_ranks < 0) throw ConfigError("--simulate-ranks must be >= 0");
  if (opts.simulate_ranks > 1 && world_size() > 1)
    throw ConfigError("--simulate-ranks is for a single process, not for an mpirun job of " +
                      std::to_string(world_size()) + " ranks");
  (void)parse_allreduce_mode(opts.allreduce);
  if (!(opts.allreduce_bucket_mb > 0 && opts.allreduce_bucket_mb < 1e6))
    throw ConfigError("--allreduce-bucket-mb must be in (0, 1e6)");
}

/// The overlapped allreduce of an mpirun job whose opts.allreduce asks for one; null otherwise
/// (one process, or "fused").
std::unique_ptr<GradientBuckets> make_buckets(const ParamRegistry& params, const TrainOptions& opts) {
  const AllreduceMode mode = parse_allreduce_mode(opts.allreduce);
  if (world_size() <= 1 || mode == AllreduceMode::kFused) return nullptr;
  return std::make_unique<GradientBuckets>(params, static_cast<size_t>(opts.allreduce_bucket_mb * 1e6),
                                           mode == AllreduceMode::kOverlap);
}

/// The state of one fit() call besides the model's weights: generator, optimizer, EMA,
/// counters, validation, progress and the result so far.
class Run {
 public:
  Run(Transformer& model, const std::vector<Example>& train, const TrainOptions& opts,
      const FitHooks& hooks, Validation& validation)
      : model_(model), train_(&train), opts_(opts), hooks_(hooks), validation_(validation),
        rng_(opts.seed), adam_(model.params()),
        ema_(model.params(), opts.exponential_smoothing, hooks.resume ? &hooks.resume->ema : nullptr),
        progress_(planned_updates(train, opts), opts.disp_freq, opts.quiet || !is_root_rank(),
                  hooks.resume ? hooks.resume->elapsed_seconds : 0,
                  opts.early_stopping > 0 && !opts.valid_sets.empty()),
        shards_(world_size() > 1 ? world_size() : std::max(1, opts.simulate_ranks)),
        first_shard_(world_rank()), local_shards_(world_size() > 1 ? 1 : shards_),
        buckets_(make_buckets(model.params(), opts)) {
    progress_.set_event_sink(hooks.log);
    const TrainState* r = hooks.resume;
    if (!r) return;
    check_state_matches(*r, model.params(), opts.exponential_smoothing > 0);
    adam_.first_moments() = r->adam_m;
    adam_.second_moments() = r->adam_v;
    step_ = r->step;
    lr_scale_ = r->lr_scale;
    tokens_total_ = r->tokens_total;
    first_epoch_ = r->epoch;
    result_.epoch_losses = r->epoch_losses;
    result_.best_valid = r->best_valid;
    validation.tracker().restore(r->best_valid, r->stalled);
  }

  int first_epoch() const { return first_epoch_; }
  int64_t step() const { return step_; }
  Rng& rng() { return rng_; }
  TrainResult& result() { return result_; }
  /// The examples the next updates train on (hooks.epoch_examples); the batches index them.
  void set_examples(const std::vector<Example>& examples) { train_ = &examples; }

  /// One update on the epoch's next (global) batch: forward, loss and backward of this
  /// process's shards of it, the gradient sum over shards and ranks, clip, Adam, EMA, then the
  /// loss bookkeeping and the progress display.
  void update(Epoch& epoch) {
    const std::vector<int>& global = epoch.batches[epoch.next_batch];
    ++epoch.next_batch;
    ++step_;
    // Σ loss, target tokens, real and padded tokens: of this process's shards, then of all ranks.
    double totals[4] = {0, 0, 0, 0};
    compute_shards(global, totals);
    sum_over_ranks(totals);
    const double loss = totals[0] / totals[1];
    if (!std::isfinite(loss))
      throw NumericError("step " + std::to_string(step_) +
                         ": training loss is NaN or Inf; training stopped, the last saved model is kept");
    const double lr = clip_and_adam_step(model_.params(), adam_, opts_, step_, lr_scale_);
    ema_.update(model_.params(), step_);
    if (!heap_on_huge_pages_) {  // the parameters, gradients and moments are allocated now
      heap_on_huge_pages_ = true;
      back_heap_with_huge_pages();
    }
#ifndef NDEBUG
    check_replicas_identical(model_.params(), step_);
#endif
    const auto n_tokens = static_cast<int64_t>(totals[1]);
    result_.real_tokens += static_cast<int64_t>(totals[2]);
    result_.padded_tokens += static_cast<int64_t>(totals[3]);
    epoch.loss += totals[0];
    epoch.tokens += n_tokens;
    tokens_total_ += n_tokens;
    progress_.report(epoch.number, step_, loss, lr, tokens_total_);
  }

  /// One validation with the averaged weights, on rank 0 only: its log line, the best models
  /// saved, then the --lr-decay step when one is due (on every rank). Returns, on every rank,
  /// true when early stopping says training should end.
  bool validate() {
    if (!validation_.active()) return false;
    const bool stop = is_root_rank() ? validate_on_root() : false;
    const int stalled = validation_.tracker().stalled();
    // Only with --lr-decay (every rank has the same options, so all skip the collective alike),
    // and not at the validation that ends the run, where a decay would change nothing.
    if (opts_.lr_decay > 0 &&
        any_true(is_root_rank() && !stop && stalled > 0 && stalled % opts_.lr_decay_stalled == 0)) {
      lr_scale_ *= opts_.lr_decay;
      if (is_root_rank())
        spdlog::info("learning rate x{}: {} validations without a better {}; now {:.3g} x the schedule",
                     opts_.lr_decay, stalled, opts_.valid_metrics.front(), lr_scale_);
    }
    return any_true(stop);
  }

 private:
  /// validate()'s part on rank 0: the validation, its log line and the best models saved;
  /// returns whether early stopping says training should end.
  bool validate_on_root() {
    return ema_.with_average(model_.params(), [&] {
      const ValidationResult v = validation_.run(model_, step_);
      result_.best_valid = validation_.tracker().best();
      progress_.clear_line();
      spdlog::info("{}", validation_.summary(v));
      if (hooks_.log) hooks_.log(validation_event(v, validation_.tracker(), progress_.elapsed_seconds()));
      result_.validations.push_back(v);
      if (hooks_.validated) hooks_.validated(v);
      if (hooks_.save && !v.improved.empty()) {
        check_finite_weights(model_.params(), step_);
        for (const auto& m : v.improved) hooks_.save("best-" + m, result_);
      }
      return validation_.tracker().should_stop();
    });
  }

 public:

  /// Hands the state to hooks.checkpoint when one is due (every save_freq updates, or a stop
  /// was requested on any rank); returns whether a stop was requested. Checks that the
  /// replicas are still identical whenever a checkpoint is due.
  bool checkpoint_if_due(const Epoch& epoch) {
    const bool interrupt = any_true(stop_requested());
    if (interrupt || (opts_.save_freq > 0 && step_ % opts_.save_freq == 0)) {
      check_replicas_identical(model_.params(), step_);
      if (hooks_.checkpoint) {
        check_finite_weights(model_.params(), step_);
        hooks_.checkpoint(snapshot(epoch));
      }
    }
    return interrupt;
  }

  /// The result of a run stopped by request_stop() in epoch `epoch`; the model at -m is
  /// written as at the end of a run (opts.final_model), so an interrupted run leaves a usable
  /// model besides its checkpoint.
  TrainResult interrupted(int epoch) {
    progress_.clear_line();
    result_.interrupted = true;
    result_.epochs = epoch;
    set_totals();
    save_final();
    return result_;
  }

  /// The end of a run: the last validation (unless the last update had one), the totals and
  /// the final save (averaged weights).
  TrainResult finish() {
    progress_.clear_line();
    if (opts_.valid_freq <= 0 || step_ % opts_.valid_freq != 0) validate();  // (never after an early stop)
    check_replicas_identical(model_.params(), step_);
    set_totals();
    result_.last_train_loss = result_.epoch_losses.empty() ? 0 : result_.epoch_losses.back();
    save_final();
    return result_;
  }

 private:
  /// hooks.save("final") with the averaged weights.
  void save_final() {
    if (!hooks_.save) return;
    ema_.with_average(model_.params(), [&] {
      check_finite_weights(model_.params(), step_);
      hooks_.save("final", result_);
    });
  }

  TrainState snapshot(const Epoch& epoch) {
    TrainState st;
    st.step = step_;
    st.epoch = epoch.number;
    st.next_batch = static_cast<int64_t>(epoch.next_batch);
    st.rng_epoch_start = epoch.rng_epoch_start;
    std::ostringstream now;
    now << rng_;
    st.rng = now.str();
    st.epoch_loss = epoch.loss;
    st.epoch_tokens = epoch.tokens;
    st.tokens_total = tokens_total_;
    st.elapsed_seconds = progress_.elapsed_seconds();
    st.stalled = validation_.tracker().stalled();
    st.lr_scale = lr_scale_;
    st.epoch_losses = result_.epoch_losses;
    st.best_valid = validation_.tracker().best();
    st.adam_m = adam_.first_moments();
    st.adam_v = adam_.second_moments();
    st.ema = ema_.weights();
    return st;
  }

  void set_totals() {
    result_.steps = step_;
    result_.seconds = progress_.elapsed_seconds();
    result_.tgt_tokens_per_second = tokens_total_ / std::max(result_.seconds, 1e-9);
    result_.ranks = shards_;
    result_.allreduce = buckets_ ? opts_.allreduce : "fused";
    result_.allreduce_buckets = buckets_ ? buckets_->size() : 1;
    result_.gradient_bytes = model_.params().num_elements() * static_cast<int64_t>(sizeof(Scalar));
  }

  /// Sums the loss `totals` [4] and the gradients over the ranks (or this process's shards),
  /// timing the totals' allreduce (the wait for the slowest rank, a sync point) and what is
  /// left of the gradients' allreduce after it. With buckets, every one is started (zeros for
  /// an empty shard) before the totals' allreduce, so that all ranks start the same
  /// collectives in the same order, and all are complete before this returns (so none is in
  /// flight at the stop collective of checkpoint_if_due).
  void sum_over_ranks(double* totals) {
    using Clock = std::chrono::steady_clock;
    if (buckets_) buckets_->gradients_final(model_.params(), 0);
    const auto t0 = Clock::now();
    allreduce_sum(totals, 4);
    const auto t1 = Clock::now();
    if (shards_ <= 1) return;
    if (buckets_) {
      buckets_->finish(model_.params());
    } else {
      grads_.reduce_into(model_.params());
    }
    result_.allreduce_wait_seconds += std::chrono::duration<double>(t1 - t0).count();
    result_.allreduce_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
  }

  /// Forward, loss and backward of this process's shards of the global batch (sentence
  /// indices into the training examples), adding Σ loss, target, real and padded tokens to
  /// `totals`. One shard: the gradients stay in the model. Several: each shard's gradients go
  /// to grads_. Dropout masks are drawn per sentence of the global batch (nn/dropout.h: from
  /// the seed, the step and the sentence's index in `global`), so they are the same whatever
  /// the shard cut or rank count; the run's generator only orders the batches.
  void compute_shards(const std::vector<int>& global, double* totals) {
    int64_t global_tgt = 0;
    for (int i : global) global_tgt += static_cast<int64_t>((*train_)[i].tgt.size()) + 1;  // + EOS
    for (int k = first_shard_; k < first_shard_ + local_shards_; ++k) {
      const auto [first, last] = shard_range(global.size(), k, shards_);
      if (first == last) {  // fewer sentences than ranks (buckets: started by sum_over_ranks)
        model_.params().zero_grad();
        if (!buckets_) grads_.add_zero(model_.params());
        continue;
      }
      std::vector<const Example*> ptrs;
      for (size_t i = first; i < last; ++i) ptrs.push_back(&(*train_)[global[i]]);
      const Batch b = make_batch(ptrs);
      const DropoutContext dctx = DropoutContext::training(opts_.seed, step_, static_cast<int64_t>(first));
      const LossStats ls = sharded_.run(model_, b, dctx, {opts_.label_smoothing, opts_.rdrop_alpha},
                                        static_cast<double>(global_tgt), final_);
      if (shards_ > 1 && !buckets_) grads_.add(model_.params());
      totals[0] += ls.loss_sum;
      totals[1] += static_cast<double>(ls.n_tokens);
      totals[2] += static_cast<double>(int64_t(b.src.size()) + b.n_tgt_tokens());
      totals[3] += static_cast<double>(b.padded_tokens());
    }
  }

  Transformer& model_;
  const std::vector<Example>* train_;  ///< this epoch's examples
  const TrainOptions& opts_;
  const FitHooks& hooks_;
  Validation& validation_;
  Rng rng_;
  Adam adam_;
  WeightAverage ema_;
  ProgressReporter progress_;
  /// forward, loss, backward: a shard per thread (default_thread_shards)
  ShardedStep sharded_{default_thread_shards(model_.config(), omp_get_max_threads())};
  const int shards_;        ///< shards per global batch: the ranks, or TrainOptions::simulate_ranks
  const int first_shard_;   ///< this process's first shard (its rank)
  const int local_shards_;  ///< shards this process computes (1 per rank; all when simulating)
  GradientSum grads_;       ///< the shards' summed gradients (unused with one shard or buckets)
  /// The overlapped allreduce (--allreduce overlap*, mpirun jobs only), else null.
  std::unique_ptr<GradientBuckets> buckets_;
  /// Transformer::backward's hook: buckets_->gradients_final, or none.
  GradientsFinal final_ = buckets_ ? GradientsFinal([this](size_t first) {
    buckets_->gradients_final(model_.params(), first);
  }) : GradientsFinal();
  int64_t step_ = 0, tokens_total_ = 0;
  bool heap_on_huge_pages_ = false;  ///< back_heap_with_huge_pages done (after this run's first update)
  double lr_scale_ = 1;  ///< product of the --lr-decay steps so far
  int first_epoch_ = 1;
  TrainResult result_;
};

}  // namespace

void check_finite_gradients(const ParamRegistry& params, int64_t step) {
  for (const Param& p : params.params())
    if (!p.grad.allFinite())
      throw NumericError("step " + std::to_string(step) + ": gradient of " + p.name +
                         " is NaN or Inf; training stopped, the last saved model is kept");
}

void check_finite_weights(const ParamRegistry& params, int64_t step) {
  for (const Param& p : params.params())
    if (!p.value.allFinite())
      throw NumericError("step " + std::to_string(step) + ": weight " + p.name +
                         " is NaN or Inf; training stopped, the last saved model is kept");
}

void request_stop() { g_stop_requested.store(true); }
bool stop_requested() { return g_stop_requested.load(); }
void clear_stop_request() { g_stop_requested.store(false); }

TrainResult fit(Transformer& model, const std::vector<Example>& train_examples,
                const std::vector<Example>& valid_examples, const TrainOptions& opts,
                const FitHooks& hooks) {
  check_run_options(train_examples, opts);
  Validation validation(opts, valid_examples, hooks.valid_text);
  if (opts.lr_decay > 0 && !validation.active())
    spdlog::warn("--lr-decay has no effect without validation (--valid-sets and --valid-freq)");
  else if (opts.lr_decay > 0 && opts.early_stopping > 0 && opts.early_stopping <= opts.lr_decay_stalled)
    spdlog::warn("--lr-decay has no effect: early stopping after {} stalled validations comes first "
                 "(--lr-decay-stalled {})", opts.early_stopping, opts.lr_decay_stalled);
  Run run(model, train_examples, opts, hooks, validation);
  TrainResult& result = run.result();
  // Stopping limits hold after a resume too: a checkpoint already at or past them ends the run at
  // once with the final model of its weights (stopping limits may change on resume).
  bool stop = false;
  if (hooks.resume && ((opts.after_steps > 0 && run.step() >= opts.after_steps) ||
                       (opts.after_epochs > 0 && run.first_epoch() > opts.after_epochs))) {
    spdlog::info("the checkpoint at step {} (epoch {}) already reaches --after-steps {} / --after-epochs {}: "
                 "no more updates", run.step(), run.first_epoch(), opts.after_steps, opts.after_epochs);
    result.epochs = static_cast<int>(result.epoch_losses.size());
    stop = true;
  }
  for (int e = run.first_epoch(); !stop && (opts.after_epochs <= 0 || e <= opts.after_epochs); ++e) {
    const TrainState* resumed = e == run.first_epoch() ? hooks.resume : nullptr;
    const std::vector<Example>& examples = hooks.epoch_examples ? hooks.epoch_examples(e) : train_examples;
    if (examples.size() != train_examples.size()) throw ConfigError("epoch_examples: example count differs");
    run.set_examples(examples);
    Epoch epoch = begin_epoch(e, examples, opts.batch_tokens, run.rng(), resumed);
    while (epoch.next_batch < epoch.batches.size()) {
      run.update(epoch);
      if (opts.valid_freq > 0 && run.step() % opts.valid_freq == 0 && run.validate()) {
        spdlog::info("early stopping at step {}: {} validations without a better {}", run.step(),
                     opts.early_stopping, opts.valid_metrics.front());
        result.early_stopped = stop = true;
        break;
      }
      if (opts.after_steps > 0 && run.step() >= opts.after_steps) {
        stop = true;
        break;
      }
      if (opts.on_step) opts.on_step(run.step());
      if (run.checkpoint_if_due(epoch)) return run.interrupted(e);
    }
    result.epochs = e;
    result.epoch_losses.push_back(epoch.mean_loss());
  }
  return run.finish();
}

}  // namespace anuvad
