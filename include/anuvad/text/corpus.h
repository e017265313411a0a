// Reading parallel corpora and checking text input: a TSV of `english<TAB>hindi` lines, or two
// line-aligned files (`corpus.en` + `corpus.hi`, as public parallel corpora ship); a list of
// them is read as one corpus.
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

/// One corpus of a corpus list: a TSV file (`tsv`), or two line-aligned files (`src`, `tgt`).
struct CorpusSource {
  std::string tsv;
  std::string src, tgt;
};

/// The corpora named by a list of values (`-t`, `--valid-sets`, `--test`), in order:
///   "SRC,TGT"  two line-aligned files (source, target);
///   "X.en"     the pair X.en + X.hi (a next value "X.hi" is that same pair, so "X.en X.hi"
///              is one corpus);
///   anything else a TSV file (english<TAB>hindi).
/// For compatibility, exactly two values without a comma, neither ending in ".tsv" and the
/// second not in ".en", are one line-aligned pair (source, target), as before lists existed.
/// Throws DataError for an empty list, an empty side of "SRC,TGT", more than one comma, or a
/// ".hi" value without its ".en" before it.
std::vector<CorpusSource> parse_corpus_list(const std::vector<std::string>& values);

/// Every file the corpora of `values` read (parse_corpus_list), in order.
std::vector<std::string> corpus_files(const std::vector<std::string>& values);

/// Reads the corpora of `values` (parse_corpus_list) and returns their pairs, one corpus after
/// the other. Both sides are normalized with `normalization` (normalize.h); a side empty after
/// it is an error. Throws IoError (unreadable file) or DataError ("file:line: reason", or
/// "FILE: corpus has no sentence pairs" for a corpus without pairs).
std::vector<SentencePair> read_parallel_corpus(
    const std::vector<std::string>& values,
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
