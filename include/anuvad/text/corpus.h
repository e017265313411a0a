// Reading parallel corpora and checking text input: a TSV of `english<TAB>hindi` lines, or two
// line-aligned files (`corpus.en` + `corpus.hi`, as public parallel corpora ship).
//
// Line handling (documented in README): a UTF-8 byte-order mark at the start of a file and a
// trailing CR (CRLF line ends) are removed; invalid UTF-8, a NUL byte, a missing tab, more than
// one tab or an empty (or whitespace-only) side is an error naming the file and line.
#pragma once

#include <string>
#include <vector>

#include "anuvad/text/normalize.h"

namespace anuvad {

/// One sentence pair and where it came from ("file:line").
struct SentencePair {
  std::string src;
  std::string tgt;
  std::string origin;
};

/// Reads a parallel corpus. `paths` holds one TSV file, or two line-aligned files (source,
/// target); a single path ending in ".en" is paired with the same stem + ".hi".
/// Both sides are normalized with `normalization` (normalize.h); a side empty after it is an
/// error. Throws IoError (unreadable file) or DataError ("file:line: reason").
std::vector<SentencePair> read_parallel_corpus(
    const std::vector<std::string>& paths,
    TextNormalization normalization = TextNormalization::kNfcSpaces);

/// Returns an empty string when `text` is acceptable input text (valid UTF-8, no NUL byte),
/// otherwise the reason ("invalid UTF-8 at byte 7", "NUL byte at byte 3").
std::string check_text(const std::string& text);

/// Removes a trailing '\r' and, when `first_line`, a leading UTF-8 byte-order mark.
void clean_line(std::string& line, bool first_line);

/// True when `text` has no non-whitespace character.
bool is_blank(const std::string& text);

/// Splits one cleaned, checked TSV line `english<TAB>hindi` into pair.src / pair.tgt (origin
/// untouched). Returns an empty string, or the reason the line is not a pair: "no tab ...",
/// "more than one tab ...", "empty source side", "empty target side" (empty after
/// normalization, or whitespace only under kIdentity). Each side is normalized after the split.
/// The one rule for corpus files (read_parallel_corpus) and `anuvad score` input.
std::string split_tsv_pair(const std::string& line, SentencePair& pair,
                           TextNormalization normalization = TextNormalization::kNfcSpaces);

}  // namespace anuvad
