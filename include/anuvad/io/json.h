// Strict JSON reading: nlohmann/json keeps the last of duplicate keys silently, anuvad refuses
// them (a config file or model header that says one thing twice is ambiguous).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace anuvad {

/// Fed every event of an nlohmann::json::parse callback, remembers the first key that repeats
/// within one object (at any depth).
class DuplicateKeyFinder {
 public:
  void on_event(int depth, nlohmann::json::parse_event_t event, const nlohmann::json& parsed);
  /// The first repeated key ("" when none) and the depth of its object (1 = the top level).
  const std::string& duplicate() const { return duplicate_; }
  int duplicate_depth() const { return duplicate_depth_; }

 private:
  std::vector<std::set<std::string>> open_objects_;
  std::string duplicate_;
  int duplicate_depth_ = 0;
};

/// Parses `text`, naming `where` (a file) in errors. Throws ConfigError
/// "WHERE: not valid JSON (...)" or "WHERE: duplicate key K".
nlohmann::json parse_json_unique_keys(const std::string& text, const std::string& where);

}  // namespace anuvad
