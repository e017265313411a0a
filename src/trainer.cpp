// The training job: tokenizer training, batching, the update loop, validation and saving.
#include "anuvad/trainer.h"

#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "anuvad/adam.h"
#include "anuvad/corpus.h"
#include "anuvad/error.h"
#include "anuvad/loss.h"
#include "anuvad/model_file.h"

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

/// Throws NumericError naming the first parameter whose gradient holds a NaN or Inf.
void check_gradients(const ParamRegistry& reg, int64_t step) {
  for (const Param& p : reg.params())
    if (!p.grad.allFinite())
      throw NumericError("step " + std::to_string(step) + ": gradient of " + p.name +
                         " is NaN or Inf; training stopped, the last saved model is kept");
}

std::string best_model_path(const std::string& model_path) {
  std::filesystem::path p(model_path);
  std::string stem = p.stem().string();
  return (p.parent_path() / (stem + ".best-cross-entropy" + p.extension().string())).string();
}

}  // namespace

std::vector<Example> make_examples(const std::vector<std::pair<std::string, std::string>>& pairs,
                                   const Tokenizer& src, const Tokenizer& tgt, int max_tokens,
                                   int* skipped) {
  std::vector<Example> out;
  out.reserve(pairs.size());
  int n_skipped = 0;
  for (const auto& [s, t] : pairs) {
    Example e{src.encode(s), tgt.encode(t)};
    if (static_cast<int>(e.src.size()) > max_tokens || static_cast<int>(e.tgt.size()) > max_tokens) {
      ++n_skipped;
      continue;
    }
    out.push_back(std::move(e));
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

TrainResult fit(Transformer& model, const std::vector<Example>& train_examples,
                const std::vector<Example>& valid_examples, const TrainOptions& opts,
                const SaveCallback& save) {
  if (train_examples.empty()) throw DataError("training corpus has no usable sentence pairs");
  if (opts.after_epochs <= 0 && opts.after_steps <= 0)
    throw ConfigError("set --after-epochs or --after-steps: training needs a stopping point");
  TrainResult result;
  result.best_valid_cross_entropy = std::numeric_limits<double>::quiet_NaN();
  result.best_valid_perplexity = std::numeric_limits<double>::quiet_NaN();
  Rng rng(opts.seed);
  Adam adam(model.params());
  ForwardCache cache;
  Mat logits, dlogits;
  const DropoutContext dctx{&rng};
  const bool live = !opts.quiet && ::isatty(STDERR_FILENO);
  const auto t0 = Clock::now();
  int64_t step = 0, tokens_total = 0;
  double best_ce = std::numeric_limits<double>::infinity();

  // Batches per epoch, for the ETA (bucketing gives nearly the same count every epoch).
  Rng probe_rng(opts.seed);
  const int64_t batches_per_epoch =
      static_cast<int64_t>(bucket_batches(train_examples, opts.batch_tokens, probe_rng).size());
  int64_t planned_steps = opts.after_epochs > 0 ? batches_per_epoch * opts.after_epochs
                                                : std::numeric_limits<int64_t>::max();
  if (opts.after_steps > 0) planned_steps = std::min(planned_steps, opts.after_steps);

  auto validate = [&]() {
    if (valid_examples.empty()) return;
    const double ce = evaluate_cross_entropy(model, valid_examples, opts.batch_tokens);
    const bool better = ce < best_ce;
    if (live) std::fprintf(stderr, "\r\033[K");
    spdlog::info("valid step {} | cross-entropy {:.4f} nats/token | perplexity {:.2f}{}", step, ce,
                 std::exp(ce), better ? " | new best" : "");
    if (better) {
      best_ce = ce;
      result.best_valid_cross_entropy = ce;
      result.best_valid_perplexity = std::exp(ce);
      if (save) save("best", result);
    }
  };

  bool stop = false;
  for (int epoch = 1; !stop && (opts.after_epochs <= 0 || epoch <= opts.after_epochs); ++epoch) {
    const auto batches = bucket_batches(train_examples, opts.batch_tokens, rng);
    double epoch_loss = 0;
    int64_t epoch_tokens = 0;
    for (const auto& idx : batches) {
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
      check_gradients(model.params(), step);
      clip_grad_norm(model.params(), opts.clip_norm);
      const double lr = inverse_sqrt_lr(opts.learning_rate, step, opts.warmup_steps);
      adam.step(model.params(), lr, step);
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
      if (opts.valid_freq > 0 && step % opts.valid_freq == 0) validate();
      if (opts.after_steps > 0 && step >= opts.after_steps) {
        stop = true;
        break;
      }
    }
    result.epochs = epoch;
    result.epoch_losses.push_back(epoch_loss / static_cast<double>(std::max<int64_t>(epoch_tokens, 1)));
  }
  if (live) std::fprintf(stderr, "\r\033[K");
  if (opts.valid_freq <= 0 || step % opts.valid_freq != 0) validate();
  result.steps = step;
  result.seconds = seconds_since(t0);
  result.tgt_tokens_per_second = tokens_total / std::max(result.seconds, 1e-9);
  result.last_train_loss = result.epoch_losses.empty() ? 0 : result.epoch_losses.back();
  if (save) save("final", result);
  return result;
}

TrainResult train(const TrainOptions& opts) {
  if (opts.cpu_threads > 0) omp_set_num_threads(opts.cpu_threads);
  ModelConfig cfg;
  if (!opts.config_path.empty()) {
    std::ifstream in(opts.config_path);
    if (!in) throw IoError(opts.config_path + ": cannot open config file");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(opts.config_path + ": not valid JSON (" + e.what() + ")");
    }
    cfg = ModelConfig::from_json(j, opts.config_path);
  }
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
  const Tokenizer src_tok = Tokenizer::train(src_text, {opts.src_vocab_size, "unigram"});
  const Tokenizer tgt_tok = Tokenizer::train(tgt_text, {opts.tgt_vocab_size, "unigram"});
  cfg.src_vocab_size = src_tok.vocab_size();
  cfg.tgt_vocab_size = tgt_tok.vocab_size();
  cfg.validate();
  spdlog::info("SentencePiece vocabularies: {} source, {} target pieces", cfg.src_vocab_size,
               cfg.tgt_vocab_size);

  int skipped = 0, skipped_valid = 0;
  const auto train_examples = make_examples(train_text, src_tok, tgt_tok, cfg.max_positions - 1, &skipped);
  const auto valid_examples = make_examples(valid_text, src_tok, tgt_tok, cfg.max_positions - 1, &skipped_valid);
  if (skipped + skipped_valid > 0)
    spdlog::warn("skipped {} training and {} validation pairs longer than max_positions − 1 = {} subwords",
                 skipped, skipped_valid, cfg.max_positions - 1);

  Transformer model(cfg);
  model.init_parameters(opts.seed);
  spdlog::info("model: d_model {} | heads {} | d_ff {} | layers {}+{} | {}-norm | {} parameters | {} threads",
               cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.encoder_layers, cfg.decoder_layers, cfg.norm,
               model.params().num_elements(), omp_get_max_threads());

  const std::string best_path = best_model_path(opts.model_path);
  auto save = [&](const std::string& which, const TrainResult& r) {
    std::map<std::string, std::string> meta = {
        {"seed", std::to_string(opts.seed)},
        {"epochs", std::to_string(r.epochs)},
        {"train_sets", nlohmann::json(opts.train_sets).dump()}};
    if (std::isfinite(r.best_valid_cross_entropy)) {
      meta["best_valid_cross_entropy"] = std::to_string(r.best_valid_cross_entropy);
      meta["best_valid_perplexity"] = std::to_string(r.best_valid_perplexity);
    }
    const std::string& path = which == "best" ? best_path : opts.model_path;
    save_model(path, model, src_tok, tgt_tok, meta);
    if (which == "final") spdlog::info("saved model to {}", path);
  };
  TrainResult r = fit(model, train_examples, valid_examples, opts, save);
  spdlog::info("done: {} epochs, {} steps in {:.1f} s, {:.0f} target tokens/s, final train loss {:.4f}",
               r.epochs, r.steps, r.seconds, r.tgt_tokens_per_second, r.last_train_loss);
  if (std::isfinite(r.best_valid_cross_entropy))
    spdlog::info("best dev cross-entropy {:.4f} nats/token, perplexity {:.2f} (kept in {})",
                 r.best_valid_cross_entropy, r.best_valid_perplexity, best_path);
  return r;
}

}  // namespace anuvad
