// The structured training log: the file and the events fit() and train() write to it.
#include "anuvad/train/training_log.h"

#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>

#include "anuvad/core/error.h"

namespace anuvad {

namespace {

/// The current time as UTC ISO 8601 ("2026-11-30T15:04:05Z").
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Rewrites the log `path` (when it exists) without the events of steps after `step` and
/// without lines that are not JSON (a write cut short). Throws IoError naming the file.
void keep_events_up_to(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_discarded() || !event.is_object()) continue;
    if (event.contains("step") && event["step"].is_number() && event["step"].get<int64_t>() > step) continue;
    kept += line + '\n';
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kept;
    if (!out.flush()) throw IoError(tmp + ": cannot write the training log");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError(path + ": cannot replace the training log: " + ec.message());
}

}  // namespace

std::string training_log_path(const std::string& model_path) {
  const std::filesystem::path p(model_path);
  return (p.parent_path() / (p.stem().string() + ".log.jsonl")).string();
}

TrainingLog::TrainingLog(const std::string& path, int64_t resumed_from_step) : path_(path) {
  if (resumed_from_step > 0) keep_events_up_to(path, resumed_from_step);
  out_.open(path, std::ios::binary | (resumed_from_step > 0 ? std::ios::app : std::ios::trunc));
  if (!out_) throw IoError(path + ": cannot open the training log (--log-json) for writing");
}

void TrainingLog::write(const nlohmann::json& event) {
  // Invalid UTF-8 (a corpus path) is replaced rather than thrown on.
  out_ << event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  out_.clear();  // a failed write leaves the stream usable for the next event
}

nlohmann::json start_event(const RunDescription& d) {
  nlohmann::json config = effective_config_json(*d.opts);
  config["model"] = d.model.to_json();
  return {{"event", "start"},
          {"time", utc_now()},
          {"resumed_from_step", d.resumed_from_step},
          {"config", config},
          {"parameters", d.parameters},
          {"threads", d.threads},
          {"train_examples", d.train_examples},
          {"valid_examples", d.valid_examples}};
}

nlohmann::json validation_event(const ValidationResult& v, const ValidationTracker& tracker,
                                double elapsed_s) {
  nlohmann::json metrics(v.scores);
  if (v.scores.count("cross-entropy") && !v.scores.count("perplexity"))
    metrics["perplexity"] = std::exp(v.scores.at("cross-entropy"));
  return {{"event", "valid"},
          {"step", v.step},
          {"elapsed_s", elapsed_s},
          {"metrics", metrics},
          {"improved", v.improved},
          {"best", tracker.best()},
          {"stalled", tracker.stalled()},
          {"early_stopping", tracker.early_stopping()}};
}

nlohmann::json end_event(const TrainResult& r, const std::string& model, const std::string& checkpoint) {
  return {{"event", "end"},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"elapsed_s", r.seconds},
          {"tgt_tokens_per_s", r.tgt_tokens_per_second},
          {"last_train_loss", r.last_train_loss},
          {"epoch_losses", r.epoch_losses},
          {"best", r.best_valid},
          {"early_stopped", r.early_stopped},
          {"interrupted", r.interrupted},
          {"model", model},
          {"checkpoint", r.interrupted ? nlohmann::json(checkpoint) : nlohmann::json()}};
}

}  // namespace anuvad
