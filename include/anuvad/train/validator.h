// Validation during training (Marian's --valid-metrics): one Validator per metric (dev
// cross-entropy per target token, perplexity, chrF2 and BLEU of greedy translations) behind
// one interface, the best value of each metric and the early-stopping count in one
// ValidationTracker, and Validation, which runs them on a validation set.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/decode/decode.h"
#include "anuvad/nn/batch.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/train/options.h"

namespace anuvad {

/// What chrf/bleu validation needs besides the tokenised examples: the target tokenizer (to
/// detokenize greedy translations) and the reference text of each validation example.
struct ValidationText {
  const Tokenizer* tgt_tokenizer = nullptr;
  std::vector<std::string> references;  ///< aligned with the validation examples
};

/// Validation metric names accepted in TrainOptions::valid_metrics.
const std::vector<std::string>& valid_metric_names();

/// Mean cross-entropy per target token (no smoothing, no dropout) of `examples`, batched by
/// `batch_tokens`: nats per token.
double evaluate_cross_entropy(const Transformer& model, const std::vector<Example>& examples,
                              int batch_tokens);

/// Tokenises pairs into examples; pairs whose source or target has more than max_tokens
/// subwords are skipped (counted in *skipped; the indices of the pairs kept go to *kept).
std::vector<Example> make_examples(const std::vector<std::pair<std::string, std::string>>& pairs,
                                   const Tokenizer& src, const Tokenizer& tgt, int max_tokens,
                                   int* skipped, std::vector<size_t>* kept = nullptr);

/// What the validators of one validation share, each computed once: the dev cross-entropy
/// (nats per target token; NaN when no validator needs it) and the greedy translations with
/// their references (empty when no validator or output file needs them).
struct ValidationInputs {
  double cross_entropy = 0;
  std::vector<std::string> translations;
  const std::vector<std::string>* references = nullptr;
};

/// One validation metric.
class Validator {
 public:
  virtual ~Validator() = default;
  /// The name in --valid-metrics ("cross-entropy", "perplexity", "chrf", "bleu").
  virtual std::string metric() const = 0;
  /// Cross-entropy and perplexity: lower is better; chrf and bleu: higher.
  virtual bool lower_is_better() const = 0;
  virtual bool needs_cross_entropy() const { return false; }
  virtual bool needs_translations() const { return false; }
  /// The metric's value (cross-entropy in nats per target token, chrf and bleu on 0..100).
  virtual double score(const ValidationInputs& in) const = 0;
};

/// The validator of a metric of valid_metric_names(); throws ConfigError for another name.
std::unique_ptr<Validator> make_validator(const std::string& metric);

/// A value as the validation log line shows it: "cross-entropy 3.1234 nats/token",
/// "chrf 21.37", "perplexity 22.81".
std::string format_metric(const std::string& metric, double value);

/// The best validation cross-entropy (nats per target token) in a map of best values: its
/// "cross-entropy" entry, else the log of its "perplexity" entry, else NaN.
double best_cross_entropy(const std::map<std::string, double>& best);

/// A metric the tracker follows.
struct TrackedMetric {
  std::string name;
  bool lower_is_better = true;
};

/// The bookkeeping of validations (Marian's early stopping): the best value of every metric,
/// and how many validations in a row the first metric has not improved.
class ValidationTracker {
 public:
  /// `metrics` in --valid-metrics order (the first one decides early stopping);
  /// `early_stopping` = validations without improvement that end training (0 = never).
  ValidationTracker(std::vector<TrackedMetric> metrics, int early_stopping);
  /// Records one validation's scores (one per metric): a metric improves when it has no best
  /// yet or beats it strictly. Returns the improved metrics in metric order, and resets the
  /// stalled count when the first metric improved (else adds one).
  std::vector<std::string> record(const std::map<std::string, double>& scores);
  /// Continues from a checkpoint's best values and stalled count.
  void restore(const std::map<std::string, double>& best, int stalled);
  const std::map<std::string, double>& best() const { return best_; }
  int stalled() const { return stalled_; }
  int early_stopping() const { return early_stopping_; }
  /// True once the first metric has stalled early_stopping (> 0) times in a row.
  bool should_stop() const { return early_stopping_ > 0 && stalled_ >= early_stopping_; }

 private:
  std::vector<TrackedMetric> metrics_;
  int early_stopping_;
  std::map<std::string, double> best_;
  int stalled_ = 0;
};

/// One validation: its step and the value of every metric in TrainOptions::valid_metrics
/// (cross-entropy in nats per target token, chrf and bleu on 0..100).
struct ValidationResult {
  int64_t step = 0;
  std::map<std::string, double> scores;
  std::vector<std::string> improved;  ///< metrics that reached a new best here
};

/// The validation of a run: the validators of opts.valid_metrics on a validation set, and
/// their tracker. Uses no random numbers.
class Validation {
 public:
  /// Checks the metrics and early_stopping (ConfigError: none, unknown or listed twice; chrf,
  /// bleu or valid_translation_output without `text` for every example) and empties
  /// opts.valid_translation_output (IoError when it cannot be written). `opts`, `examples` and
  /// `text` must outlive the Validation.
  Validation(const TrainOptions& opts, const std::vector<Example>& examples,
             const ValidationText* text);
  /// False without validation examples (then run() must not be called).
  bool active() const { return !examples_.empty(); }
  /// Scores `model` with every validator (the cross-entropy and the translations computed at
  /// most once; the translations written to valid_translation_output), records them in the
  /// tracker and returns them.
  ValidationResult run(const Transformer& model, int64_t step);
  /// The log line of a validation: "valid step N | METRIC VALUE | ... [| new best[: M, ...]]
  /// [| stalled Kx[ of N]]" (the perplexity is added when only the cross-entropy is listed).
  std::string summary(const ValidationResult& v) const;
  ValidationTracker& tracker() { return tracker_; }
  const ValidationTracker& tracker() const { return tracker_; }

 private:
  const TrainOptions& opts_;
  const std::vector<Example>& examples_;
  const ValidationText* text_;
  std::vector<std::unique_ptr<Validator>> validators_;
  bool want_cross_entropy_ = false;
  bool translate_ = false;
  ValidationTracker tracker_;
};

}  // namespace anuvad
