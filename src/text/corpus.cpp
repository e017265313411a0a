// Parallel corpus reader and text checks (UTF-8 validation by utfcpp).
#include "anuvad/text/corpus.h"

#include <utf8.h>

#include <fstream>
#include <iterator>

#include "anuvad/core/error.h"

namespace anuvad {

std::string check_text(const std::string& text) {
  const auto bad = utf8::find_invalid(text.begin(), text.end());
  if (bad != text.end())
    return "invalid UTF-8 at byte " + std::to_string(bad - text.begin() + 1);
  const auto nul = text.find('\0');
  if (nul != std::string::npos) return "NUL byte at byte " + std::to_string(nul + 1);
  return {};
}

void clean_line(std::string& line, bool first_line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (first_line && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
}

bool is_blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

std::string split_tsv_pair(const std::string& line, SentencePair& pair,
                           TextNormalization normalization) {
  const auto tab = line.find('\t');
  if (tab == std::string::npos) return "no tab (expected english<TAB>hindi)";
  if (line.find('\t', tab + 1) != std::string::npos) return "more than one tab (expected english<TAB>hindi)";
  pair.src = normalize_text(std::string_view(line).substr(0, tab), normalization);
  pair.tgt = normalize_text(std::string_view(line).substr(tab + 1), normalization);
  if (is_blank(pair.src)) return "empty source side";
  if (is_blank(pair.tgt)) return "empty target side";
  return {};
}

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open file for reading");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    clean_line(line, lines.empty());
    const std::string why = check_text(line);
    if (!why.empty())
      throw DataError(path + ":" + std::to_string(lines.size() + 1) + ": " + why);
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw IoError(path + ": read error");
  return lines;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The pairs of one TSV file.
std::vector<SentencePair> read_tsv(const std::string& path, TextNormalization normalization) {
  const auto lines = read_lines(path);
  std::vector<SentencePair> pairs;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 1);
    SentencePair p;
    const std::string why = split_tsv_pair(lines[i], p, normalization);
    if (!why.empty()) throw DataError(where + ": " + why);
    p.origin = where;
    pairs.push_back(std::move(p));
  }
  return pairs;
}

/// The pairs of two line-aligned files.
std::vector<SentencePair> read_aligned(const std::string& src_path, const std::string& tgt_path,
                                       TextNormalization normalization) {
  const auto src = read_lines(src_path);
  const auto tgt = read_lines(tgt_path);
  if (src.size() != tgt.size())
    throw DataError(src_path + ", " + tgt_path + ": line counts differ (" + std::to_string(src.size()) +
                    " vs " + std::to_string(tgt.size()) + ")");
  std::vector<SentencePair> pairs;
  for (size_t i = 0; i < src.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    std::string s = normalize_text(src[i], normalization);
    std::string t = normalize_text(tgt[i], normalization);
    if (is_blank(s)) throw DataError(src_path + ":" + n + ": empty line");
    if (is_blank(t)) throw DataError(tgt_path + ":" + n + ": empty line");
    pairs.push_back({std::move(s), std::move(t), src_path + ":" + n});
  }
  return pairs;
}

/// "SRC,TGT" as a corpus; throws DataError for an empty side or another comma.
CorpusSource split_pair_value(const std::string& v) {
  const auto comma = v.find(',');
  CorpusSource c{"", v.substr(0, comma), v.substr(comma + 1)};
  if (c.src.empty() || c.tgt.empty() || c.tgt.find(',') != std::string::npos)
    throw DataError("'" + v + "': a line-aligned pair is SRC,TGT (two paths joined by one comma)");
  return c;
}

}  // namespace

std::vector<CorpusSource> parse_corpus_list(const std::vector<std::string>& values) {
  if (values.empty()) throw DataError("no corpus given");
  const auto has_comma = [](const std::string& v) { return v.find(',') != std::string::npos; };
  if (values.size() == 2 && !has_comma(values[0]) && !has_comma(values[1]) && !ends_with(values[0], ".tsv") &&
      !ends_with(values[1], ".tsv") && !ends_with(values[1], ".en"))
    return {{"", values[0], values[1]}};  // the two-path form: one line-aligned pair
  std::vector<CorpusSource> out;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& v = values[i];
    if (has_comma(v)) {
      out.push_back(split_pair_value(v));
    } else if (ends_with(v, ".en")) {
      const std::string hi = v.substr(0, v.size() - 3) + ".hi";
      out.push_back({"", v, hi});
      if (i + 1 < values.size() && values[i + 1] == hi) ++i;
    } else if (ends_with(v, ".hi")) {
      throw DataError(v + ": a target file without its source: name X.en (read with X.hi) or SRC,TGT");
    } else {
      out.push_back({v, "", ""});
    }
  }
  return out;
}

std::vector<std::string> corpus_files(const std::vector<std::string>& values) {
  std::vector<std::string> files;
  for (const CorpusSource& c : parse_corpus_list(values)) {
    if (!c.tsv.empty()) {
      files.push_back(c.tsv);
    } else {
      files.push_back(c.src);
      files.push_back(c.tgt);
    }
  }
  return files;
}

std::vector<SentencePair> read_parallel_corpus(const std::vector<std::string>& values,
                                               TextNormalization normalization) {
  std::vector<SentencePair> pairs;
  for (const CorpusSource& c : parse_corpus_list(values)) {
    auto part = c.tsv.empty() ? read_aligned(c.src, c.tgt, normalization) : read_tsv(c.tsv, normalization);
    if (part.empty()) throw DataError((c.tsv.empty() ? c.src : c.tsv) + ": corpus has no sentence pairs");
    pairs.insert(pairs.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return pairs;
}

}  // namespace anuvad
