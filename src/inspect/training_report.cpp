// The training report page (training_report.h): reading and checking the log, rendering the page.
#include "anuvad/inspect/training_report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "anuvad/core/error.h"
#include "anuvad/inspect/html_page.h"

namespace anuvad {

namespace {

using nlohmann::json;

enum class Kind { kInteger, kNumberOrNull, kObject, kString };

/// A field the page relies on in events of one kind.
struct RequiredField {
  const char* event;
  const char* name;
  Kind kind;
};

constexpr RequiredField kRequired[] = {
    {"start", "resumed_from_step", Kind::kInteger}, {"start", "config", Kind::kObject},
    {"train", "step", Kind::kInteger},              {"train", "loss", Kind::kNumberOrNull},
    {"train", "learning_rate", Kind::kNumberOrNull}, {"train", "tgt_tokens_per_s", Kind::kNumberOrNull},
    {"train", "elapsed_s", Kind::kNumberOrNull},    {"valid", "step", Kind::kInteger},
    {"valid", "metrics", Kind::kObject},            {"end", "steps", Kind::kInteger},
    {"error", "message", Kind::kString},
};

bool has_kind(const json& v, Kind kind) {
  switch (kind) {
    case Kind::kInteger: return v.is_number_integer();
    case Kind::kNumberOrNull: return v.is_number() || v.is_null();
    case Kind::kObject: return v.is_object();
    case Kind::kString: return v.is_string();
  }
  return false;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kInteger: return "an integer";
    case Kind::kNumberOrNull: return "a number or null";
    case Kind::kObject: return "an object";
    case Kind::kString: return "a string";
  }
  return "?";
}

// The page: kPageHead, the JSON document, kPageTail, generated at build time from
// src/inspect/page/report.{html,css,js} by src/inspect/page/embed_page.cmake.
#include "report_page_embedded.h"

}  // namespace

void check_training_log_event(const json& event, const std::string& where) {
  if (!event.is_object() || !event.contains("event") || !event["event"].is_string())
    throw DataError(where + ": not a training log event (an object with an \"event\" string)");
  const std::string type = event["event"].get<std::string>();
  for (const RequiredField& f : kRequired) {
    if (type != f.event) continue;
    if (!event.contains(f.name) || !has_kind(event[f.name], f.kind))
      throw DataError(where + ": \"" + type + "\" event: \"" + f.name + "\" must be " +
                      kind_name(f.kind));
  }
  if (type == "valid")
    for (const auto& [metric, value] : event["metrics"].items())
      if (!value.is_number() && !value.is_null())
        throw DataError(where + ": \"valid\" event: metric \"" + metric +
                        "\" must be a number or null");
}

std::vector<json> read_training_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw IoError(path + ": read failed");
  const std::string text = buf.str();
  std::vector<json> events;
  size_t begin = 0;
  for (size_t line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) end = text.size();
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
    const std::string where = path + ":" + std::to_string(line);
    json event;
    try {
      event = json::parse(row);
    } catch (const json::parse_error& e) {
      if (last_unterminated) break;  // a line being written, or cut short by a kill
      throw DataError(where + ": invalid JSON: " + json_error_text(e));
    }
    check_training_log_event(event, where);
    events.push_back(std::move(event));
  }
  if (events.empty()) throw DataError(path + ": no events (empty training log)");
  return events;
}

std::string render_training_report_html(const std::vector<json>& events,
                                        const std::string& log_name) {
  json doc = {{"log", log_name}, {"events", json::array()}};
  for (size_t n = 0; n < events.size(); ++n) {
    check_training_log_event(events[n], "event " + std::to_string(n + 1));
    doc["events"].push_back(events[n]);
  }
  const std::string text = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  return page_with_json(kPageHead, text, kPageTail);
}

void write_training_report_html(const std::string& path, const std::vector<json>& events,
                                const std::string& log_name) {
  write_atomically(path, render_training_report_html(events, log_name));
}

std::string training_report_path(const std::string& log_path) {
  const std::filesystem::path p(log_path);
  std::string name = p.filename().string();
  for (const std::string suffix : {".jsonl", ".log"})
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
  return (p.parent_path() / (name + ".report.html")).string();
}

}  // namespace anuvad
