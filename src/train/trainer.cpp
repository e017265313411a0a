// The training job: tokenizer training, batching, the update loop, validation and saving.
#include "anuvad/train/trainer.h"

#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "anuvad/train/adam.h"
#include "anuvad/text/corpus.h"
#include "anuvad/decode/decode.h"
#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"
#include "anuvad/core/runtime.h"
#include "anuvad/text/metrics.h"
#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"

namespace anuvad {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long v = static_cast<long>(s + 0.5);
  char buf[32];
  if (v >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", v / 3600, (v / 60) % 60, v % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", v / 60, v % 60);
  return buf;
}

bool lower_is_better(const std::string& metric) {
  return metric == "cross-entropy" || metric == "perplexity";
}

bool needs_translation(const TrainOptions& o) {
  if (!o.valid_translation_output.empty()) return true;
  for (const auto& m : o.valid_metrics)
    if (m == "chrf" || m == "bleu") return true;
  return false;
}

/// "cross-entropy 3.1234 nats/token", "chrf 21.37", ...
std::string format_metric(const std::string& metric, double v) {
  char buf[96];
  if (metric == "cross-entropy")
    std::snprintf(buf, sizeof buf, "cross-entropy %.4f nats/token", v);
  else
    std::snprintf(buf, sizeof buf, "%s %.2f", metric.c_str(), v);
  return buf;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(path + ": cannot write the validation translations");
  for (const auto& l : lines) out << l << '\n';
  if (!out.flush()) throw IoError(path + ": write failed");
}

}  // namespace

void check_finite_gradients(const ParamRegistry& params, int64_t step) {
  for (const Param& p : params.params())
    if (!p.grad.allFinite())
      throw NumericError("step " + std::to_string(step) + ": gradient of " + p.name +
                         " is NaN or Inf; training stopped, the last saved model is kept");
}

void check_finite_weights(const ParamRegistry& params, int64_t step) {
  for (const Param& p : params.params())
    if (!p.value.allFinite())
      throw NumericError("step " + std::to_string(step) + ": weight " + p.name +
                         " is NaN or Inf; training stopped, the last saved model is kept");
}

const std::vector<std::string>& valid_metric_names() {
  static const std::vector<std::string> names{"cross-entropy", "perplexity", "chrf", "bleu"};
  return names;
}

std::string best_model_path(const std::string& model_path, const std::string& metric) {
  std::filesystem::path p(model_path);
  std::string stem = p.stem().string();
  return (p.parent_path() / (stem + ".best-" + metric + p.extension().string())).string();
}

std::vector<std::string> translate_examples(const Transformer& model,
                                            const std::vector<Example>& examples,
                                            const Tokenizer& tgt, int mini_batch,
                                            const DecodeOptions& decode) {
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return examples[a].src.size() < examples[b].src.size();
  });
  const size_t step = static_cast<size_t>(std::max(mini_batch, 1));
  std::vector<std::string> out(examples.size());
  for (size_t begin = 0; begin < order.size(); begin += step) {
    const size_t end = std::min(order.size(), begin + step);
    std::vector<std::vector<int32_t>> sources;
    for (size_t k = begin; k < end; ++k) sources.push_back(examples[order[k]].src);
    const auto hyps = decode_batch(model, sources, decode);
    for (size_t k = begin; k < end; ++k) out[order[k]] = tgt.decode(hyps[k - begin].at(0).tokens);
  }
  return out;
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

namespace {
std::atomic<bool> g_stop_requested{false};
}  // namespace

void request_stop() { g_stop_requested.store(true); }
bool stop_requested() { return g_stop_requested.load(); }
void clear_stop_request() { g_stop_requested.store(false); }

nlohmann::json TrainState::counters_to_json() const {
  return {{"step", step}, {"epoch", epoch}, {"next_batch", next_batch},
          {"rng_epoch_start", rng_epoch_start}, {"rng", rng}, {"epoch_loss", epoch_loss},
          {"epoch_tokens", epoch_tokens}, {"tokens_total", tokens_total},
          {"elapsed_seconds", elapsed_seconds}, {"stalled", stalled},
          {"best_ce", std::isfinite(best_ce) ? nlohmann::json(best_ce) : nlohmann::json(nullptr)},
          {"epoch_losses", epoch_losses}, {"best_valid", best_valid}};
}

void TrainState::counters_from_json(const nlohmann::json& j) {
  try {
    step = j.at("step").get<int64_t>();
    epoch = j.at("epoch").get<int>();
    next_batch = j.at("next_batch").get<int64_t>();
    rng_epoch_start = j.at("rng_epoch_start").get<std::string>();
    rng = j.at("rng").get<std::string>();
    epoch_loss = j.at("epoch_loss").get<double>();
    epoch_tokens = j.at("epoch_tokens").get<int64_t>();
    tokens_total = j.at("tokens_total").get<int64_t>();
    elapsed_seconds = j.at("elapsed_seconds").get<double>();
    stalled = j.at("stalled").get<int>();
    best_ce = j.at("best_ce").is_null() ? std::numeric_limits<double>::infinity()
                                        : j.at("best_ce").get<double>();
    epoch_losses = j.at("epoch_losses").get<std::vector<double>>();
    best_valid = j.at("best_valid").get<std::map<std::string, double>>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(std::string("checkpoint state: ") + e.what());
  }
  if (step < 0 || epoch < 1 || next_batch < 0) throw ConfigError("checkpoint state: negative position");
}

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names{"tiny", "small"};
  return names;
}

void apply_preset(const std::string& name, TrainOptions& opts) {
  ModelConfig m;  // the built-in defaults are the tiny recipe
  if (name == "tiny") {
    opts.learning_rate = 1e-3;
    opts.warmup_steps = 400;
    opts.label_smoothing = 0.1;
    opts.src_vocab_size = opts.tgt_vocab_size = 1000;
  } else if (name == "small") {
    // A few thousand pairs (Tatoeba hin-eng, 2541) in minutes on 2 cores: the tiny network with
    // the regularisation such a corpus needs (the PyTorch reference's best Tatoeba setting used
    // dropout 0.3 everywhere). A wider network (d_model 256, 3+3 layers: 6.0 M instead of 1.2 M
    // parameters) is about 3x slower per update and did not get far enough in a 15-minute
    // budget on a loaded 2-core machine to be worth it.
    m.dropout = 0.3;
    m.attention_dropout = 0.1;
    m.ffn_dropout = 0.1;
    opts.learning_rate = 1e-3;
    opts.warmup_steps = 400;
    opts.label_smoothing = 0.1;
    opts.src_vocab_size = opts.tgt_vocab_size = 1000;
  } else {
    throw ConfigError("--preset: unknown preset '" + name + "' (tiny or small)");
  }
  opts.preset = name;
  opts.model = m;
}

ModelConfig effective_model_config(const TrainOptions& opts) {
  nlohmann::json j = opts.model.to_json();
  std::string origin = "--preset " + opts.preset;
  if (!opts.config_path.empty()) {
    std::ifstream in(opts.config_path);
    if (!in) throw IoError(opts.config_path + ": cannot open config file");
    nlohmann::json file;
    try {
      file = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(opts.config_path + ": not valid JSON (" + e.what() + ")");
    }
    // Checked on its own first, so that an unknown key or bad type names the file.
    (void)ModelConfig::from_json(file, opts.config_path);
    j.update(file);
    origin = opts.config_path;
  }
  if (!opts.model_overrides.empty()) {
    j.update(opts.model_overrides);
    origin = "command line";
  }
  j["src_vocab_size"] = opts.src_vocab_size;
  j["tgt_vocab_size"] = opts.tgt_vocab_size;
  ModelConfig cfg = ModelConfig::from_json(j, origin);
  cfg.validate();
  return cfg;
}

nlohmann::json effective_config_json(const TrainOptions& o) {
  nlohmann::json training = {
      {"train_sets", o.train_sets}, {"valid_sets", o.valid_sets}, {"model_path", o.model_path},
      {"config_path", o.config_path}, {"seed", o.seed}, {"cpu_threads", o.cpu_threads},
      {"after_epochs", o.after_epochs}, {"after_steps", o.after_steps},
      {"batch_tokens", o.batch_tokens}, {"learning_rate", o.learning_rate},
      {"warmup_steps", o.warmup_steps}, {"label_smoothing", o.label_smoothing},
      {"clip_norm", o.clip_norm}, {"valid_freq", o.valid_freq}, {"valid_metrics", o.valid_metrics},
      {"early_stopping", o.early_stopping}, {"valid_mini_batch", o.valid_mini_batch},
      {"src_vocab_size", o.src_vocab_size}, {"tgt_vocab_size", o.tgt_vocab_size},
      {"save_freq", o.save_freq}, {"resume", o.resume},
      {"exponential_smoothing", o.exponential_smoothing}};
  return {{"preset", o.preset}, {"model", effective_model_config(o).to_json()}, {"training", training}};
}

std::string checkpoint_path(const std::string& model_path) {
  std::filesystem::path p(model_path);
  return (p.parent_path() / (p.stem().string() + ".checkpoint" + p.extension().string())).string();
}

TrainResult fit(Transformer& model, const std::vector<Example>& train_examples,
                const std::vector<Example>& valid_examples, const TrainOptions& opts,
                const SaveCallback& save, const ValidationText* valid_text,
                const CheckpointCallback& checkpoint, const TrainState* resume) {
  if (train_examples.empty()) throw DataError("training corpus has no usable sentence pairs");
  if (opts.after_epochs <= 0 && opts.after_steps <= 0)
    throw ConfigError("set --after-epochs or --after-steps: training needs a stopping point");
  if (opts.valid_metrics.empty()) throw ConfigError("--valid-metrics: at least one metric is needed");
  for (size_t i = 0; i < opts.valid_metrics.size(); ++i) {
    const std::string& m = opts.valid_metrics[i];
    const auto& names = valid_metric_names();
    if (std::find(names.begin(), names.end(), m) == names.end())
      throw ConfigError("--valid-metrics: unknown metric '" + m +
                        "' (cross-entropy, perplexity, chrf or bleu)");
    if (std::find(opts.valid_metrics.begin(), opts.valid_metrics.begin() + i, m) !=
        opts.valid_metrics.begin() + i)
      throw ConfigError("--valid-metrics: '" + m + "' is listed twice");
  }
  if (opts.early_stopping < 0) throw ConfigError("--early-stopping must be ≥ 0");
  if (!(opts.exponential_smoothing >= 0 && opts.exponential_smoothing < 1))
    throw ConfigError("--exponential-smoothing must be in [0, 1)");
  const bool translate = !valid_examples.empty() && needs_translation(opts);
  if (translate && (valid_text == nullptr || valid_text->tgt_tokenizer == nullptr ||
                    valid_text->references.size() != valid_examples.size()))
    throw ConfigError("chrf/bleu validation and --valid-translation-output need the target "
                      "tokenizer and one reference per validation example");
  if (translate && !opts.valid_translation_output.empty())
    write_lines(opts.valid_translation_output, {});  // fail now, not after the first interval
  TrainResult result;
  result.best_valid_cross_entropy = std::numeric_limits<double>::quiet_NaN();
  result.best_valid_perplexity = std::numeric_limits<double>::quiet_NaN();
  Rng rng(opts.seed);
  Adam adam(model.params());
  ForwardCache cache;
  Mat logits, dlogits;
  const DropoutContext dctx{&rng};
  const bool live = !opts.quiet && ::isatty(STDERR_FILENO);
  auto t0 = Clock::now();
  int64_t step = 0, tokens_total = 0;
  double best_ce = std::numeric_limits<double>::infinity();
  int stalled = 0;  // validations since the first metric last improved
  int first_epoch = 1;
  if (resume) {
    const size_t n = model.params().params().size();
    if (resume->adam_m.size() != n || resume->adam_v.size() != n)
      throw ConfigError("checkpoint: optimizer state does not match the model");
    for (size_t i = 0; i < n; ++i) {
      const Mat& p = model.params().params()[i].value;
      if (resume->adam_m[i].rows() != p.rows() || resume->adam_m[i].cols() != p.cols() ||
          resume->adam_v[i].rows() != p.rows() || resume->adam_v[i].cols() != p.cols())
        throw ConfigError("checkpoint: optimizer state of " + model.params().params()[i].name + " has the wrong shape");
    }
    adam.first_moments() = resume->adam_m;
    adam.second_moments() = resume->adam_v;
    if (opts.exponential_smoothing > 0) {
      if (resume->ema.size() != n) throw ConfigError("checkpoint: EMA weights do not match the model");
      for (size_t i = 0; i < n; ++i) {
        const Mat& p = model.params().params()[i].value;
        if (resume->ema[i].rows() != p.rows() || resume->ema[i].cols() != p.cols())
          throw ConfigError("checkpoint: EMA weights of " + model.params().params()[i].name + " have the wrong shape");
      }
    }
    step = resume->step;
    tokens_total = resume->tokens_total;
    best_ce = resume->best_ce;
    stalled = resume->stalled;
    first_epoch = resume->epoch;
    result.epoch_losses = resume->epoch_losses;
    result.best_valid = resume->best_valid;
    if (std::isfinite(best_ce)) {
      result.best_valid_cross_entropy = best_ce;
      result.best_valid_perplexity = std::exp(best_ce);
    }
    t0 -= std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(resume->elapsed_seconds));
  }

  // Exponential smoothing: θ_ema in registry order; swap_ema() exchanges it with the live
  // weights (O(1) per matrix) around validation and saving.
  const bool smoothing = opts.exponential_smoothing > 0;
  std::vector<Mat> ema;
  if (smoothing) {
    if (resume) {
      ema = resume->ema;
    } else {
      for (const Param& p : model.params().params()) ema.push_back(p.value);
    }
  }
  auto swap_ema = [&] {
    if (!smoothing) return;
    auto& params = model.params().params();
    for (size_t i = 0; i < params.size(); ++i) params[i].value.swap(ema[i]);
  };
  auto update_ema = [&] {
    if (!smoothing) return;
    const double t = static_cast<double>(step);
    const Scalar beta = static_cast<Scalar>(std::min(1.0 - opts.exponential_smoothing, (1.0 + t) / (10.0 + t)));
    const auto& params = model.params().params();
    for (size_t i = 0; i < params.size(); ++i)
      ema[i] = beta * ema[i] + (Scalar(1) - beta) * params[i].value;
  };

  // Batches per epoch, for the ETA (bucketing gives nearly the same count every epoch).
  Rng probe_rng(opts.seed);
  const int64_t batches_per_epoch =
      static_cast<int64_t>(bucket_batches(train_examples, opts.batch_tokens, probe_rng).size());
  int64_t planned_steps = opts.after_epochs > 0 ? batches_per_epoch * opts.after_epochs
                                                : std::numeric_limits<int64_t>::max();
  if (opts.after_steps > 0) planned_steps = std::min(planned_steps, opts.after_steps);

  // One validation: every metric of opts.valid_metrics, one log line, the best model of each
  // improved metric saved. Uses no random numbers (the training RNG is untouched). Returns true
  // when early stopping says training should end.
  auto validate_raw = [&]() -> bool {
    if (valid_examples.empty()) return false;
    ValidationResult v;
    v.step = step;
    const auto& metrics = opts.valid_metrics;
    const bool want_ce = std::find(metrics.begin(), metrics.end(), "cross-entropy") != metrics.end() ||
                         std::find(metrics.begin(), metrics.end(), "perplexity") != metrics.end();
    double ce = std::numeric_limits<double>::quiet_NaN();
    if (want_ce) ce = evaluate_cross_entropy(model, valid_examples, opts.batch_tokens);
    std::vector<std::string> hyps;
    if (translate) {
      hyps = translate_examples(model, valid_examples, *valid_text->tgt_tokenizer, opts.valid_mini_batch);
      if (!opts.valid_translation_output.empty()) write_lines(opts.valid_translation_output, hyps);
    }
    for (const auto& m : metrics) {
      double x = 0;
      if (m == "cross-entropy") x = ce;
      else if (m == "perplexity") x = std::exp(ce);
      else if (m == "chrf") x = corpus_chrf(hyps, valid_text->references).score;
      else if (m == "bleu") x = corpus_bleu(hyps, valid_text->references).score;
      v.scores[m] = x;
      const auto it = result.best_valid.find(m);
      const bool better = it == result.best_valid.end() ||
                          (lower_is_better(m) ? x < it->second : x > it->second);
      if (better) {
        result.best_valid[m] = x;
        v.improved.push_back(m);
      }
    }
    if (want_ce && ce < best_ce) {
      best_ce = ce;
      result.best_valid_cross_entropy = ce;
      result.best_valid_perplexity = std::exp(ce);
    }
    const bool first_improved = !v.improved.empty() && v.improved.front() == metrics.front();
    stalled = first_improved ? 0 : stalled + 1;

    std::string line = "valid step " + std::to_string(step);
    for (const auto& m : metrics) line += " | " + format_metric(m, v.scores[m]);
    // The perplexity of the cross-entropy is free: shown even when not listed.
    if (want_ce && std::find(metrics.begin(), metrics.end(), "perplexity") == metrics.end())
      line += " | " + format_metric("perplexity", std::exp(ce));
    if (!v.improved.empty()) {
      line += " | new best";
      if (metrics.size() > 1) {
        line += ":";
        for (size_t i = 0; i < v.improved.size(); ++i) line += (i ? ", " : " ") + v.improved[i];
      }
    }
    if (stalled > 0) {
      line += " | stalled " + std::to_string(stalled) + "x";
      if (opts.early_stopping > 0) line += " of " + std::to_string(opts.early_stopping);
    }
    if (live) std::fprintf(stderr, "\r\033[K");
    spdlog::info("{}", line);
    result.validations.push_back(v);
    if (save && !v.improved.empty()) {
      check_finite_weights(model.params(), step);
      for (const auto& m : v.improved) save("best-" + m, result);
    }
    return opts.early_stopping > 0 && stalled >= opts.early_stopping;
  };
  // Runs f with the EMA weights in the model (when smoothing), swapping back even on a throw.
  auto with_ema = [&](const auto& f) {
    swap_ema();
    struct SwapBack {
      const std::function<void()> f;
      ~SwapBack() { f(); }
    } back{swap_ema};
    return f();
  };
  auto validate = [&]() -> bool { return with_ema(validate_raw); };

  bool stop = false;
  for (int epoch = first_epoch; !stop && (opts.after_epochs <= 0 || epoch <= opts.after_epochs); ++epoch) {
    const bool resuming = resume != nullptr && epoch == first_epoch;
    if (resuming) std::istringstream(resume->rng_epoch_start) >> rng;
    std::ostringstream rng_epoch_start;
    rng_epoch_start << rng;
    const auto batches = bucket_batches(train_examples, opts.batch_tokens, rng);
    double epoch_loss = resuming ? resume->epoch_loss : 0;
    int64_t epoch_tokens = resuming ? resume->epoch_tokens : 0;
    size_t first_batch = 0;
    if (resuming) {
      std::istringstream(resume->rng) >> rng;
      first_batch = static_cast<size_t>(resume->next_batch);
      if (first_batch > batches.size()) throw ConfigError("checkpoint: batch position beyond the epoch");
    }
    for (size_t bi = first_batch; bi < batches.size(); ++bi) {
      const auto& idx = batches[bi];
      std::vector<const Example*> ptrs;
      ptrs.reserve(idx.size());
      for (int i : idx) ptrs.push_back(&train_examples[i]);
      const Batch b = make_batch(ptrs);
      ++step;
      model.params().zero_grad();
      model.forward(b, dctx, cache, logits);
      const LossStats ls = label_smoothed_cross_entropy(
          logits, b.tgt_out, opts.label_smoothing, &dlogits, static_cast<double>(b.n_tgt_tokens()));
      const double loss = ls.loss_sum / static_cast<double>(ls.n_tokens);
      if (!std::isfinite(loss))
        throw NumericError("step " + std::to_string(step) +
                           ": training loss is NaN or Inf; training stopped, the last saved model is kept");
      model.backward(b, dlogits, cache);
      check_finite_gradients(model.params(), step);
      clip_grad_norm(model.params(), opts.clip_norm);
      const double lr = inverse_sqrt_lr(opts.learning_rate, step, opts.warmup_steps);
      adam.step(model.params(), lr, step);
      update_ema();
      epoch_loss += ls.loss_sum;
      epoch_tokens += ls.n_tokens;
      tokens_total += ls.n_tokens;

      const double elapsed = seconds_since(t0);
      const double tps = tokens_total / std::max(elapsed, 1e-9);
      const double eta = planned_steps == std::numeric_limits<int64_t>::max()
                             ? -1
                             : elapsed / step * static_cast<double>(planned_steps - step);
      if (live)
        std::fprintf(stderr,
                     "\r\033[Kepoch %d | step %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s | "
                     "elapsed %s | ETA %s",
                     epoch, static_cast<long long>(step), static_cast<long long>(planned_steps),
                     loss, lr, tps, hms(elapsed).c_str(), hms(eta).c_str());
      if (opts.disp_freq > 0 && step % opts.disp_freq == 0) {
        if (live) std::fprintf(stderr, "\r\033[K");
        spdlog::info("epoch {} | step {} | loss {:.4f} | lr {:.2e} | {:.0f} tgt tok/s | elapsed {} | ETA {}",
                     epoch, step, loss, lr, tps, hms(elapsed), hms(eta));
      }
      if (opts.valid_freq > 0 && step % opts.valid_freq == 0 && validate()) {
        spdlog::info("early stopping at step {}: {} validations without a better {}", step,
                     opts.early_stopping, opts.valid_metrics.front());
        result.early_stopped = true;
        stop = true;
        break;
      }
      if (opts.after_steps > 0 && step >= opts.after_steps) {
        stop = true;
        break;
      }
      if (opts.on_step) opts.on_step(step);
      const bool interrupt = stop_requested();
      if (checkpoint && (interrupt || (opts.save_freq > 0 && step % opts.save_freq == 0))) {
        check_finite_weights(model.params(), step);
        TrainState st;
        st.step = step;
        st.epoch = epoch;
        st.next_batch = static_cast<int64_t>(bi + 1);
        st.rng_epoch_start = rng_epoch_start.str();
        std::ostringstream now;
        now << rng;
        st.rng = now.str();
        st.epoch_loss = epoch_loss;
        st.epoch_tokens = epoch_tokens;
        st.tokens_total = tokens_total;
        st.elapsed_seconds = seconds_since(t0);
        st.stalled = stalled;
        st.best_ce = best_ce;
        st.epoch_losses = result.epoch_losses;
        st.best_valid = result.best_valid;
        st.adam_m = adam.first_moments();
        st.adam_v = adam.second_moments();
        st.ema = ema;
        checkpoint(st);
      }
      if (interrupt) {
        if (live) std::fprintf(stderr, "\r\033[K");
        result.interrupted = true;
        result.epochs = epoch;
        result.steps = step;
        result.seconds = seconds_since(t0);
        result.tgt_tokens_per_second = tokens_total / std::max(result.seconds, 1e-9);
        return result;
      }
    }
    result.epochs = epoch;
    result.epoch_losses.push_back(epoch_loss / static_cast<double>(std::max<int64_t>(epoch_tokens, 1)));
  }
  if (live) std::fprintf(stderr, "\r\033[K");
  if (opts.valid_freq <= 0 || step % opts.valid_freq != 0) validate();  // (never after an early stop)
  result.steps = step;
  result.seconds = seconds_since(t0);
  result.tgt_tokens_per_second = tokens_total / std::max(result.seconds, 1e-9);
  result.last_train_loss = result.epoch_losses.empty() ? 0 : result.epoch_losses.back();
  if (save)
    with_ema([&] {
      check_finite_weights(model.params(), step);
      save("final", result);
    });
  return result;
}

TrainResult train(const TrainOptions& opts) {
  configure_threads(opts.cpu_threads);
  ModelConfig cfg = effective_model_config(opts);
  const auto train_pairs = read_parallel_corpus(opts.train_sets);
  std::vector<SentencePair> valid_pairs;
  if (!opts.valid_sets.empty()) valid_pairs = read_parallel_corpus(opts.valid_sets);
  spdlog::info("corpus: {} training pairs, {} validation pairs", train_pairs.size(), valid_pairs.size());

  // Check the output location before spending minutes on training.
  const std::filesystem::path model_dir = std::filesystem::path(opts.model_path).parent_path();
  if (!model_dir.empty()) std::filesystem::create_directories(model_dir);

  std::vector<std::string> src_text, tgt_text;
  std::vector<std::pair<std::string, std::string>> train_text, valid_text;
  for (const auto& p : train_pairs) {
    src_text.push_back(p.src);
    tgt_text.push_back(p.tgt);
    train_text.emplace_back(p.src, p.tgt);
  }
  for (const auto& p : valid_pairs) valid_text.emplace_back(p.src, p.tgt);

  // The options a resumed run must share with the run that wrote the checkpoint.
  const nlohmann::json fingerprint = {
      {"config", cfg.to_json()}, {"preset", opts.preset},
      {"exponential_smoothing", opts.exponential_smoothing},
      {"train_sets", opts.train_sets}, {"valid_sets", opts.valid_sets}, {"seed", opts.seed},
      {"batch_tokens", opts.batch_tokens}, {"learning_rate", opts.learning_rate},
      {"warmup_steps", opts.warmup_steps}, {"label_smoothing", opts.label_smoothing},
      {"clip_norm", opts.clip_norm}, {"src_vocab_size", opts.src_vocab_size},
      {"tgt_vocab_size", opts.tgt_vocab_size}, {"valid_metrics", opts.valid_metrics},
      {"valid_freq", opts.valid_freq}, {"early_stopping", opts.early_stopping}};
  const std::string ckpt = checkpoint_path(opts.model_path);
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> src_tok, tgt_tok;
  TrainState resume_state;
  bool resuming = false;
  if (std::filesystem::exists(ckpt) && !opts.resume) {
    spdlog::info("--no-resume: removing the checkpoint {} and starting over", ckpt);
    std::filesystem::remove(ckpt);
  } else if (std::filesystem::exists(ckpt)) {
    SafetensorsFile f = read_safetensors(ckpt);
    const auto meta = [&](const std::string& key) -> std::string {
      const auto it = f.metadata.find(key);
      if (it == f.metadata.end()) throw ModelFileError(ckpt + ": not an anuvad checkpoint (metadata \"" + key + "\" missing)");
      return it->second;
    };
    nlohmann::json saved_options, state_json;
    try {
      saved_options = nlohmann::json::parse(meta("training_options"));
      state_json = nlohmann::json::parse(meta("training_state"));
    } catch (const nlohmann::json::exception&) {
      throw ModelFileError(ckpt + ": checkpoint metadata is not valid JSON");
    }
    for (auto it = fingerprint.begin(); it != fingerprint.end(); ++it)
      if (!saved_options.contains(it.key()) || saved_options[it.key()] != it.value())
        throw ConfigError(ckpt + ": checkpoint was written with another " + it.key() + " (" +
                          (saved_options.contains(it.key()) ? saved_options[it.key()].dump() : "none") +
                          " instead of " + it.value().dump() +
                          "); rerun with the same options, or pass --no-resume to start over");
    if (meta("threads") != std::to_string(omp_get_max_threads()))
      spdlog::warn("checkpoint was written with {} threads, now {}: the run will not be bit-identical",
                   meta("threads"), omp_get_max_threads());
    try {
      resume_state.counters_from_json(state_json);
    } catch (const ConfigError& e) {
      throw ModelFileError(ckpt + ": " + e.what());
    }
    std::map<std::string, RawTensor> adam_tensors;
    for (auto it = f.tensors.begin(); it != f.tensors.end();) {
      if (it->first.rfind("adam.", 0) == 0 || it->first.rfind("ema.", 0) == 0) {
        adam_tensors[it->first] = std::move(it->second);
        it = f.tensors.erase(it);
      } else {
        ++it;
      }
    }
    TranslationModel loaded = model_from_safetensors(std::move(f), ckpt, "adam.");
    model = std::move(loaded.transformer);
    src_tok = std::move(loaded.src_tokenizer);
    tgt_tok = std::move(loaded.tgt_tokenizer);
    cfg = model->config();
    const bool with_ema = opts.exponential_smoothing > 0;
    for (const Param& p : model->params().params()) {
      for (const char* kind : {"adam.m.", "adam.v.", "ema."}) {
        if (kind[0] == 'e' && !with_ema) continue;
        const auto it = adam_tensors.find(kind + p.name);
        if (it == adam_tensors.end() || it->second.dtype != "F32" ||
            it->second.bytes.size() != size_t(p.value.size()) * sizeof(float))
          throw ModelFileError(ckpt + ": optimizer/EMA tensor " + std::string(kind) + p.name + " missing or misshapen");
        Mat m(p.value.rows(), p.value.cols());
        for (Index i = 0; i < m.size(); ++i) {
          float x;
          std::memcpy(&x, &it->second.bytes[size_t(i) * sizeof(float)], sizeof(float));
          m.data()[i] = static_cast<Scalar>(x);
        }
        (kind[0] == 'e' ? resume_state.ema : kind[5] == 'm' ? resume_state.adam_m : resume_state.adam_v)
            .push_back(std::move(m));
      }
    }
    resuming = true;
    spdlog::info("resuming from {} at step {} (epoch {}, {} of its batches done)", ckpt, resume_state.step,
                 resume_state.epoch, resume_state.next_batch);
  }
  if (!resuming) {
    src_tok = std::make_unique<Tokenizer>(Tokenizer::train(src_text, {opts.src_vocab_size, "unigram"}));
    tgt_tok = std::make_unique<Tokenizer>(Tokenizer::train(tgt_text, {opts.tgt_vocab_size, "unigram"}));
    cfg.src_vocab_size = src_tok->vocab_size();
    cfg.tgt_vocab_size = tgt_tok->vocab_size();
    cfg.validate();
  }
  spdlog::info("SentencePiece vocabularies: {} source, {} target pieces", cfg.src_vocab_size,
               cfg.tgt_vocab_size);

  int skipped = 0, skipped_valid = 0;
  std::vector<size_t> valid_kept;
  const auto train_examples = make_examples(train_text, *src_tok, *tgt_tok, cfg.max_positions - 1, &skipped);
  const auto valid_examples =
      make_examples(valid_text, *src_tok, *tgt_tok, cfg.max_positions - 1, &skipped_valid, &valid_kept);
  ValidationText valid_refs;
  valid_refs.tgt_tokenizer = tgt_tok.get();
  for (size_t i : valid_kept) valid_refs.references.push_back(valid_pairs[i].tgt);
  if (skipped + skipped_valid > 0)
    spdlog::warn("skipped {} training and {} validation pairs longer than max_positions − 1 = {} subwords",
                 skipped, skipped_valid, cfg.max_positions - 1);

  if (!model) {
    model = std::make_unique<Transformer>(cfg);
    model->init_parameters(opts.seed);
  }
  spdlog::info("model: d_model {} | heads {} | d_ff {} | layers {}+{} | {}-norm | dropout {}/{}/{} | {} parameters | {} threads",
               cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.encoder_layers, cfg.decoder_layers, cfg.norm,
               cfg.dropout, cfg.attention_dropout, cfg.ffn_dropout,
               model->params().num_elements(), omp_get_max_threads());
  spdlog::info("training: preset {} | lr {} | warm-up {} | label smoothing {} | exponential smoothing {}",
               opts.preset, opts.learning_rate, opts.warmup_steps, opts.label_smoothing,
               opts.exponential_smoothing > 0 ? std::to_string(opts.exponential_smoothing) : "off");

  auto write_checkpoint = [&](const TrainState& st) {
    SafetensorsFile f = model_to_safetensors(*model, *src_tok, *tgt_tok,
                                             {{"training_options", fingerprint.dump()},
                                              {"training_state", st.counters_to_json().dump()},
                                              {"threads", std::to_string(omp_get_max_threads())}});
    const auto& params = model->params().params();
    for (size_t i = 0; i < params.size(); ++i)
      for (const auto* mats : {&st.adam_m, &st.adam_v, &st.ema}) {
        if (mats->empty()) continue;  // no EMA without smoothing
        RawTensor t;
        t.dtype = "F32";
        t.shape = params[i].shape;
        const Mat& m = (*mats)[i];
        t.bytes.resize(size_t(m.size()) * sizeof(float));
        for (Index k = 0; k < m.size(); ++k) {
          const float x = static_cast<float>(m.data()[k]);
          std::memcpy(&t.bytes[size_t(k) * sizeof(float)], &x, sizeof(float));
        }
        f.tensors[(mats == &st.adam_m ? "adam.m." : mats == &st.adam_v ? "adam.v." : "ema.") + params[i].name] =
            std::move(t);
      }
    write_safetensors(ckpt, f);
  };
  auto save = [&](const std::string& which, const TrainResult& r) {
    std::map<std::string, std::string> meta = {
        {"seed", std::to_string(opts.seed)},
        {"epochs", std::to_string(r.epochs)},
        {"train_sets", nlohmann::json(opts.train_sets).dump()},
        {"valid_metrics", nlohmann::json(opts.valid_metrics).dump()}};
    if (std::isfinite(r.best_valid_cross_entropy)) {
      meta["best_valid_cross_entropy"] = std::to_string(r.best_valid_cross_entropy);
      meta["best_valid_perplexity"] = std::to_string(r.best_valid_perplexity);
    }
    for (const auto& [m, v] : r.best_valid) {
      std::string key = "best_valid_" + m;
      std::replace(key.begin(), key.end(), '-', '_');
      meta[key] = std::to_string(v);
    }
    const bool best = which.rfind("best-", 0) == 0;
    const std::string path = best ? best_model_path(opts.model_path, which.substr(5)) : opts.model_path;
    save_model(path, *model, *src_tok, *tgt_tok, meta);
    if (which == "final") spdlog::info("saved model to {}", path);
  };
  TrainResult r = fit(*model, train_examples, valid_examples, opts, save, &valid_refs,
                      write_checkpoint, resuming ? &resume_state : nullptr);
  if (r.interrupted) {
    spdlog::warn("interrupted after step {}: checkpoint saved to {}; run the same command again to continue",
                 r.steps, ckpt);
    return r;
  }
  std::filesystem::remove(ckpt);  // finished: the final model supersedes the checkpoint
  spdlog::info("done: {} epochs, {} steps in {:.1f} s, {:.0f} target tokens/s, final train loss {:.4f}{}",
               r.epochs, r.steps, r.seconds, r.tgt_tokens_per_second, r.last_train_loss,
               r.early_stopped ? " (early stopping)" : "");
  for (const auto& m : opts.valid_metrics) {
    const auto it = r.best_valid.find(m);
    if (it == r.best_valid.end()) continue;
    if (m == "cross-entropy")
      spdlog::info("best dev cross-entropy {:.4f} nats/token, perplexity {:.2f} (kept in {})",
                   it->second, std::exp(it->second), best_model_path(opts.model_path, m));
    else
      spdlog::info("best dev {} (kept in {})", format_metric(m, it->second),
                   best_model_path(opts.model_path, m));
  }
  return r;
}

}  // namespace anuvad
