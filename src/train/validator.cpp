// Validation during training: the metrics, their best values, and running them on a dev set.
#include "anuvad/train/validator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>

#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"
#include "anuvad/text/metrics.h"
#include "anuvad/decode/translator.h"
#include "anuvad/train/batcher.h"

namespace anuvad {

namespace {

/// Dev cross-entropy per target token (nats), or its exponential, the perplexity.
class CrossEntropyValidator : public Validator {
 public:
  explicit CrossEntropyValidator(bool perplexity) : perplexity_(perplexity) {}
  std::string metric() const override { return perplexity_ ? "perplexity" : "cross-entropy"; }
  bool lower_is_better() const override { return true; }
  bool needs_cross_entropy() const override { return true; }
  double score(const ValidationInputs& in) const override {
    return perplexity_ ? std::exp(in.cross_entropy) : in.cross_entropy;
  }

 private:
  bool perplexity_;
};

/// Corpus chrF2 or BLEU (13a+danda) of the greedy translations against the references.
class TranslationValidator : public Validator {
 public:
  explicit TranslationValidator(bool bleu) : bleu_(bleu) {}
  std::string metric() const override { return bleu_ ? "bleu" : "chrf"; }
  bool lower_is_better() const override { return false; }
  bool needs_translations() const override { return true; }
  double score(const ValidationInputs& in) const override {
    return bleu_ ? corpus_bleu(in.translations, *in.references).score
                 : corpus_chrf(in.translations, *in.references).score;
  }

 private:
  bool bleu_;
};

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(path + ": cannot write the validation translations");
  for (const auto& l : lines) out << l << '\n';
  if (!out.flush()) throw IoError(path + ": write failed");
}

/// The validators of --valid-metrics, in order; throws ConfigError when there is none, or one
/// is unknown or listed twice.
std::vector<std::unique_ptr<Validator>> make_validators(const std::vector<std::string>& metrics) {
  if (metrics.empty()) throw ConfigError("--valid-metrics: at least one metric is needed");
  std::vector<std::unique_ptr<Validator>> out;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (std::find(metrics.begin(), metrics.begin() + i, metrics[i]) != metrics.begin() + i)
      throw ConfigError("--valid-metrics: '" + metrics[i] + "' is listed twice");
    out.push_back(make_validator(metrics[i]));
  }
  return out;
}

std::vector<TrackedMetric> tracked(const std::vector<std::unique_ptr<Validator>>& validators) {
  std::vector<TrackedMetric> out;
  for (const auto& v : validators) out.push_back({v->metric(), v->lower_is_better()});
  return out;
}

}  // namespace

const std::vector<std::string>& valid_metric_names() {
  static const std::vector<std::string> names{"cross-entropy", "perplexity", "chrf", "bleu"};
  return names;
}

std::vector<Example> make_examples(const std::vector<std::pair<std::string, std::string>>& pairs,
                                   const Tokenizer& src, const Tokenizer& tgt, int max_tokens,
                                   int* skipped, std::vector<size_t>* kept) {
  std::vector<Example> out;
  out.reserve(pairs.size());
  if (kept) kept->clear();
  int n_skipped = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    Example e{src.encode(pairs[i].first), tgt.encode(pairs[i].second)};
    if (static_cast<int>(e.src.size()) > max_tokens || static_cast<int>(e.tgt.size()) > max_tokens) {
      ++n_skipped;
      continue;
    }
    out.push_back(std::move(e));
    if (kept) kept->push_back(i);
  }
  if (skipped) *skipped = n_skipped;
  return out;
}

double evaluate_cross_entropy(const Transformer& model, const std::vector<Example>& examples,
                              int batch_tokens) {
  if (examples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::mt19937_64 rng(0);
  const auto batches = bucket_batches(examples, batch_tokens, rng);
  double nll = 0;
  int64_t n = 0;
  ForwardCache cache;
  Mat logits;
  for (const auto& idx : batches) {
    std::vector<const Example*> ptrs;
    for (int i : idx) ptrs.push_back(&examples[i]);
    const Batch b = make_batch(ptrs);
    model.forward(b, DropoutContext{}, cache, logits);
    const LossStats s = label_smoothed_cross_entropy(logits, b.tgt_out, 0.0, nullptr);
    nll += s.nll_sum;
    n += s.n_tokens;
  }
  return nll / static_cast<double>(n);
}

std::unique_ptr<Validator> make_validator(const std::string& metric) {
  if (metric == "cross-entropy" || metric == "perplexity")
    return std::make_unique<CrossEntropyValidator>(metric == "perplexity");
  if (metric == "chrf" || metric == "bleu") return std::make_unique<TranslationValidator>(metric == "bleu");
  throw ConfigError("--valid-metrics: unknown metric '" + metric +
                    "' (cross-entropy, perplexity, chrf or bleu)");
}

std::string format_metric(const std::string& metric, double value) {
  char buf[96];
  if (metric == "cross-entropy")
    std::snprintf(buf, sizeof buf, "cross-entropy %.4f nats/token", value);
  else
    std::snprintf(buf, sizeof buf, "%s %.2f", metric.c_str(), value);
  return buf;
}

double best_cross_entropy(const std::map<std::string, double>& best) {
  if (const auto it = best.find("cross-entropy"); it != best.end()) return it->second;
  if (const auto it = best.find("perplexity"); it != best.end()) return std::log(it->second);
  return std::numeric_limits<double>::quiet_NaN();
}

ValidationTracker::ValidationTracker(std::vector<TrackedMetric> metrics, int early_stopping)
    : metrics_(std::move(metrics)), early_stopping_(early_stopping) {}

std::vector<std::string> ValidationTracker::record(const std::map<std::string, double>& scores) {
  std::vector<std::string> improved;
  for (const TrackedMetric& m : metrics_) {
    const double x = scores.at(m.name);
    const auto it = best_.find(m.name);
    if (it == best_.end() || (m.lower_is_better ? x < it->second : x > it->second)) {
      best_[m.name] = x;
      improved.push_back(m.name);
    }
  }
  const bool first_improved = !metrics_.empty() && !improved.empty() && improved.front() == metrics_.front().name;
  stalled_ = first_improved ? 0 : stalled_ + 1;
  return improved;
}

void ValidationTracker::restore(const std::map<std::string, double>& best, int stalled) {
  best_ = best;
  stalled_ = stalled;
}

Validation::Validation(const TrainOptions& opts, const std::vector<Example>& examples,
                       const ValidationText* text)
    : opts_(opts),
      examples_(examples),
      text_(text),
      validators_(make_validators(opts.valid_metrics)),
      tracker_(tracked(validators_), opts.early_stopping) {
  if (opts.early_stopping < 0) throw ConfigError("--early-stopping must be ≥ 0");
  bool wants_translations = !opts.valid_translation_output.empty();
  for (const auto& v : validators_) {
    want_cross_entropy_ = want_cross_entropy_ || v->needs_cross_entropy();
    wants_translations = wants_translations || v->needs_translations();
  }
  translate_ = !examples.empty() && wants_translations;
  if (translate_ && (text == nullptr || text->tgt_tokenizer == nullptr ||
                     text->references.size() != examples.size()))
    throw ConfigError("chrf/bleu validation and --valid-translation-output need the target "
                      "tokenizer and one reference per validation example");
  if (translate_ && !opts.valid_translation_output.empty())
    write_lines(opts.valid_translation_output, {});  // fail now, not after the first interval
}

ValidationResult Validation::run(const Transformer& model, int64_t step) {
  ValidationResult v;
  v.step = step;
  ValidationInputs in;
  in.cross_entropy = std::numeric_limits<double>::quiet_NaN();
  if (want_cross_entropy_) in.cross_entropy = evaluate_cross_entropy(model, examples_, opts_.batch_tokens);
  if (translate_) {
    in.translations = best_translations(model, examples_, *text_->tgt_tokenizer, opts_.valid_mini_batch);
    in.references = &text_->references;
    if (!opts_.valid_translation_output.empty()) write_lines(opts_.valid_translation_output, in.translations);
  }
  for (const auto& validator : validators_) v.scores[validator->metric()] = validator->score(in);
  v.improved = tracker_.record(v.scores);
  return v;
}

std::string Validation::summary(const ValidationResult& v) const {
  const auto& metrics = opts_.valid_metrics;
  std::string line = "valid step " + std::to_string(v.step);
  for (const auto& m : metrics) line += " | " + format_metric(m, v.scores.at(m));
  // The perplexity of the cross-entropy is free: shown even when not listed.
  if (want_cross_entropy_ && v.scores.count("perplexity") == 0)
    line += " | " + format_metric("perplexity", std::exp(v.scores.at("cross-entropy")));
  if (!v.improved.empty()) {
    line += " | new best";
    if (metrics.size() > 1) {
      line += ":";
      for (size_t i = 0; i < v.improved.size(); ++i) line += (i ? ", " : " ") + v.improved[i];
    }
  }
  if (tracker_.stalled() > 0) {
    line += " | stalled " + std::to_string(tracker_.stalled()) + "x";
    if (tracker_.early_stopping() > 0) line += " of " + std::to_string(tracker_.early_stopping());
  }
  return line;
}

}  // namespace anuvad
