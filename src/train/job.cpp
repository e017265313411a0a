// The training job, train(): corpora, tokenizers (or the checkpoint to resume from), fit(), the
// saved models and the closing summary.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/runtime.h"
#include "anuvad/io/average.h"
#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/text/corpus.h"
#include "anuvad/train/best_models.h"
#include "anuvad/train/replicas.h"
#include "anuvad/train/subword_sampling.h"
#include "anuvad/train/trainer.h"
#include "anuvad/train/training_log.h"

namespace anuvad {

namespace {

/// The corpora of a run as text.
struct CorpusText {
  std::vector<std::string> src, tgt;  ///< training sources and targets (for the tokenizers)
  std::vector<std::pair<std::string, std::string>> train, valid;
};

/// Reads opts.train_sets and opts.valid_sets; logs their sizes.
CorpusText read_corpora(const TrainOptions& opts) {
  const auto train_pairs = read_parallel_corpus(opts.train_sets);
  std::vector<SentencePair> valid_pairs;
  if (!opts.valid_sets.empty()) valid_pairs = read_parallel_corpus(opts.valid_sets);
  spdlog::info("corpus: {} training pairs, {} validation pairs", train_pairs.size(), valid_pairs.size());
  CorpusText c;
  for (const auto& p : train_pairs) {
    c.src.push_back(p.src);
    c.tgt.push_back(p.tgt);
    c.train.emplace_back(p.src, p.tgt);
  }
  for (const auto& p : valid_pairs) c.valid.emplace_back(p.src, p.tgt);
  return c;
}

/// What a job trains: the model (null until initialised for a new run), its tokenizers and
/// config, and the state to continue from when resuming.
struct JobModel {
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> src_tok, tgt_tok;
  ModelConfig cfg;
  std::optional<TrainState> resume;
};

/// The checkpoint `ckpt` when there is one and opts.resume (removed with --no-resume; refused
/// with a DataError when a training corpus file no longer has its hash in `hashes`); else
/// tokenizers trained on the corpus and opts.model with their vocabulary sizes. Under mpirun,
/// rank 0's checkpoint or tokenizers on every rank (train/replicas.h).
JobModel start_or_resume(const TrainOptions& opts, const nlohmann::json& fingerprint,
                         const nlohmann::json& hashes, const std::string& ckpt,
                         const CorpusText& corpus) {
  JobModel j;
  j.cfg = opts.model;
  if (is_root_rank() && std::filesystem::exists(ckpt) && !opts.resume) {
    spdlog::info("--no-resume: removing the checkpoint {} and starting over", ckpt);
    std::filesystem::remove(ckpt);
  }
  // Under mpirun, rank 0 decides and every rank gets its checkpoint or its tokenizers.
  std::string resuming = is_root_rank() && std::filesystem::exists(ckpt) ? "resume" : "";
  broadcast(resuming);
  if (!resuming.empty()) {
    Checkpoint c = broadcast_checkpoint(ckpt, fingerprint, opts.exponential_smoothing > 0);
    if (c.corpus_hashes.is_null())
      spdlog::warn("{} predates corpus hashes: resuming without checking that the corpus is unchanged", ckpt);
    check_corpus_unchanged(c.corpus_hashes, hashes, ckpt);
    j.model = std::move(c.model.transformer);
    j.src_tok = std::move(c.model.src_tokenizer);
    j.tgt_tok = std::move(c.model.tgt_tokenizer);
    j.cfg = j.model->config();
    spdlog::info("resuming from {} at step {} (epoch {}, {} of its batches done)", ckpt, c.state.step,
                 c.state.epoch, c.state.next_batch);
    j.resume = std::move(c.state);
    return j;
  }
  if (is_root_rank()) {
    j.src_tok = std::make_unique<Tokenizer>(Tokenizer::train(
        corpus.src, {opts.src_vocab_size, "unigram", "source vocabulary (--src-vocab-size)"}));
    j.tgt_tok = std::make_unique<Tokenizer>(Tokenizer::train(
        corpus.tgt, {opts.tgt_vocab_size, "unigram", "target vocabulary (--tgt-vocab-size)"}));
  }
  broadcast_tokenizers(j.src_tok, j.tgt_tok);
  j.cfg.src_vocab_size = j.src_tok->vocab_size();
  j.cfg.tgt_vocab_size = j.tgt_tok->vocab_size();
  j.cfg.validate();
  return j;
}

/// The metadata of the models a run writes: seed, epochs, train_sets, valid_metrics and the
/// best_valid_* figures of `r`.
std::map<std::string, std::string> run_metadata(const TrainOptions& opts, const TrainResult& r) {
  std::map<std::string, std::string> meta = {
      {"seed", std::to_string(opts.seed)},
      {"epochs", std::to_string(r.epochs)},
      {"train_sets", nlohmann::json(opts.train_sets).dump()},
      {"valid_metrics", nlohmann::json(opts.valid_metrics).dump()}};
  const double best_ce = best_cross_entropy(r.best_valid);
  if (std::isfinite(best_ce)) {
    meta["best_valid_cross_entropy"] = std::to_string(best_ce);
    meta["best_valid_perplexity"] = std::to_string(std::exp(best_ce));
  }
  for (const auto& [m, v] : r.best_valid) {
    std::string key = "best_valid_" + m;
    std::replace(key.begin(), key.end(), '-', '_');
    meta[key] = std::to_string(v);
  }
  return meta;
}

/// --final-model average: the element-wise mean of the kept best models (io/average.h) written
/// to `path` with `meta`, "averaged_from" (their paths, best first) and final_model
/// "average-best-<metric>".
void save_average(const BestModels& best_k, std::map<std::string, std::string> meta, const std::string& path) {
  const std::vector<std::string> from = best_k.paths();
  const TranslationModel m = average_models(from);
  meta["averaged_from"] = nlohmann::json(from).dump();
  meta["final_model"] = "average-best-" + best_k.metric();
  save_model(path, *m.transformer, *m.src_tokenizer, *m.tgt_tokenizer, meta);
  spdlog::info("saved model to {} (the average of the {} best dev {} models of the run, {} … {})", path,
               from.size(), best_k.metric(), from.front(), from.back());
}

/// Writes the model fit() asks for ("final" → opts.model_path, "best-<metric>" →
/// best_model_path) with run_metadata and final_model. "final" with opts.final_model "best"
/// copies the best model of the first validation metric instead, once there is one; with
/// "average", writes the average of the models `best_k` keeps, once there is one.
void save_trained_model(const TrainOptions& opts, const JobModel& job, const BestModels* best_k,
                        const std::string& which, const TrainResult& r) {
  std::map<std::string, std::string> meta = run_metadata(opts, r);
  const bool best = which.rfind("best-", 0) == 0;
  const std::string path = best ? best_model_path(opts.model_path, which.substr(5)) : opts.model_path;
  if (which == "final" && opts.final_model == "average" && best_k && !best_k->paths().empty())
    return save_average(*best_k, meta, path);
  const std::string from =
      opts.valid_metrics.empty() ? "" : best_model_path(opts.model_path, opts.valid_metrics.front());
  if (which == "final" && opts.final_model == "best" && !from.empty() &&
      r.best_valid.count(opts.valid_metrics.front()) > 0) {
    // --final-model best: the best model of the first metric, as written at its validation.
    if (!std::filesystem::exists(from))
      throw IoError(from + ": missing; --final-model best copies it to " + path + " (or use --final-model last)");
    SafetensorsFile file = read_safetensors(from);
    file.metadata["final_model"] = "best-" + opts.valid_metrics.front();
    write_safetensors(path, file);
    spdlog::info("saved model to {} (the best dev {} of the run, a copy of {})", path,
                 opts.valid_metrics.front(), from);
    return;
  }
  meta["final_model"] = "last";
  save_model(path, *job.model, *job.src_tok, *job.tgt_tok, meta);
  if (which == "final") spdlog::info("saved model to {}", path);
}

/// The closing log lines: totals and the best value of each validation metric.
void log_summary(const TrainOptions& opts, const TrainResult& r) {
  spdlog::info("done: {} epochs, {} steps in {:.1f} s, {:.0f} target tokens/s, final train loss {:.4f}{}",
               r.epochs, r.steps, r.seconds, r.tgt_tokens_per_second, r.last_train_loss,
               r.early_stopped ? " (early stopping)" : "");
  if (r.padded_tokens > 0)
    spdlog::info("packed batches: {} real tokens; a padded layout would have computed {} ({:.1f} % padding)",
                 r.real_tokens, r.padded_tokens,
                 100.0 * double(r.padded_tokens - r.real_tokens) / double(r.padded_tokens));
  if (r.ranks > 1 && r.steps > 0)
    spdlog::info("data parallelism: {} shards per update, allreduce {} in {} bucket(s); per update {:.2f} ms "
                 "waiting for the slowest rank, {:.2f} ms in the allreduce of {:.2f} MB of gradients "
                 "({:.1f} % of the run)", r.ranks, r.allreduce, r.allreduce_buckets,
                 1e3 * r.allreduce_wait_seconds / double(r.steps), 1e3 * r.allreduce_seconds / double(r.steps),
                 double(r.gradient_bytes) / 1e6, 100.0 * r.allreduce_seconds / std::max(r.seconds, 1e-9));
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
}

/// The "start" event of the structured training log of `job`.
nlohmann::json run_start_event(const TrainOptions& opts, const JobModel& job, size_t n_train, size_t n_valid) {
  RunDescription run;
  run.opts = &opts;
  run.model = job.cfg;
  run.parameters = static_cast<int64_t>(job.model->params().num_elements());
  run.threads = omp_get_max_threads();
  run.train_examples = n_train;
  run.valid_examples = n_valid;
  run.resumed_from_step = job.resume ? job.resume->step : 0;
  return start_event(run);
}

/// The K best models of a --final-model average run on rank 0 (none otherwise): those of an
/// earlier run removed, or those of the run being resumed kept up to its step.
std::unique_ptr<BestModels> make_best_models(const TrainOptions& opts, const JobModel& job) {
  if (opts.final_model != "average" || opts.valid_metrics.empty() || opts.valid_sets.empty() || !is_root_rank())
    return nullptr;
  const std::string& metric = opts.valid_metrics.front();
  auto best_k = std::make_unique<BestModels>(opts.model_path, metric, make_validator(metric)->lower_is_better(),
                                             opts.average_best);
  if (job.resume) best_k->restore(job.resume->step);
  else best_k->clear();
  return best_k;
}

/// The subword sampler of a run with --sentencepiece-alphas (none when both are 0): the kept
/// training pairs `kept` of `corpus` and their examples `best`.
std::unique_ptr<SubwordSampler> make_sampler(const TrainOptions& opts, const JobModel& job, const CorpusText& corpus,
                                             const std::vector<size_t>& kept, const std::vector<Example>& best) {
  const auto alphas = sentencepiece_alphas(opts);
  if (alphas.first <= 0 && alphas.second <= 0) return nullptr;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i : kept) pairs.push_back(corpus.train[i]);
  spdlog::info("subword sampling (Kudo 2018): alpha {} source, {} target, new segmentations every epoch",
               alphas.first, alphas.second);
  return std::make_unique<SubwordSampler>(std::move(pairs), best, *job.src_tok, *job.tgt_tok, alphas,
                                          opts.seed, job.cfg.max_positions - 1);
}

/// What --final-model average and --sentencepiece-alphas add to a run (each null when off).
struct RunExtras {
  std::unique_ptr<BestModels> best_k;
  std::unique_ptr<SubwordSampler> sampler;
};

/// Sets hooks.validated (every validation offered to extras.best_k, which writes the model with
/// run_metadata when it ranks) and hooks.epoch_examples (the sampler's epochs; the cost of the
/// first one is logged). `extras`, `opts` and `job` must outlive the hooks.
void set_extra_hooks(FitHooks& hooks, const TrainOptions& opts, const JobModel& job, RunExtras& extras) {
  if (BestModels* best_k = extras.best_k.get())
    hooks.validated = [best_k, &opts, &job](const ValidationResult& v) {
      best_k->offer(v.step, v.scores.at(best_k->metric()), [&](const std::string& path, std::map<std::string, std::string> meta) {
        meta.merge(run_metadata(opts, TrainResult{}));
        meta.erase("epochs");
        meta["final_model"] = "kept-best-" + best_k->metric();
        save_model(path, *job.model, *job.src_tok, *job.tgt_tok, meta);
      });
    };
  if (SubwordSampler* sampler = extras.sampler.get())
    hooks.epoch_examples = [sampler, first = true](int e) mutable -> const std::vector<Example>& {
      const std::vector<Example>& examples = sampler->epoch(e);
      if (std::exchange(first, false))
        spdlog::info("subword sampling of epoch {}: {:.1f} ms, {} subwords (the best segmentations: {})", e,
                     1e3 * sampler->seconds(), sampler->sampled_tokens(), sampler->best_tokens());
      return examples;
    };
}

/// The corpus as subword examples of the job's tokenizers. Pairs longer than max_positions − 1
/// subwords are skipped with one warning.
struct JobExamples {
  std::vector<Example> train, valid;
  std::vector<size_t> train_kept;  ///< index in corpus.train of each training example
  ValidationText valid_refs;       ///< the references of the kept validation pairs, in order
};

JobExamples make_job_examples(const CorpusText& corpus, const JobModel& job) {
  const int max_len = job.cfg.max_positions - 1;
  int skipped = 0, skipped_valid = 0;
  std::vector<size_t> valid_kept;
  JobExamples ex;
  ex.train = make_examples(corpus.train, *job.src_tok, *job.tgt_tok, max_len, &skipped, &ex.train_kept);
  ex.valid = make_examples(corpus.valid, *job.src_tok, *job.tgt_tok, max_len, &skipped_valid, &valid_kept);
  ex.valid_refs.tgt_tokenizer = job.tgt_tok.get();
  for (size_t i : valid_kept) ex.valid_refs.references.push_back(corpus.valid[i].second);
  if (skipped + skipped_valid > 0)
    spdlog::warn("skipped {} training and {} validation pairs longer than max_positions − 1 = {} subwords",
                 skipped, skipped_valid, max_len);
  return ex;
}

/// The log lines that describe a run before its first update: model, products, recipe.
void log_setup(const TrainOptions& opts, const JobModel& job) {
  const ModelConfig& cfg = job.cfg;
  spdlog::info("model: d_model {} | heads {} | d_ff {} | layers {}+{} | {}-norm | dropout {}/{}/{}{} | {} parameters | {} threads",
               cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.encoder_layers, cfg.decoder_layers, cfg.norm,
               cfg.dropout, cfg.attention_dropout, cfg.ffn_dropout,
               cfg.layer_dropout > 0 ? fmt::format(" | layer dropout {}", cfg.layer_dropout) : std::string(),
               job.model->params().num_elements(), omp_get_max_threads());
  spdlog::info("matrix products: {}", gemm_backend());
  if (const std::string forced = gemm_forced_core(); !forced.empty())
    spdlog::warn("OPENBLAS_CORETYPE={} in the environment forces that OpenBLAS kernel; unset it to "
                 "let OpenBLAS choose the one for this CPU (a forced Haswell kernel trains ~1.5x "
                 "slower on an AVX-512 CPU)", forced);
  spdlog::info("training: preset {} | lr {} | warm-up {} | lr decay {} | label smoothing {} | R-Drop {} | "
               "exponential smoothing {}",
               opts.preset, opts.learning_rate, opts.warmup_steps,
               opts.lr_decay > 0 ? fmt::format("x{} per {} stalled validations", opts.lr_decay, opts.lr_decay_stalled)
                                 : std::string("off"),
               opts.label_smoothing,
               opts.rdrop_alpha > 0 ? std::to_string(opts.rdrop_alpha) : "off",
               opts.exponential_smoothing > 0 ? std::to_string(opts.exponential_smoothing) : "off");
}

}  // namespace

std::string best_model_path(const std::string& model_path, const std::string& metric) {
  std::filesystem::path p(model_path);
  std::string stem = p.stem().string();
  return (p.parent_path() / (stem + ".best-" + metric + p.extension().string())).string();
}

TrainResult train(const TrainOptions& opts) {
  configure_threads(opts.cpu_threads);
  if (opts.valid_sets.empty() && opts.early_stopping > 0)
    throw ConfigError("--early-stopping " + std::to_string(opts.early_stopping) +
                      " (preset " + opts.preset + ") needs a validation set: give --valid-sets, or "
                      "--early-stopping 0 and a limit (-e, --after-steps)");
  spdlog::info("processes: {} rank{} × {} threads{}", world_size(), world_size() > 1 ? "s" : "",
               omp_get_max_threads(), world_size() > 1 ? " (Open MPI, synchronous data parallelism)" : "");
  const CorpusText corpus = read_corpora(opts);
  // Check the output location before spending minutes on training.
  const std::filesystem::path model_dir = std::filesystem::path(opts.model_path).parent_path();
  if (!model_dir.empty()) std::filesystem::create_directories(model_dir);

  const nlohmann::json fingerprint = resume_fingerprint(opts);
  const std::string ckpt = checkpoint_path(opts.model_path);
  const nlohmann::json hashes = corpus_hashes(corpus_files(opts.train_sets));
  JobModel job = start_or_resume(opts, fingerprint, hashes, ckpt, corpus);
  const ModelConfig& cfg = job.cfg;
  spdlog::info("SentencePiece vocabularies: {} source, {} target pieces", cfg.src_vocab_size,
               cfg.tgt_vocab_size);

  const JobExamples ex = make_job_examples(corpus, job);
  const std::vector<Example>& train_examples = ex.train;
  const std::vector<Example>& valid_examples = ex.valid;

  if (!job.model) {
    job.model = std::make_unique<Transformer>(cfg);
    job.model->init_parameters(opts.seed);
    broadcast_weights(job.model->params());  // every replica starts from rank 0's weights
  }
  log_setup(opts, job);

  // The structured log: appended to when resuming, so one file tells the whole run.
  // Under mpirun, rank 0 alone writes it, the checkpoints and the models.
  const bool root = is_root_rank();
  std::optional<TrainingLog> log;
  if (root) log.emplace(opts.log_json.empty() ? training_log_path(opts.model_path) : opts.log_json,
                        job.resume ? job.resume->step : 0);
  const auto emit = [&log, &opts](const nlohmann::json& event) {
    if (!log) return;
    log->write(event);
    if (opts.on_log_event) opts.on_log_event(event, log->path());
  };
  emit(run_start_event(opts, job, train_examples.size(), valid_examples.size()));
  FitHooks hooks;
  if (root) hooks.log = emit;
  RunExtras extras{make_best_models(opts, job), make_sampler(opts, job, corpus, ex.train_kept, train_examples)};
  if (root) hooks.save = [&](const std::string& which, const TrainResult& r) {
    save_trained_model(opts, job, extras.best_k.get(), which, r);
  };
  set_extra_hooks(hooks, opts, job, extras);
  hooks.valid_text = &ex.valid_refs;
  if (root) hooks.checkpoint = [&](const TrainState& st) {
    write_checkpoint(ckpt, *job.model, *job.src_tok, *job.tgt_tok, fingerprint, st, hashes);
  };
  hooks.resume = job.resume ? &*job.resume : nullptr;
  TrainResult r;
  try {
    r = fit(*job.model, train_examples, valid_examples, opts, hooks);
  } catch (const Error& e) {
    emit({{"event", "error"}, {"message", e.what()}});
    throw;
  }
  emit(end_event(r, opts.model_path, ckpt));
  if (r.interrupted) {
    spdlog::warn("interrupted after step {}: model saved to {}, checkpoint to {}; run the same command "
                 "again to continue", r.steps, opts.model_path, ckpt);
    return r;
  }
  if (root) std::filesystem::remove(ckpt);  // finished: the final model supersedes the checkpoint
  log_summary(opts, r);
  return r;
}

}  // namespace anuvad
