// The K best models of a run by its first validation metric, kept for --final-model average
// (checkpoint averaging at the end of training: Vaswani et al. 2017 §6.1 average the last
// checkpoints; here the K best by the dev metric, as in Popel & Bojar 2018 §4.10).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace anuvad {

/// The files <stem>.best-<metric>.<rank><ext> (rank 1 = the best value, up to K), e.g.
/// models/m.best-chrf.1.safetensors … models/m.best-chrf.4.safetensors. Each file records its
/// validation in its metadata ("valid_step", "valid_score"), from which a resumed run rebuilds
/// the ranking.
class BestModels {
 public:
  /// Writes a model (with the given extra metadata) to a path.
  using Writer = std::function<void(const std::string& path, const std::map<std::string, std::string>& meta)>;

  /// `k` ≥ 1 models of `metric` next to `model_path`; `lower_is_better` as the validator's.
  BestModels(std::string model_path, std::string metric, bool lower_is_better, int k);

  /// A new run: removes every <stem>.best-<metric>.<N><ext> file of an earlier one.
  void clear();
  /// A resumed run at `step`: ranks the files written at steps ≤ `step` by their metadata and
  /// removes the others (a validation after the checkpoint is made again). Throws
  /// ModelFileError for a file without readable "valid_step" / "valid_score".
  void restore(int64_t step);
  /// When `score` at `step` is among the K best so far (fewer than K kept, or strictly better
  /// than the K-th), moves the worse files one rank down (the K+1-th is removed) and has
  /// `write` write the model to its rank's path. Returns whether it did.
  bool offer(int64_t step, double score, const Writer& write);
  /// The kept files, best first.
  std::vector<std::string> paths() const;
  /// Path of rank `rank` (1-based).
  std::string path(int rank) const;
  int k() const { return k_; }
  const std::string& metric() const { return metric_; }

 private:
  struct Entry {
    int64_t step;
    double score;
  };
  bool better(double a, double b) const { return lower_is_better_ ? a < b : a > b; }
  std::string model_path_, metric_;
  bool lower_is_better_;
  int k_;
  std::vector<Entry> ranked_;  ///< best first; ranked_[i] is in path(i + 1)
};

}  // namespace anuvad
