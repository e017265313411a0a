// Resumable training checkpoints: <stem>.checkpoint.safetensors next to the model, a model file
// (weights, tokenizers, config) plus the optimizer moments, the EMA weights and the position
// and bookkeeping of the run (TrainState). The format is described in docs/model-format.md,
// section "Training checkpoints".
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/text/tokenizer.h"

namespace anuvad {

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
  double lr_scale = 1;          ///< product of the --lr-decay steps so far (1 in older checkpoints)
  std::vector<double> epoch_losses;
  /// Best value of each validation metric so far (the only record of the best cross-entropy:
  /// see best_cross_entropy in train/validator.h).
  std::map<std::string, double> best_valid;
  std::vector<Mat> adam_m, adam_v;  ///< Adam moments in registry order
  std::vector<Mat> ema;             ///< EMA weights in registry order (empty without smoothing)
  /// The scalar fields as JSON (the moments are stored as tensors); also writes "best_ce", the
  /// best cross-entropy derived from best_valid (null when there is none), for older readers.
  nlohmann::json counters_to_json() const;
  /// Reads what counters_to_json wrote ("best_ce" is not needed); throws ConfigError naming a
  /// missing or bad field.
  void counters_from_json(const nlohmann::json& j);
};

/// The tensors a checkpoint holds per parameter besides its weight.
enum class StateTensor {
  kAdamFirstMoment,   ///< Adam's m (on disk "adam.m.<parameter name>")
  kAdamSecondMoment,  ///< Adam's v (on disk "adam.v.<parameter name>")
  kEma,               ///< EMA weight (on disk "ema.<parameter name>"), only with smoothing
};

/// On-disk name of the `kind` tensor of parameter `param`: "adam.m." / "adam.v." / "ema." + param.
std::string state_tensor_name(StateTensor kind, const std::string& param);

/// A matrix as an F32 safetensors tensor of the given shape (row-major, little endian;
/// Scalar → float, exact in the float build).
RawTensor pack_f32(const Mat& m, const std::vector<int64_t>& shape);

/// An F32 tensor as a rows × cols matrix. Throws ModelFileError "NAME missing or misshapen"
/// (with `what` naming it) when the dtype is not F32 or the byte count is not rows · cols · 4.
Mat unpack_f32(const RawTensor& t, Index rows, Index cols, const std::string& what);

/// Path of the resumable checkpoint of a model: <dir>/<stem>.checkpoint<ext>.
std::string checkpoint_path(const std::string& model_path);

/// Content hash of the file `path`: 64-bit FNV-1a (offset basis 14695981039346656037, prime
/// 1099511628211) over its bytes, as "fnv1a64:" + 16 lowercase hex digits. Stable across
/// platforms and builds. Throws IoError when the file cannot be read.
std::string file_content_hash(const std::string& path);

/// file_content_hash of every file of `paths`, as a JSON object path → hash.
nlohmann::json corpus_hashes(const std::vector<std::string>& paths);

/// Writes a checkpoint atomically to `path`: the model file of `model` and the tokenizers, the
/// metadata "training_options" (= `fingerprint`, see resume_fingerprint), "training_state"
/// (= state.counters_to_json()), "threads" and, when given, "corpus_hashes" (see
/// corpus_hashes), and the state tensors of every parameter (EMA only when state.ema is not
/// empty). Throws IoError.
void write_checkpoint(const std::string& path, const Transformer& model, const Tokenizer& src,
                      const Tokenizer& tgt, const nlohmann::json& fingerprint,
                      const TrainState& state, const nlohmann::json& hashes = nullptr);

/// A checkpoint as read: the model with its tokenizers, and the state to continue from.
struct Checkpoint {
  TranslationModel model;
  TrainState state;
  /// The "corpus_hashes" metadata (path → hash); null in checkpoints written before it existed.
  nlohmann::json corpus_hashes;
};

/// Throws DataError "FILE: changed since the checkpoint CKPT was written (...); restore it or
/// pass --no-resume to start over" for the first file of `current` whose hash differs in
/// `saved` (path → hash, as corpus_hashes). A null `saved` (an older checkpoint) is not checked.
void check_corpus_unchanged(const nlohmann::json& saved, const nlohmann::json& current,
                            const std::string& checkpoint);

/// Reads a checkpoint written by write_checkpoint and checks that it was written with the
/// options of `fingerprint` (every key equal). Warns when it was written with another thread
/// count. Reads the EMA tensors only when `with_ema`. Throws ModelFileError naming the file and
/// the missing metadata, state field or tensor; ConfigError "PATH: checkpoint was written with
/// another KEY (...)" naming the first differing option.
Checkpoint read_checkpoint(const std::string& path, const nlohmann::json& fingerprint, bool with_ema);

/// Throws ConfigError "checkpoint: ..." when the Adam moments (and, with `with_ema`, the EMA
/// weights) of `state` do not have one matrix of the right shape per parameter of `params`.
void check_state_matches(const TrainState& state, const ParamRegistry& params, bool with_ema);

}  // namespace anuvad
