// The K best models of a run (include/anuvad/train/best_models.h).
#include "anuvad/train/best_models.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "anuvad/core/error.h"
#include "anuvad/io/safetensors.h"

namespace anuvad {

namespace fs = std::filesystem;

namespace {

/// The files <stem>.best-<metric>.<N><ext> in the directory of `model_path`, with their N.
std::vector<std::pair<int, std::string>> ranked_files(const std::string& model_path, const std::string& metric) {
  const fs::path p(model_path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.stem().string() + ".best-" + metric + ".";
  const std::string ext = p.extension().string();
  std::vector<std::pair<int, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + ext.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
      continue;
    const std::string rank = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
    if (!std::regex_match(rank, std::regex("[1-9][0-9]{0,5}"))) continue;
    out.emplace_back(std::stoi(rank), (p.parent_path() / name).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

BestModels::BestModels(std::string model_path, std::string metric, bool lower_is_better, int k)
    : model_path_(std::move(model_path)), metric_(std::move(metric)), lower_is_better_(lower_is_better), k_(k) {
  if (k_ < 1) throw ConfigError("--average-best must be at least 1");
}

std::string BestModels::path(int rank) const {
  const fs::path p(model_path_);
  return (p.parent_path() / (p.stem().string() + ".best-" + metric_ + "." + std::to_string(rank) +
                             p.extension().string())).string();
}

void BestModels::clear() {
  for (const auto& [rank, file] : ranked_files(model_path_, metric_)) fs::remove(file);
  ranked_.clear();
}

void BestModels::restore(int64_t step) {
  ranked_.clear();
  std::vector<std::pair<Entry, std::string>> found;
  for (const auto& [rank, file] : ranked_files(model_path_, metric_)) {
    const auto meta = read_safetensors(file).metadata;
    const auto s = meta.find("valid_step"), v = meta.find("valid_score");
    if (s == meta.end() || v == meta.end())
      throw ModelFileError(file + ": no valid_step / valid_score metadata; remove it or pass --no-resume");
    const Entry e{std::stoll(s->second), std::stod(v->second)};
    if (e.step <= step) found.emplace_back(e, file);
    else fs::remove(file);
  }
  std::stable_sort(found.begin(), found.end(), [this](const auto& a, const auto& b) {
    return better(a.first.score, b.first.score) || (a.first.score == b.first.score && a.first.step < b.first.step);
  });
  // Renamed into ranks 1, 2, … in order: a name is free once the file that held it has moved.
  const std::string staging = path(0) + ".restore";
  for (size_t i = 0; i < found.size(); ++i) fs::rename(found[i].second, staging + std::to_string(i));
  for (size_t i = 0; i < found.size(); ++i) {
    if (static_cast<int>(i) < k_) {
      fs::rename(staging + std::to_string(i), path(static_cast<int>(i) + 1));
      ranked_.push_back(found[i].first);
    } else {
      fs::remove(staging + std::to_string(i));
    }
  }
}

bool BestModels::offer(int64_t step, double score, const Writer& write) {
  size_t pos = 0;
  while (pos < ranked_.size() && !better(score, ranked_[pos].score)) ++pos;
  if (pos >= static_cast<size_t>(k_)) return false;
  if (ranked_.size() == static_cast<size_t>(k_)) {
    fs::remove(path(k_));
    ranked_.pop_back();
  }
  for (size_t r = ranked_.size(); r > pos; --r) fs::rename(path(static_cast<int>(r)), path(static_cast<int>(r) + 1));
  char score_text[64];
  std::snprintf(score_text, sizeof score_text, "%.17g", score);
  write(path(static_cast<int>(pos) + 1), {{"valid_step", std::to_string(step)}, {"valid_score", score_text},
                                          {"valid_metric", metric_}});
  ranked_.insert(ranked_.begin() + static_cast<std::ptrdiff_t>(pos), Entry{step, score});
  return true;
}

std::vector<std::string> BestModels::paths() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked_.size(); ++i) out.push_back(path(static_cast<int>(i) + 1));
  return out;
}

}  // namespace anuvad
