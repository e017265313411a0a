// Text normalization with utf8proc (Unicode NFC) and the White_Space property.
#include "anuvad/text/normalize.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "anuvad/core/error.h"

namespace anuvad {

namespace {

/// Unicode's White_Space property (PropList.txt): the controls TAB..CR and NEL, and every
/// space, line and paragraph separator (Zs, Zl, Zp: U+0020, U+00A0, U+1680, U+2000..U+200A,
/// U+2028, U+2029, U+202F, U+205F, U+3000).
bool is_white_space(utf8proc_int32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return true;
  const utf8proc_category_t c = utf8proc_category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

constexpr utf8proc_int32_t kByteOrderMark = 0xFEFF;

/// Spaces for every White_Space code point, byte-order marks dropped, runs collapsed, ends
/// trimmed.
std::string map_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  bool pending_space = false;
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) throw DataError("normalize: invalid UTF-8");
    if (is_white_space(cp)) {
      pending_space = !out.empty();
    } else if (cp != kByteOrderMark) {
      if (pending_space) out.push_back(' ');
      pending_space = false;
      out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }
    p += n;
    left -= n;
  }
  return out;
}

}  // namespace

const char* normalization_name(TextNormalization n) {
  return n == TextNormalization::kIdentity ? "identity" : "nfc-spaces";
}

TextNormalization normalization_from_name(const std::string& name) {
  if (name == "identity") return TextNormalization::kIdentity;
  if (name == "nfc-spaces") return TextNormalization::kNfcSpaces;
  throw ConfigError("unknown text normalization '" + name + "' (known: identity, nfc-spaces)");
}

std::string normalize_text(std::string_view text, TextNormalization n) {
  if (n == TextNormalization::kIdentity) return std::string(text);
  const std::string spaced = map_spaces(text);
  if (spaced.empty()) return spaced;
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t len = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(spaced.data()),
      static_cast<utf8proc_ssize_t>(spaced.size()), &composed,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (len < 0) throw DataError(std::string("normalize: ") + utf8proc_errmsg(len));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(composed, &std::free);
  return std::string(reinterpret_cast<const char*>(composed), static_cast<size_t>(len));
}

}  // namespace anuvad
