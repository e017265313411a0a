// The options of a training run and their resolution: preset → -c FILE → explicit flags
// (src/cli/cmd_train.cpp parses the flags into TrainArgs, resolve_train_options does the rest).
// One table of TrainOptions fields (train_option_fields) drives `--dump-config` and the resume
// fingerprint, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/nn/config.h"

namespace anuvad {

/// Everything `anuvad train` can be told (flag names follow Marian where one exists).
struct TrainOptions {
  std::vector<std::string> train_sets{"data/train.tsv"};  ///< one TSV or an .en/.hi pair
  std::vector<std::string> valid_sets{"data/dev.tsv"};    ///< empty: no validation
  std::string model_path = "models/default.safetensors";
  std::string config_path;      ///< JSON ModelConfig applied by resolve_train_options (informational after)
  /// Recipe the defaults come from ("tiny" or "small", see apply_preset); informational once
  /// applied (apply_preset sets the fields below), but part of --dump-config and checkpoints.
  std::string preset = "tiny";
  /// The model config of the run before its tokenizers are trained: the preset's, then the
  /// keys of config_path, then the model flags (resolve_train_options), with the vocabulary
  /// sizes src_vocab_size / tgt_vocab_size below. train() uses it as it is.
  ModelConfig model;
  uint64_t seed = 1;
  int cpu_threads = 0;          ///< 0 = all cores
  int after_epochs = 60;        ///< stop after this many epochs (0 = no limit)
  int64_t after_steps = 0;      ///< stop after this many updates (0 = no limit)
  int batch_tokens = 2000;      ///< padded positions per batch: B · max(S, T)
  double learning_rate = 1e-3;  ///< peak learning rate, reached after warmup_steps
  int warmup_steps = 400;
  double label_smoothing = 0.1;
  /// R-Drop's weight α (Liang et al. 2021; nn/loss.h rdrop_loss): > 0 runs every batch twice
  /// with independent dropout masks and adds α · their symmetric KL divergence per token to
  /// the loss (twice the compute per update). 0 = off.
  double rdrop_alpha = 0;
  /// Learning-rate decay on a plateau (Marian's --lr-decay-strategy stalled, fairseq's
  /// reduce_lr_on_plateau): after every lr_decay_stalled validations in a row without a better
  /// first metric, the schedule's rate is multiplied by lr_decay, in (0, 1). 0 = off.
  double lr_decay = 0;
  int lr_decay_stalled = 4;     ///< validations without a better first metric per decay (>= 1)
  double clip_norm = 1.0;       ///< 0 = no clipping
  int valid_freq = 500;         ///< validate every this many updates (and at the end)
  /// Validation metrics, any of "cross-entropy", "perplexity", "chrf" (chrF2), "bleu" (BLEU,
  /// 13a+danda); the first one decides early stopping. Each keeps its best model as
  /// <stem>.best-<metric>.safetensors.
  std::vector<std::string> valid_metrics{"cross-entropy"};
  int early_stopping = 0;       ///< stop after N validations without improvement of the first metric (0 = never)
  /// The weights written to model_path when training ends or is interrupted: "last" (the
  /// weights of the last update, averaged when exponential_smoothing is on), "best" (a copy
  /// of <stem>.best-<first valid metric>.safetensors) or "average" (the element-wise mean of
  /// the average_best best models of the first valid metric, kept as
  /// <stem>.best-<metric>.<rank>.safetensors; train/best_models.h); "best" and "average" give
  /// the last weights while no validation has been made, or without validation.
  std::string final_model = "last";
  /// How many of the best models (by the first valid metric) --final-model average keeps and
  /// averages (fewer when fewer validations were made). Unused with "last" and "best".
  int average_best = 4;
  std::string valid_translation_output;  ///< file for the greedy translations of the last validation
  int valid_mini_batch = 32;    ///< sentences per beam_search call when translating the validation set
  int disp_freq = 100;          ///< log a line every this many updates
  int src_vocab_size = 1000;
  int tgt_vocab_size = 1000;
  /// Subword regularisation (Kudo 2018; Marian's --sentencepiece-alphas): {A} for both sides
  /// or {A_SRC, A_TGT}; a side with alpha > 0 has its training sentences re-segmented every
  /// epoch by sampling from its unigram model with that smoothing (train/subword_sampling.h),
  /// deterministically from (seed, epoch). 0 = the one best segmentation (off). Validation,
  /// translation and scoring never sample.
  std::vector<double> sentencepiece_alphas{0.0};
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
  /// The structured training log (docs/training-log.md); "" = <stem>.log.jsonl next to the model.
  std::string log_json;
  /// Data parallelism in one process (train/replicas.h): N > 1 cuts every batch into N shards
  /// and sums their gradients in order, as N mpirun ranks would (their dropout masks included);
  /// 0 or 1 = one shard per rank. Not part of the resume fingerprint: a checkpoint resumes with
  /// any number of ranks. Refused under mpirun with more than one rank.
  int simulate_ranks = 0;
  /// How an mpirun job sums the gradients over the ranks (train/replicas.h AllreduceMode):
  /// "fused" (one allreduce after the backward pass), "overlap" (buckets sent during the
  /// backward pass, MPI polled after every layer) or "overlap-lazy" (not polled). The sums, and
  /// so the weights, are the same; only the time differs (overlap by default: 268 → 73 ms of
  /// allreduce per update on the small benchmark model, tests/bench/README.md). Not in the
  /// fingerprint.
  std::string allreduce = "overlap";
  /// Size of one bucket of the overlapped allreduce, MB (10^6 bytes of gradients; a parameter
  /// is never split). Must be > 0.
  double allreduce_bucket_mb = 2;
  /// Called after every update with its 1-based step (progress hooks; tests use it to interrupt).
  std::function<void(int64_t step)> on_step;
  /// Called with every event of the structured log after it is written and flushed, with the
  /// log's path (`anuvad train` redraws the report page from it at "valid", "end" and "error").
  /// An exception it throws stops training like any error of the run.
  std::function<void(const nlohmann::json& event, const std::string& log_path)> on_log_event;
};

/// Where a TrainOptions field shows besides the run itself (bit flags of TrainOptionField::use).
enum TrainOptionUse : unsigned {
  kDumpConfig = 1u,   ///< in the "training" object of `anuvad train --dump-config`
  kFingerprint = 2u,  ///< in the resume fingerprint: a checkpoint resumes only with the same value
  /// with kFingerprint: only when it differs from a default TrainOptions' value, for options
  /// added after checkpoints existed (those, written without the key, still resume at the default)
  kFingerprintUnlessDefault = 4u,
};

/// One row of the TrainOptions field table: its JSON key (the field name), where it is used and
/// how to read or write it as JSON.
struct TrainOptionField {
  const char* key;
  unsigned use;  ///< TrainOptionUse bits
  nlohmann::json (*get)(const TrainOptions& opts);
  /// Throws nlohmann::json::exception when `value` has the wrong type.
  void (*set)(TrainOptions& opts, const nlohmann::json& value);
};

/// The table of TrainOptions fields that have a JSON form (everything but `model`, which is a
/// ModelConfig of its own, and the callback `on_step`), in declaration order.
const std::vector<TrainOptionField>& train_option_fields();

/// The row of `key`; throws ConfigError for a key that is not in the table.
const TrainOptionField& train_option_field(const std::string& key);

/// Names accepted by apply_preset.
const std::vector<std::string>& preset_names();

/// Sets opts.preset and the recipe's fields: opts.model (depth, width, dropouts), learning
/// rate, warm-up, label smoothing, vocabulary sizes and the stopping rule (after_epochs,
/// valid_freq, valid_metrics, early_stopping, final_model). "tiny" = the bundled corpus's recipe
/// (d_model 128, 2+2 layers, dropout 0.2, attention/FFN dropout 0.1, 1000/1000 pieces, lr 1e-3,
/// warm-up 400; 120 epochs, chrF and cross-entropy every 100 updates, the best-chrF weights, or
/// the last ones without a validation set); "small" = a recipe for a few thousand
/// pairs that finishes by itself (the same network at d_model 256, dropout 0.3 and attention/FFN dropout
/// 0.1, subword sampling at alpha 0.5 (Kudo 2018); chrF validation every 300 updates, early stopping after 8 validations without a better
/// chrF, an epoch cap of 2000, the best-chrF weights at model_path). Throws ConfigError for
/// another name.
void apply_preset(const std::string& name, TrainOptions& opts);

/// `anuvad train`'s command line before resolution (filled by src/cli/cmd_train.cpp).
struct TrainArgs {
  std::string preset = "tiny";  ///< --preset
  /// Every TrainOptions flag as parsed (TrainOptions defaults where a flag is absent).
  TrainOptions options;
  /// train_option_fields keys of the options the preset sets (learning_rate, warmup_steps,
  /// label_smoothing, src/tgt_vocab_size) that were given explicitly: they win over the preset.
  std::vector<std::string> explicit_options;
  /// ModelConfig keys given as flags (--dim-emb → "d_model", ...): they win over the preset
  /// and the -c FILE.
  nlohmann::json model_flags = nlohmann::json::object();
  /// --exponential-smoothing as given when present: "" or "true" = Marian's default 1e-4.
  std::optional<std::string> exponential_smoothing;
};

/// The sampling smoothing of the source and target sides from opts.sentencepiece_alphas ({A}:
/// both A). Throws ConfigError for more than two values or a value that is negative or not
/// finite.
std::pair<double, double> sentencepiece_alphas(const TrainOptions& opts);

/// The options of a run: args.options with the preset applied (apply_preset), the explicit
/// options put back, and opts.model resolved as preset model → keys of options.config_path (a
/// JSON ModelConfig file) → args.model_flags, with the vocabulary sizes of the options; then
/// validated. Throws IoError / ConfigError naming the file, flag or key.
TrainOptions resolve_train_options(const TrainArgs& args);

/// The "training" object of --dump-config: every kDumpConfig field of train_option_fields.
nlohmann::json training_options_json(const TrainOptions& opts);

/// What `anuvad train --dump-config` prints: {"preset", "model": opts.model, "training"}.
nlohmann::json effective_config_json(const TrainOptions& opts);

/// The options a resumed run must share with the run that wrote the checkpoint: every
/// kFingerprint field of train_option_fields (a kFingerprintUnlessDefault one only when not at
/// its default) plus "config" (opts.model as JSON). Stored in a
/// checkpoint's "training_options" metadata (docs/model-format.md).
nlohmann::json resume_fingerprint(const TrainOptions& opts);

}  // namespace anuvad
