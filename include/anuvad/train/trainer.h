// `anuvad train`: SentencePiece training, then parallel teacher forcing over length-bucketed
// batches with label-smoothed cross-entropy, Adam, warm-up + inverse-sqrt decay, gradient
// clipping and periodic validation (Marian's --valid-metrics: dev cross-entropy per target
// token, perplexity, and chrF2 / BLEU of greedy translations), keeping the best model per metric
// and stopping early when the first metric stalls. The parts: options.h (what a run is told),
// validator.h (validation and early stopping), progress.h (progress display), checkpoint.h
// (resumable checkpoints); fit() is the update loop, train() the whole job.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/nn/batch.h"
#include "anuvad/nn/param.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/train/batcher.h"
#include "anuvad/train/checkpoint.h"
#include "anuvad/train/options.h"
#include "anuvad/train/progress.h"
#include "anuvad/train/validator.h"

namespace anuvad {

/// Throws NumericError "step N: gradient of NAME is NaN or Inf; ..." for the first parameter
/// (registry order) whose gradient holds a NaN or Inf; fit() calls it when an update's gradient
/// norm (gradient_norm, train/adam.h) is NaN or Inf, before the Adam step.
void check_finite_gradients(const ParamRegistry& params, int64_t step);

/// Throws NumericError "step N: weight NAME is NaN or Inf; ..." for the first parameter whose
/// value is not finite; fit() calls it before handing weights to a checkpoint or save, so a
/// diverged state never replaces the last good file.
void check_finite_weights(const ParamRegistry& params, int64_t step);

/// Asks a running fit() to stop after its current update (async-signal-safe: sets a flag).
void request_stop();
/// True once request_stop() was called (until clear_stop_request()).
bool stop_requested();
void clear_stop_request();

/// Summary of a finished run (also logged).
struct TrainResult {
  int64_t steps = 0;
  int epochs = 0;
  double seconds = 0;
  double tgt_tokens_per_second = 0;
  double last_train_loss = 0;           ///< label-smoothed loss per target token, last epoch
  std::vector<double> epoch_losses;     ///< mean training loss per epoch
  std::vector<ValidationResult> validations;  ///< every validation, in order
  /// Best value of each validation metric (the best cross-entropy: best_cross_entropy(best_valid)).
  std::map<std::string, double> best_valid;
  bool early_stopped = false;           ///< training ended by --early-stopping
  bool interrupted = false;             ///< stopped by request_stop() (SIGINT/SIGTERM/SIGHUP); checkpoint written
  int64_t real_tokens = 0;    ///< source + target tokens of this run's updates (what is computed)
  int64_t padded_tokens = 0;  ///< the same batches in a right-padded [B·T] layout (what padding would cost)
  int ranks = 1;                 ///< shards per update: mpirun ranks or TrainOptions::simulate_ranks
  /// Time in the gradient allreduce after the update's loss totals were summed (with ranks > 1;
  /// with an overlapped allreduce only what the backward pass did not hide), s.
  double allreduce_seconds = 0;
  /// Time in the loss totals' allreduce after the backward pass: waiting for the slowest rank
  /// (and, with an overlapped allreduce, moving buckets meanwhile), s.
  double allreduce_wait_seconds = 0;
  std::string allreduce = "fused";  ///< TrainOptions::allreduce of an mpirun job's run
  size_t allreduce_buckets = 1;  ///< buckets of one update's gradients (1 = fused)
  int64_t gradient_bytes = 0;    ///< bytes of one update's gradients (what one allreduce sums)
};

/// Called by fit() when a model should be saved: "best-<metric>" (a new best value of that
/// validation metric, e.g. "best-cross-entropy", "best-chrf") or "final" (end of training).
using SaveCallback = std::function<void(const std::string& which, const TrainResult& so_far)>;

/// Called by fit() with the state after an update, when a checkpoint is due.
using CheckpointCallback = std::function<void(const TrainState& state)>;

/// What fit() needs besides the data and the options, all optional; brace-initialisable in
/// field order ({save, &valid_text, checkpoint, &resume_state, log}).
struct FitHooks {
  FitHooks(SaveCallback save_ = {}, const ValidationText* valid_text_ = nullptr,
           CheckpointCallback checkpoint_ = {}, const TrainState* resume_ = nullptr,
           TrainingEventSink log_ = {})
      : save(std::move(save_)), valid_text(valid_text_), checkpoint(std::move(checkpoint_)), resume(resume_),
        log(std::move(log_)) {}
  SaveCallback save;                 ///< best and final models (none: nothing saved)
  const ValidationText* valid_text;  ///< needed for chrf/bleu and translation output
  /// Handed the state every opts.save_freq updates and when a stop is requested.
  CheckpointCallback checkpoint;
  /// A checkpoint's state to continue from (the model must hold the weights saved with it).
  const TrainState* resume;
  /// The "train" (every opts.disp_freq updates) and "valid" events of the structured training
  /// log (train/training_log.h).
  TrainingEventSink log;
  /// When set, the training examples of each epoch (1-based), called at its start (also for
  /// the epoch a resumed run continues): same count and order as fit()'s train_examples, e.g.
  /// re-segmented by subword sampling (train/subword_sampling.h). Must return the same
  /// examples for the same epoch, so that a resumed run repeats it.
  std::function<const std::vector<Example>&(int epoch)> epoch_examples;
  /// Called (on rank 0) after every validation with its result, while the model holds the
  /// weights that were validated (the averaged ones under exponential smoothing).
  std::function<void(const ValidationResult& v)> validated;
};

/// The training loop on already tokenised data (used by train() and by the tests): epochs of
/// bucketed batches, forward, loss, backward, NaN check, clipping, Adam, EMA; validation every
/// opts.valid_freq updates and at the end. Deterministic for a given opts.seed and thread
/// count, whatever the validation metrics (validation uses no random numbers). Throws
/// NumericError naming the step and tensor when the loss or a gradient is not finite,
/// DataError without training examples, ConfigError when a validation metric is unknown or
/// chrf/bleu (or a translation output) are asked for without hooks.valid_text.
/// A requested stop (request_stop) hands the state to hooks.checkpoint and returns with
/// result.interrupted set, skipping the final validation but not the final save (hooks.save
/// "final", so -m holds a usable model, see TrainOptions::final_model). With hooks.resume the
/// remaining updates are bit-identical to those of an uninterrupted run with the same options
/// and thread count; when hooks.resume is already at or past opts.after_steps (or past
/// opts.after_epochs) no update is made: the final validation and save follow at once.
TrainResult fit(Transformer& model, const std::vector<Example>& train_examples,
                const std::vector<Example>& valid_examples, const TrainOptions& opts,
                const FitHooks& hooks = {});

/// Path of the best model of one validation metric: <dir>/<stem>.best-<metric><ext>.
std::string best_model_path(const std::string& model_path, const std::string& metric);

/// Runs a whole training job as described by `opts` (from resolve_train_options): trains the
/// tokenizers (or resumes from the checkpoint next to the model), writes the final model to
/// opts.model_path and the best model of each validation metric next to it
/// (<stem>.best-<metric>.safetensors, e.g. <stem>.best-cross-entropy.safetensors).
/// Throws anuvad::Error on bad input or divergence.
TrainResult train(const TrainOptions& opts);

}  // namespace anuvad
