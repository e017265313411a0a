// Strict JSON reading (duplicate keys refused).
#include "anuvad/io/json.h"

#include "anuvad/core/error.h"

namespace anuvad {

void DuplicateKeyFinder::on_event(int depth, nlohmann::json::parse_event_t event,
                                  const nlohmann::json& parsed) {
  using Event = nlohmann::json::parse_event_t;
  if (event == Event::object_start) {
    open_objects_.emplace_back();
  } else if (event == Event::object_end && !open_objects_.empty()) {
    open_objects_.pop_back();
  } else if (event == Event::key && !open_objects_.empty() && duplicate_.empty() &&
             !open_objects_.back().insert(parsed.get<std::string>()).second) {
    duplicate_ = parsed.get<std::string>();
    duplicate_depth_ = depth;
  }
}

nlohmann::json parse_json_unique_keys(const std::string& text, const std::string& where) {
  DuplicateKeyFinder finder;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event,
                                        nlohmann::json& parsed) {
      finder.on_event(depth, event, parsed);
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(where + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!finder.duplicate().empty()) throw ConfigError(where + ": duplicate key " + finder.duplicate());
  return j;
}

}  // namespace anuvad
