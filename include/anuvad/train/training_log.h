// The structured training log (docs/training-log.md): one JSON object per line (JSON Lines) for
// each event of a run: "start" (the resolved config), "train" (every --disp-freq updates, with
// the human log line), "valid" (every validation), "end" (totals) and "error" (a run stopped by
// an error). Written to --log-json FILE or <stem>.log.jsonl next to the model.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "anuvad/nn/config.h"
#include "anuvad/train/options.h"
#include "anuvad/train/trainer.h"
#include "anuvad/train/validator.h"

namespace anuvad {

/// The default log file of a run: <dir>/<stem>.log.jsonl for <dir>/<stem>.safetensors.
std::string training_log_path(const std::string& model_path);

/// An open JSON Lines log file.
class TrainingLog {
 public:
  /// Opens `path`: emptied for a new run (`resumed_from_step` 0); for a run resumed from a
  /// checkpoint at that step, the earlier lines are kept up to it and the new ones appended, so
  /// steps never go back in the file (events of updates after the checkpoint, which a SIGKILL
  /// leaves behind, and a half-written last line are dropped; the file is rewritten through a
  /// temporary file and a rename). Throws IoError naming the file when it cannot be written.
  TrainingLog(const std::string& path, int64_t resumed_from_step);
  /// Writes `event` as one line and flushes it. Write errors are ignored, as for the human log:
  /// a full disk must not stop training.
  void write(const nlohmann::json& event);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

/// What a run is, for the "start" event.
struct RunDescription {
  const TrainOptions* opts = nullptr;
  ModelConfig model;        ///< with the vocabulary sizes of the trained or resumed tokenizers
  int64_t parameters = 0;
  int threads = 0;
  size_t train_examples = 0, valid_examples = 0;
  int64_t resumed_from_step = 0;  ///< 0 for a new run
};

/// {"event": "start", "time": UTC ISO 8601, "resumed_from_step", "config": {"preset", "model",
/// "training"} (effective_config_json with `d.model`), "parameters", "threads",
/// "train_examples", "valid_examples"}.
nlohmann::json start_event(const RunDescription& d);

/// {"event": "valid", "step", "elapsed_s", "metrics": {metric: value} (the perplexity added when
/// only the cross-entropy is listed, as on the log line), "improved": [...], "best": {metric:
/// best value so far}, "stalled", "early_stopping"}.
nlohmann::json validation_event(const ValidationResult& v, const ValidationTracker& tracker,
                                double elapsed_s);

/// {"event": "end", "steps", "epochs", "elapsed_s", "tgt_tokens_per_s", "last_train_loss",
/// "epoch_losses", "best", "early_stopped", "interrupted", "model", "checkpoint"}: `model` is
/// the model file written (an interrupted run writes it too), "checkpoint" the `checkpoint`
/// path for an interrupted run and null otherwise.
nlohmann::json end_event(const TrainResult& r, const std::string& model, const std::string& checkpoint);

}  // namespace anuvad
