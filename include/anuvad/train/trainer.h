// `anuvad train`: SentencePiece training, then parallel teacher forcing over length-bucketed
// batches with label-smoothed cross-entropy, Adam, warm-up + inverse-sqrt decay, gradient
// clipping and periodic validation (Marian's --valid-metrics: dev cross-entropy per target
// token, perplexity, and chrF2 / BLEU of greedy translations), keeping the best model per metric
// and stopping early when the first metric stalls.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anuvad/train/batcher.h"
#include "anuvad/nn/config.h"
#include "anuvad/decode/decode.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/nn/transformer.h"

namespace anuvad {

/// Everything `anuvad train` can be told (flag names follow Marian where one exists).
struct TrainOptions {
  std::vector<std::string> train_sets{"data/train.tsv"};  ///< one TSV or an .en/.hi pair
  std::vector<std::string> valid_sets{"data/dev.tsv"};    ///< empty: no validation
  std::string model_path = "models/default.safetensors";
  std::string config_path;      ///< JSON ModelConfig; its keys override `model`
  /// Recipe the defaults come from ("tiny" or "small", see apply_preset); informational once
  /// applied (apply_preset sets the fields below), but part of --dump-config and checkpoints.
  std::string preset = "tiny";
  /// Model hyperparameters before the config file (the preset's); the vocabulary sizes in it
  /// are ignored (src_vocab_size / tgt_vocab_size below decide them).
  ModelConfig model;
  /// ModelConfig keys set by explicit flags: applied after the config file, so they win.
  nlohmann::json model_overrides = nlohmann::json::object();
  uint64_t seed = 1;
  int cpu_threads = 0;          ///< 0 = all cores
  int after_epochs = 60;        ///< stop after this many epochs (0 = no limit)
  int64_t after_steps = 0;      ///< stop after this many updates (0 = no limit)
  int batch_tokens = 2000;      ///< padded positions per batch: B · max(S, T)
  double learning_rate = 1e-3;  ///< peak learning rate, reached after warmup_steps
  int warmup_steps = 400;
  double label_smoothing = 0.1;
  double clip_norm = 1.0;       ///< 0 = no clipping
  int valid_freq = 500;         ///< validate every this many updates (and at the end)
  /// Validation metrics, any of "cross-entropy", "perplexity", "chrf" (chrF2), "bleu" (BLEU,
  /// 13a+danda); the first one decides early stopping. Each keeps its best model as
  /// <stem>.best-<metric>.safetensors.
  std::vector<std::string> valid_metrics{"cross-entropy"};
  int early_stopping = 0;       ///< stop after N validations without improvement of the first metric (0 = never)
  std::string valid_translation_output;  ///< file for the greedy translations of the last validation
  int valid_mini_batch = 32;    ///< sentences per decode_batch call when translating the validation set
  int disp_freq = 100;          ///< log a line every this many updates
  int src_vocab_size = 1000;
  int tgt_vocab_size = 1000;
  bool quiet = false;           ///< no live progress line
  /// Write a resumable checkpoint every this many updates (0 = only when interrupted), to
  /// <stem>.checkpoint.safetensors; SIGINT/SIGTERM also write one after the current update.
  int save_freq = 200;
  /// Resume from the checkpoint next to the model when there is one (`--no-resume`: start over).
  bool resume = true;
  /// Exponential moving average of the weights (Marian's --exponential-smoothing): 0 = off;
  /// d > 0 updates θ_ema ← β·θ_ema + (1 − β)·θ after every update with
  /// β = min(1 − d, (1 + t) / (10 + t)) at step t (Marian's warm-up, so that early steps do not
  /// dominate). Validation and the saved models use θ_ema; training continues on θ.
  double exponential_smoothing = 0;
  /// Called after every update with its 1-based step (progress hooks; tests use it to interrupt).
  std::function<void(int64_t step)> on_step;
};

/// Everything besides the weights that a run needs to continue bit for bit: where it is in the
/// data, the random generator, the optimizer moments and the bookkeeping of losses and
/// validations. Saved in checkpoints.
struct TrainState {
  int64_t step = 0;             ///< updates done
  int epoch = 1;                ///< epoch in progress (1-based)
  int64_t next_batch = 0;       ///< index of the next batch of that epoch
  std::string rng_epoch_start;  ///< generator state before the epoch's batches were drawn
  std::string rng;              ///< generator state now
  double epoch_loss = 0;        ///< Σ loss of the epoch so far (nats)
  int64_t epoch_tokens = 0;
  int64_t tokens_total = 0;
  double elapsed_seconds = 0;
  int stalled = 0;              ///< validations since the first metric improved
  double best_ce = 0;           ///< best validation cross-entropy (+inf before the first)
  std::vector<double> epoch_losses;
  std::map<std::string, double> best_valid;
  std::vector<Mat> adam_m, adam_v;  ///< Adam moments in registry order
  std::vector<Mat> ema;             ///< EMA weights in registry order (empty without smoothing)
  /// The scalar fields as JSON (the moments are stored as tensors).
  nlohmann::json counters_to_json() const;
  /// Reads what counters_to_json wrote; throws ConfigError naming a missing or bad field.
  void counters_from_json(const nlohmann::json& j);
};

/// Called by fit() with the state after an update, when a checkpoint is due.
using CheckpointCallback = std::function<void(const TrainState& state)>;

/// Throws NumericError "step N: gradient of NAME is NaN or Inf; ..." for the first parameter
/// (registry order) whose gradient holds a NaN or Inf; fit() calls it after every backward pass.
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

/// One validation: its step and the value of every metric in TrainOptions::valid_metrics
/// (cross-entropy in nats per target token, chrf and bleu on 0..100).
struct ValidationResult {
  int64_t step = 0;
  std::map<std::string, double> scores;
  std::vector<std::string> improved;  ///< metrics that reached a new best here
};

/// Summary of a finished run (also logged).
struct TrainResult {
  int64_t steps = 0;
  int epochs = 0;
  double seconds = 0;
  double tgt_tokens_per_second = 0;
  double last_train_loss = 0;           ///< label-smoothed loss per target token, last epoch
  double best_valid_cross_entropy = 0;  ///< nats per target token (NaN without validation)
  double best_valid_perplexity = 0;
  std::vector<double> epoch_losses;     ///< mean training loss per epoch
  std::vector<ValidationResult> validations;  ///< every validation, in order
  std::map<std::string, double> best_valid;   ///< best value of each validation metric
  bool early_stopped = false;           ///< training ended by --early-stopping
  bool interrupted = false;             ///< stopped by request_stop() (SIGINT/SIGTERM); checkpoint written
};

/// What chrf/bleu validation needs besides the tokenised examples: the target tokenizer (to
/// detokenize greedy translations) and the reference text of each validation example.
struct ValidationText {
  const Tokenizer* tgt_tokenizer = nullptr;
  std::vector<std::string> references;  ///< aligned with the validation examples
};

/// Validation metric names accepted in TrainOptions::valid_metrics.
const std::vector<std::string>& valid_metric_names();

/// Translations (the best hypothesis, detokenized with `tgt`) of the sources of `examples`,
/// decoded with decode_batch `mini_batch` sentences at a time in order of source length (less
/// padding; decode_batch results do not depend on the batch); results are in input order.
/// The default options are greedy search.
std::vector<std::string> translate_examples(const Transformer& model,
                                            const std::vector<Example>& examples,
                                            const Tokenizer& tgt, int mini_batch,
                                            const DecodeOptions& decode = {});

/// Mean cross-entropy per target token (no smoothing, no dropout) of `examples`, batched by
/// `batch_tokens`: nats per token.
double evaluate_cross_entropy(const Transformer& model, const std::vector<Example>& examples,
                              int batch_tokens);

/// Tokenises pairs into examples; pairs whose source or target has more than max_tokens
/// subwords are skipped (counted in *skipped; the indices of the pairs kept go to *kept).
std::vector<Example> make_examples(const std::vector<std::pair<std::string, std::string>>& pairs,
                                   const Tokenizer& src, const Tokenizer& tgt, int max_tokens,
                                   int* skipped, std::vector<size_t>* kept = nullptr);

/// Called by fit() when a model should be saved: "best-<metric>" (a new best value of that
/// validation metric, e.g. "best-cross-entropy", "best-chrf") or "final" (end of training).
using SaveCallback = std::function<void(const std::string& which, const TrainResult& so_far)>;

/// The training loop on already tokenised data (used by train() and by the tests): epochs of
/// bucketed batches, forward, loss, backward, NaN check, clipping, Adam. Deterministic for a
/// given opts.seed and thread count, whatever the validation metrics (validation uses no random
/// numbers). Throws NumericError naming the step and tensor when the loss or a gradient is not
/// finite, ConfigError when a validation metric is unknown or chrf/bleu (or a translation
/// output) are asked for without `valid_text`.
/// With `checkpoint`, the state is handed over every opts.save_freq updates and when a stop is
/// requested (then fit returns with result.interrupted set, skipping the final validation and
/// save). With `resume`, training continues from that state (the model must hold the weights
/// saved with it): the remaining updates are bit-identical to those of an uninterrupted run
/// with the same options and thread count.
TrainResult fit(Transformer& model, const std::vector<Example>& train_examples,
                const std::vector<Example>& valid_examples, const TrainOptions& opts,
                const SaveCallback& save = {}, const ValidationText* valid_text = nullptr,
                const CheckpointCallback& checkpoint = {}, const TrainState* resume = nullptr);

/// Path of the resumable checkpoint of a model: <dir>/<stem>.checkpoint<ext>.
std::string checkpoint_path(const std::string& model_path);

/// Path of the best model of one validation metric: <dir>/<stem>.best-<metric><ext>.
std::string best_model_path(const std::string& model_path, const std::string& metric);

/// Names accepted by apply_preset.
const std::vector<std::string>& preset_names();

/// Sets opts.preset and the recipe's fields: opts.model (depth, width, dropouts), learning
/// rate, warm-up, label smoothing and vocabulary sizes. "tiny" = the built-in defaults
/// (d_model 128, 2+2 layers, dropout 0.1, 1000/1000 pieces, lr 1e-3, warm-up 400); "small" = a
/// recipe for a few thousand pairs (the same network with dropout 0.3 and attention/FFN dropout
/// 0.1). Throws ConfigError for another name.
void apply_preset(const std::string& name, TrainOptions& opts);

/// The model config a run uses: opts.model, then the keys of opts.config_path (a JSON file),
/// then opts.model_overrides; vocabulary sizes from opts.src/tgt_vocab_size (before the
/// tokenizers are trained). Throws IoError / ConfigError naming the file or key.
ModelConfig effective_model_config(const TrainOptions& opts);

/// What `anuvad train --dump-config` prints: {"preset", "model": ModelConfig, "training": options}.
nlohmann::json effective_config_json(const TrainOptions& opts);

/// Runs a whole training job as described by `opts`; writes the final model to
/// opts.model_path and the best model of each validation metric next to it
/// (<stem>.best-<metric>.safetensors, e.g. <stem>.best-cross-entropy.safetensors).
/// Throws anuvad::Error on bad input or divergence.
TrainResult train(const TrainOptions& opts);

}  // namespace anuvad
