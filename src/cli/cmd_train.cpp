// `anuvad train`: flags (Marian names where they exist) → TrainOptions → anuvad::train.
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/train/trainer.h"
#include "build_info.h"
#include "commands.h"

namespace anuvad::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

namespace {

/// The command line as parsed: TrainArgs plus the options whose presence matters.
struct TrainFlags {
  TrainArgs args;
  bool dump_config = false;
  bool require_checkpoint = false;  ///< --resume: a checkpoint must exist
  std::string report_html;          ///< --report-html ("" = next to the log)
  bool no_report_html = false;      ///< --no-report-html
  std::string exponential_smoothing;  ///< as given ("" or "true" = Marian's default 1e-4)
  CLI::Option* smoothing_opt = nullptr;
  /// -t, --valid-sets, --no-valid: when none is given, the corpus may come from an install.
  std::vector<CLI::Option*> corpus_opts;
  /// Flags of the options the preset sets: (option, train_option_fields key).
  std::vector<std::pair<CLI::Option*, std::string>> preset_governed;
  /// Model hyperparameter flags: (option, JSON key, value).
  std::vector<std::tuple<CLI::Option*, std::string, std::function<nlohmann::json()>>> model;
};

/// -m, -t, --valid-sets, --no-valid, -c, --seed, --cpu-threads, -e, --after-steps, --batch-tokens.
void add_corpus_flags(CLI::App* sub, TrainFlags& flags, TrainOptions* opts) {
  sub->add_option("-m,--model", opts->model_path, "Model file to write")->capture_default_str();
  flags.corpus_opts.push_back(
      sub->add_option("-t,--train-sets", opts->train_sets,
                      "Training corpora, read as one: each a TSV (english<TAB>hindi), X.en (read "
                      "with X.hi; `X.en X.hi` is the same pair) or SRC,TGT (two line-aligned "
                      "files), e.g. -t a.tsv b.en c.src,c.tgt (two paths neither .tsv nor a "
                      "second .en: one SRC TGT pair, as before); the SentencePiece vocabularies "
                      "are trained on all of them. Without it and without ./data/train.tsv, the "
                      "installed corpus (PREFIX/share/anuvad/data/train.tsv and dev.tsv)")
          ->capture_default_str());
  flags.corpus_opts.push_back(
      sub->add_option("--valid-sets", opts->valid_sets,
                      "Validation corpora, as -t (TSV, X.en or SRC,TGT; several are one set); "
                      "the --valid-metrics are logged")
          ->capture_default_str());
  flags.corpus_opts.push_back(sub->add_flag_callback(
      "--no-valid", [opts] { opts->valid_sets.clear(); }, "Train without validation"));
  sub->add_option("-c,--config", opts->config_path, "Model hyperparameters as JSON (see docs/)");
  sub->add_option("--seed", opts->seed, "Seed of every random choice")->capture_default_str();
  sub->add_option("--cpu-threads", opts->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  flags.preset_governed.emplace_back(
      sub->add_option("-e,--after-epochs", opts->after_epochs,
                      "Stop after this many epochs (0 = no limit; default: the preset's)")
          ->check(CLI::NonNegativeNumber),
      "after_epochs");
  sub->add_option("--after-steps", opts->after_steps, "Stop after this many updates (0 = no limit)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--mini-batch-words,--batch-tokens", opts->batch_tokens,
                  "Padded token positions per batch")
      ->capture_default_str()->check(CLI::Range(16, 1000000));
}

/// -l, --warmup-steps, --label-smoothing (the preset's unless given), --clip-norm,
/// --sentencepiece-alphas.
void add_optimizer_flags(CLI::App* sub, TrainFlags& flags, TrainOptions* opts) {
  flags.preset_governed.emplace_back(
      sub->add_option("-l,--learning-rate", opts->learning_rate, "Peak learning rate (default: the preset's)")
          ->check(CLI::PositiveNumber),
      "learning_rate");
  flags.preset_governed.emplace_back(
      sub->add_option("--warmup-steps", opts->warmup_steps, "Linear warm-up updates (default: the preset's)")
          ->check(CLI::PositiveNumber),
      "warmup_steps");
  flags.preset_governed.emplace_back(
      sub->add_option("--label-smoothing", opts->label_smoothing, "Label smoothing ε (default: the preset's)")
          ->check(CLI::Range(0.0, 0.99)),
      "label_smoothing");
  sub->add_option("--rdrop-alpha", opts->rdrop_alpha,
                  "R-Drop (Liang et al. 2021): run every batch twice with independent dropout masks and add "
                  "this weight times the symmetric KL divergence of the two output distributions, per token, "
                  "to the loss; twice the compute per update (0 = off)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--lr-decay", opts->lr_decay,
                  "Multiply the learning rate by this factor in (0, 1) after every --lr-decay-stalled "
                  "validations in a row without a better first validation metric (0 = off)")
      ->capture_default_str()->check(CLI::Range(0.0, 0.99));
  sub->add_option("--lr-decay-stalled", opts->lr_decay_stalled,
                  "Validations without a better first metric per --lr-decay step")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--clip-norm", opts->clip_norm, "Gradient-norm clipping threshold (0 = off)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  flags.preset_governed.emplace_back(
      sub->add_option("--sentencepiece-alphas", opts->sentencepiece_alphas,
                      "Subword regularisation (Kudo 2018): re-segment the training sentences "
                      "every epoch by sampling from the unigram SentencePiece model with this "
                      "smoothing alpha (e.g. 0.5; one value for both sides, or source and "
                      "target); 0 = the one best segmentation. Validation and translation never "
                      "sample (default: the preset's)")
          ->expected(1, 2)->check(CLI::NonNegativeNumber),
      "sentencepiece_alphas");
}

/// --valid-freq, --valid-metrics, --early-stopping, --final-model (the preset's unless given),
/// --average-best, --valid-translation-output, --valid-mini-batch, --disp-freq.
void add_validation_flags(CLI::App* sub, TrainFlags& flags, TrainOptions* opts) {
  flags.preset_governed.emplace_back(
      sub->add_option("--valid-freq", opts->valid_freq, "Validate every N updates (default: the preset's)")
          ->check(CLI::NonNegativeNumber),
      "valid_freq");
  flags.preset_governed.emplace_back(
      sub->add_option("--valid-metrics", opts->valid_metrics,
                      "Validation metrics: cross-entropy, perplexity, chrf (chrF2 of greedy "
                      "translations), bleu (BLEU, 13a+danda); the first decides early stopping and "
                      "--final-model best; the best model of each is kept as "
                      "<stem>.best-<metric>.safetensors (default: the preset's)")
          ->check(CLI::IsMember(valid_metric_names())),
      "valid_metrics");
  flags.preset_governed.emplace_back(
      sub->add_option("--early-stopping", opts->early_stopping,
                      "Stop after N validations in a row without a better first --valid-metrics "
                      "value (0 = never; default: the preset's)")
          ->check(CLI::NonNegativeNumber),
      "early_stopping");
  flags.preset_governed.emplace_back(
      sub->add_option("--final-model", opts->final_model,
                      "What -m holds when training ends or is interrupted: last (the last "
                      "weights), best (the best model of the first --valid-metrics) or average "
                      "(the mean of its --average-best best models, kept as "
                      "<stem>.best-<metric>.1.safetensors (best) … .K); best and average give the "
                      "last weights until the first validation (default: the preset's)")
          ->check(CLI::IsMember({"last", "best", "average"})),
      "final_model");
  sub->add_option("--average-best", opts->average_best,
                  "K for --final-model average: keep the K best models of the first "
                  "--valid-metrics and write their average to -m (fewer if fewer validations)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  sub->add_option("--valid-translation-output", opts->valid_translation_output,
                  "Write the greedy translations of the validation sources here at each "
                  "validation (the file holds the last one)");
  sub->add_option("--valid-mini-batch", opts->valid_mini_batch,
                  "Sentences per batch when translating the validation set")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("--disp-freq", opts->disp_freq, "Log a line every N updates")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
}

/// --src/tgt-vocab-size, --preset, the model hyperparameters (Marian names) and
/// --exponential-smoothing.
void add_recipe_flags(CLI::App* sub, TrainFlags& flags, TrainOptions* opts) {
  flags.preset_governed.emplace_back(
      sub->add_option("--src-vocab-size", opts->src_vocab_size,
                      "Source SentencePiece vocabulary size (default: the preset's)")
          ->check(CLI::Range(8, 1000000)),
      "src_vocab_size");
  flags.preset_governed.emplace_back(
      sub->add_option("--tgt-vocab-size", opts->tgt_vocab_size,
                      "Target SentencePiece vocabulary size (default: the preset's)")
          ->check(CLI::Range(8, 1000000)),
      "tgt_vocab_size");
  sub->add_option("--preset", flags.args.preset,
                  "Recipe for the model, optimizer and stopping defaults: tiny (d_model 128, 2+2 "
                  "layers, dropout 0.2, attention/FFN dropout 0.1, lr 1e-3, warm-up 400; 120 epochs, "
                  "chrf validation every 100 updates, the best-chrF weights at -m (the last "
                  "without validation); the bundled corpus) or small (the same network with dropout 0.3 and "
                  "attention/FFN dropout 0.1, subword sampling at alpha 0.5; chrf validation every "
                  "300 updates, early stopping "
                  "8, at most 2000 epochs, the best-chrF weights at -m; a few thousand pairs such "
                  "as Tatoeba: needs --valid-sets). -c FILE and explicit flags override it")
      ->capture_default_str()
      ->check(CLI::IsMember(preset_names()));
  // Model hyperparameters (Marian names); they override the preset and -c FILE.
  auto model_int = [sub, &flags](const std::string& name, const std::string& key, const std::string& help) {
    auto v = std::make_shared<int>(0);
    CLI::Option* o = sub->add_option(name, *v, help)->check(CLI::PositiveNumber);
    flags.model.emplace_back(o, key, [v] { return nlohmann::json(*v); });
  };
  auto model_double = [sub, &flags](const std::string& name, const std::string& key, const std::string& help) {
    auto v = std::make_shared<double>(0);
    CLI::Option* o = sub->add_option(name, *v, help)->check(CLI::Range(0.0, 0.99));
    flags.model.emplace_back(o, key, [v] { return nlohmann::json(*v); });
  };
  model_int("--dim-emb", "d_model", "Model width d_model");
  model_int("--transformer-heads", "n_heads", "Attention heads");
  model_int("--transformer-dim-ffn", "d_ff", "Feed-forward hidden width");
  model_int("--enc-depth", "encoder_layers", "Encoder layers");
  model_int("--dec-depth", "decoder_layers", "Decoder layers");
  model_double("--transformer-dropout", "dropout", "Dropout on embeddings and residual branches");
  model_double("--transformer-dropout-attention", "attention_dropout", "Dropout on attention weights");
  model_double("--transformer-dropout-ffn", "ffn_dropout", "Dropout on the feed-forward hidden activation");
  model_double("--dropout-src", "dropout_src",
               "Word dropout on the source: zero a token's embedding vector with probability P "
               "(kept ones scaled by 1/(1-P), positions kept)");
  model_double("--dropout-trg", "dropout_trg", "Word dropout on the target input, as --dropout-src");
  model_double("--layer-dropout", "layer_dropout",
               "Layer dropout: a training sentence skips each encoder and decoder layer with "
               "probability P (kept layers' branches scaled by 1/(1-P); in post-norm a skipped layer's "
               "norms still apply)");
  flags.smoothing_opt =
      sub->add_option("--exponential-smoothing", flags.exponential_smoothing,
                      "Keep an exponential moving average of the weights, used for validation "
                      "and the saved models (Marian's convention: DECAY d, default 1e-4, gives "
                      "θ_ema ← β·θ_ema + (1−β)·θ with β = min(1−d, (1+t)/(10+t)) at update t)")
          ->expected(0, 1)
          ->type_name("[DECAY]");
}

/// --dump-config, -q, --log-json, --report-html, --no-report-html, --save-freq, --no-resume,
/// --resume, --simulate-ranks, --allreduce, --allreduce-bucket-mb.
void add_run_flags(CLI::App* sub, TrainFlags& flags, TrainOptions* opts) {
  sub->add_option("--simulate-ranks", opts->simulate_ranks,
                  "In one process, cut every batch into N shards and sum their gradients in order, "
                  "as `mpirun -np N anuvad train` does (to check or resume an N-rank run; 0 = off)")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  sub->add_option("--allreduce", opts->allreduce,
                  "How an mpirun job sums the gradients: fused (one MPI_Allreduce after the backward "
                  "pass), overlap (buckets sent while the backward pass runs, MPI polled after each "
                  "layer) or overlap-lazy (the same, not polled); the same weights either way")
      ->capture_default_str()->check(CLI::IsMember({"fused", "overlap", "overlap-lazy"}));
  sub->add_option("--allreduce-bucket-mb", opts->allreduce_bucket_mb,
                  "Gradient MB per bucket of the overlapped allreduce")
      ->capture_default_str()->check(CLI::Range(1e-6, 1e6));
  sub->add_flag("--dump-config", flags.dump_config,
                "Print the effective configuration (model config and training options, preset "
                "applied) as JSON and exit without training");
  sub->add_flag("-q,--quiet", opts->quiet, "No live progress line");
  sub->add_option("--log-json", opts->log_json,
                  "Structured training log, one JSON object per event (docs/training-log.md); "
                  "default: <stem>.log.jsonl next to the model");
  sub->add_option("--report-html", flags.report_html,
                  "Training report page, rewritten at every validation and at the end "
                  "(docs/training-log.md \"Report page\"); default: next to the log, "
                  "<stem>.report.html");
  sub->add_flag("--no-report-html", flags.no_report_html, "Do not write the training report page");
  sub->add_option("--save-freq", opts->save_freq,
                  "Write a resumable checkpoint (<stem>.checkpoint.safetensors) every N updates "
                  "(0 = only on SIGINT/SIGTERM/SIGHUP)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  CLI::Option* no_resume = sub->add_flag_callback(
      "--no-resume", [opts] { opts->resume = false; },
      "Ignore and remove an existing checkpoint and start over (by default a run continues "
      "from it)");
  sub->add_flag("--resume", flags.require_checkpoint,
                "Continue from <stem>.checkpoint.safetensors and fail when there is none (without "
                "either flag a run continues from a checkpoint when one exists)")
      ->excludes(no_resume);
}

/// Without corpus flags and without ./data/train.tsv (a run outside the source tree), points
/// `opts` at the bundled corpus of an installed anuvad (train.tsv, validated on dev.tsv), when
/// there is one, and says so.
void use_installed_corpus(const TrainFlags& flags, TrainOptions& opts) {
  for (const CLI::Option* o : flags.corpus_opts)
    if (o->count() > 0) return;
  const std::string local = opts.train_sets.at(0);  // data/train.tsv
  if (std::filesystem::exists(local)) return;
  const std::string dir = installed_corpus_dir();
  if (dir.empty()) return;
  opts.train_sets = {dir + "/train.tsv"};
  opts.valid_sets = {dir + "/dev.tsv"};
  spdlog::info("no {} here: training on the installed corpus {}/train.tsv (validation: dev.tsv)",
               local, dir);
}

/// The subcommand's action: resolve the options, then print them (--dump-config) or train.
void run_train(const TrainFlags& flags) {
  // The flags given explicitly: resolve_train_options applies them over the preset and -c FILE.
  TrainArgs args = flags.args;
  use_installed_corpus(flags, args.options);
  for (const auto& [o, key] : flags.preset_governed)
    if (o->count() > 0) args.explicit_options.push_back(key);
  for (const auto& [o, key, value] : flags.model)
    if (o->count() > 0) args.model_flags[key] = value();
  if (flags.smoothing_opt->count() > 0) args.exponential_smoothing = flags.exponential_smoothing;
  const TrainOptions resolved = resolve_train_options(args);
  if (flags.dump_config) {
    std::cout << effective_config_json(resolved).dump(2) << std::endl;
    return;
  }
  if (flags.require_checkpoint && !std::filesystem::exists(checkpoint_path(resolved.model_path)))
    throw IoError(checkpoint_path(resolved.model_path) + ": no checkpoint to resume from (--resume)");
  // SIGINT/SIGTERM/SIGHUP (terminal closed): finish the current update, write a checkpoint,
  // exit with 130. A second signal ends the process at once (the last complete checkpoint
  // stays valid). SIGUSR1 does the same: Open MPI's mpirun forwards it to every rank, whereas
  // on SIGINT/SIGTERM it exits 1 and kills the ranks 1 s after its SIGTERM (README, Open MPI).
  // SIGPIPE is ignored: a log reader that went away (`anuvad train | head`) only
  // makes the log writes fail (spdlog and the progress line ignore write errors).
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    anuvad::request_stop();
    std::signal(sig, SIG_DFL);
  };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  TrainOptions run = resolved;
  if (!flags.no_report_html) run.on_log_event = report_page_writer(flags.report_html);
  const TrainResult r = train(run);
  if (r.interrupted) exit_code() = 130;
}

}  // namespace

void setup_train(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  TrainOptions* opts = &flags->args.options;
  CLI::App* sub = app.add_subcommand(
      "train", "Train SentencePiece vocabularies and a transformer on a parallel corpus "
               "(defaults: data/train.tsv, validated on data/dev.tsv, or the installed corpus "
               "when ./data/train.tsv does not exist; saved to models/default.safetensors)");
  // Registered in this order, which is the order of `anuvad train --help`.
  add_corpus_flags(sub, *flags, opts);
  add_optimizer_flags(sub, *flags, opts);
  add_validation_flags(sub, *flags, opts);
  add_recipe_flags(sub, *flags, opts);
  add_run_flags(sub, *flags, opts);
  sub->callback([flags] { run_train(*flags); });
}

}  // namespace anuvad::cli
