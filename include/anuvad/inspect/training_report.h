// The training report: a self-contained HTML page drawn from the structured training log
// (docs/training-log.md, one JSON object per line) with the training loss, the dev
// cross-entropy, chrF and BLEU (the best marked), the learning rate and the throughput per
// update, the resolved config and the final figures (docs/training-log.md "Report page").
// Written by `anuvad report --from LOG --html FILE` and by `anuvad train` at every validation.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace anuvad {

/// Checks that `event` is an object of the training log with the fields the page draws, of the
/// right types: every event an "event" string; "start": "resumed_from_step" integer, "config"
/// object; "train": "step" integer, "loss", "learning_rate", "tgt_tokens_per_s", "elapsed_s"
/// numbers or null (a NaN is written as null); "valid": "step" integer, "metrics" object of
/// numbers or nulls; "end": "steps" integer; "error": "message" string. Other fields are shown
/// as they are, unknown events are kept and not drawn. Throws DataError starting with `where`
/// ("FILE:LINE") and naming the field.
void check_training_log_event(const nlohmann::json& event, const std::string& where);

/// Reads a training log: one event per non-blank line, in file order, each checked with
/// check_training_log_event. A last line that is not JSON and has no final newline is a write
/// in progress (or cut short by a kill; `anuvad train` drops it when it resumes) and is
/// skipped; any other line that is not JSON is an error. Throws IoError "FILE: cannot open: ..."
/// and DataError "FILE:LINE: invalid JSON: ..." / "FILE:LINE: ..." (check_training_log_event) /
/// "FILE: no events (empty training log)".
std::vector<nlohmann::json> read_training_log(const std::string& path);

/// The page: inline CSS and JavaScript, the events embedded as JSON in
/// <script type="application/json" id="report-data"> (every '<' escaped), no network access;
/// `log_name` (the log's path) is shown as the page's title. Charts are drawn by the page's
/// script. Throws DataError naming the event ("event N") when an event fails
/// check_training_log_event. Strings that are not valid UTF-8 get U+FFFD.
std::string render_training_report_html(const std::vector<nlohmann::json>& events,
                                         const std::string& log_name);

/// render_training_report_html written atomically (temporary file, rename) to `path`. Throws
/// IoError naming `path`, DataError as render_training_report_html.
void write_training_report_html(const std::string& path,
                                const std::vector<nlohmann::json>& events,
                                const std::string& log_name);

/// Where `anuvad train` writes the page of the log `log_path`: next to it, the file name without
/// ".jsonl" and then ".log" + ".report.html" (models/default.log.jsonl →
/// models/default.report.html, runs/a.jsonl → runs/a.report.html).
std::string training_report_path(const std::string& log_path);

}  // namespace anuvad
