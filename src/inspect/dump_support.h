// Helpers of the JSON documents of src/inspect (attention dump, beam trace): rounded numbers,
// valid UTF-8 strings and the decoding options (atomic writes: anuvad/inspect/html_page.h).
// Private to src/inspect.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "anuvad/decode/decode.h"

namespace anuvad::inspect_detail {

/// x rounded to `digits` significant digits, as the double nearest to that short decimal (so
/// nlohmann's shortest round-trip output prints at most `digits` digits). Non-finite → null.
nlohmann::json round_sig(double x, int digits);

/// `s` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(const std::string& s);

/// The "decoding" object of a document: the options translations were produced with.
nlohmann::json decoding_json(const DecodeOptions& opts);

}  // namespace anuvad::inspect_detail
