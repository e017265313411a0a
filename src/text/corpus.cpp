// Parallel corpus reader and text checks (UTF-8 validation by utfcpp).
#include "anuvad/text/corpus.h"

#include <utf8.h>

#include <fstream>

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

}  // namespace

std::vector<SentencePair> read_parallel_corpus(const std::vector<std::string>& paths_in,
                                               TextNormalization normalization) {
  std::vector<std::string> paths = paths_in;
  if (paths.size() == 1 && ends_with(paths[0], ".en"))
    paths.push_back(paths[0].substr(0, paths[0].size() - 3) + ".hi");
  std::vector<SentencePair> pairs;
  if (paths.size() == 1) {
    const auto lines = read_lines(paths[0]);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string where = paths[0] + ":" + std::to_string(i + 1);
      SentencePair p;
      const std::string why = split_tsv_pair(lines[i], p, normalization);
      if (!why.empty()) throw DataError(where + ": " + why);
      p.origin = where;
      pairs.push_back(std::move(p));
    }
  } else if (paths.size() == 2) {
    const auto src = read_lines(paths[0]);
    const auto tgt = read_lines(paths[1]);
    if (src.size() != tgt.size())
      throw DataError(paths[0] + ", " + paths[1] + ": line counts differ (" +
                      std::to_string(src.size()) + " vs " + std::to_string(tgt.size()) + ")");
    for (size_t i = 0; i < src.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      std::string s = normalize_text(src[i], normalization);
      std::string t = normalize_text(tgt[i], normalization);
      if (is_blank(s)) throw DataError(paths[0] + ":" + n + ": empty line");
      if (is_blank(t)) throw DataError(paths[1] + ":" + n + ": empty line");
      pairs.push_back({std::move(s), std::move(t), paths[0] + ":" + n});
    }
  } else {
    throw DataError("a corpus is one TSV file or two line-aligned files, got " +
                    std::to_string(paths.size()) + " paths");
  }
  if (pairs.empty()) throw DataError(paths[0] + ": corpus has no sentence pairs");
  return pairs;
}

}  // namespace anuvad
