// JSON Schema (draft-07) validation for the tests, with valijson (Debian: libvalijson-dev; the
// test target defines ANUVAD_HAVE_VALIJSON when it was found, tests/attention.cmake).
#pragma once

#ifdef ANUVAD_HAVE_VALIJSON
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <string>

#include "support/test_support.h"

namespace anuvad::test {

/// Validates `doc` against the schema file `schema_path` (relative to the source tree); returns
/// the errors, one per line ("<where>: <what>"), or "" when the document is valid.
inline std::string schema_errors(const nlohmann::json& doc, const std::string& schema_path) {
  const nlohmann::json schema_doc = nlohmann::json::parse(read_file(repo_path(schema_path)));
  valijson::Schema schema;
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  valijson::adapters::NlohmannJsonAdapter schema_adapter(schema_doc);
  parser.populateSchema(schema_adapter, schema);
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter doc_adapter(doc);
  if (validator.validate(schema, doc_adapter, &results)) return "";
  std::string out;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) {
    std::string where;
    for (const auto& c : e.context) where += c;
    out += where + ": " + e.description + "\n";
  }
  return out.empty() ? "invalid" : out;
}

}  // namespace anuvad::test
#endif
