// The one text normalization of anuvad, applied to every text that enters (training pairs,
// translation input, score pairs, evaluation hypotheses and references, validation), after a
// sentence pair has been split on its tab.
#pragma once

#include <string>
#include <string_view>

namespace anuvad {

/// Which normalization a model was trained with; recorded in its model file
/// (metadata "text_normalization", docs/model-format.md) so that it is always used with it.
enum class TextNormalization {
  /// Model files written before the rule existed: text is used as typed (SentencePiece's identity
  /// rule then trims and collapses plain spaces only).
  kIdentity,
  /// Unicode NFC (canonical composition, UAX #15), every White_Space code point (tab, VT, FF,
  /// CR, LF, U+0085, U+00A0 no-break space, the Zs/Zl/Zp separators) mapped to U+0020, byte-order
  /// marks (U+FEFF) removed, runs of spaces collapsed to one, both ends trimmed. NFC is canonical
  /// equivalence: it never changes what a reader sees (U+095E फ़ and U+092B U+093C फ़ become the
  /// same code points), unlike NFKC, which folds compatibility characters.
  kNfcSpaces,
};

/// The name stored in model files: "identity" or "nfc-spaces".
const char* normalization_name(TextNormalization n);

/// Parses a stored name. Throws ConfigError ("unknown text normalization 'X'") for another one.
TextNormalization normalization_from_name(const std::string& name);

/// `text` normalized by rule `n` (kIdentity returns it unchanged). `text` must be valid UTF-8
/// (check_text); throws DataError when it is not. The result is empty exactly when the text has
/// nothing but whitespace and byte-order marks.
std::string normalize_text(std::string_view text, TextNormalization n);

}  // namespace anuvad
