// `anuvad train`: flags (Marian names where they exist) → TrainOptions → anuvad::train.
#include <spdlog/spdlog.h>

#include <csignal>
#include <memory>

#include "anuvad/trainer.h"
#include "commands.h"

namespace anuvad::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

void setup_train(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train SentencePiece vocabularies and a transformer on a parallel corpus "
               "(defaults: data/train.tsv, validated on data/dev.tsv, saved to "
               "models/default.safetensors)");
  sub->add_option("-m,--model", opts->model_path, "Model file to write")->capture_default_str();
  sub->add_option("-t,--train-sets", opts->train_sets,
                  "Training corpus: one TSV (english<TAB>hindi) or two line-aligned files (.en .hi)")
      ->capture_default_str();
  sub->add_option("--valid-sets", opts->valid_sets,
                  "Validation corpus (TSV or .en .hi); the --valid-metrics are logged")
      ->capture_default_str();
  sub->add_flag_callback("--no-valid", [opts] { opts->valid_sets.clear(); },
                         "Train without validation");
  sub->add_option("-c,--config", opts->config_path, "Model hyperparameters as JSON (see docs/)");
  sub->add_option("--seed", opts->seed, "Seed of every random choice")->capture_default_str();
  sub->add_option("--cpu-threads", opts->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->add_option("-e,--after-epochs", opts->after_epochs, "Stop after this many epochs (0 = no limit)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--after-steps", opts->after_steps, "Stop after this many updates (0 = no limit)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--mini-batch-words,--batch-tokens", opts->batch_tokens,
                  "Padded token positions per batch")
      ->capture_default_str()->check(CLI::Range(16, 1000000));
  sub->add_option("-l,--learning-rate", opts->learning_rate, "Peak learning rate")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--warmup-steps", opts->warmup_steps, "Linear warm-up updates")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--label-smoothing", opts->label_smoothing, "Label smoothing ε")
      ->capture_default_str()->check(CLI::Range(0.0, 0.99));
  sub->add_option("--clip-norm", opts->clip_norm, "Gradient-norm clipping threshold (0 = off)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--valid-freq", opts->valid_freq, "Validate every N updates")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--valid-metrics", opts->valid_metrics,
                  "Validation metrics: cross-entropy, perplexity, chrf (chrF2 of greedy "
                  "translations), bleu (BLEU, 13a+danda); the first decides early stopping; the "
                  "best model of each is kept as <stem>.best-<metric>.safetensors")
      ->capture_default_str()
      ->check(CLI::IsMember(valid_metric_names()));
  sub->add_option("--early-stopping", opts->early_stopping,
                  "Stop after N validations in a row without a better first --valid-metrics value "
                  "(0 = never)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--valid-translation-output", opts->valid_translation_output,
                  "Write the greedy translations of the validation sources here at each "
                  "validation (the file holds the last one)");
  sub->add_option("--valid-mini-batch", opts->valid_mini_batch,
                  "Sentences per batch when translating the validation set")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("--disp-freq", opts->disp_freq, "Log a line every N updates")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--src-vocab-size", opts->src_vocab_size, "Source SentencePiece vocabulary size")
      ->capture_default_str()->check(CLI::Range(8, 1000000));
  sub->add_option("--tgt-vocab-size", opts->tgt_vocab_size, "Target SentencePiece vocabulary size")
      ->capture_default_str()->check(CLI::Range(8, 1000000));
  sub->add_flag("-q,--quiet", opts->quiet, "No live progress line");
  sub->add_option("--save-freq", opts->save_freq,
                  "Write a resumable checkpoint (<stem>.checkpoint.safetensors) every N updates "
                  "(0 = only on SIGINT/SIGTERM)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_flag_callback("--no-resume", [opts] { opts->resume = false; },
                         "Ignore and remove an existing checkpoint and start over (by default a "
                         "run continues from it)");
  sub->callback([opts] {
    // SIGINT/SIGTERM: finish the current update, write a checkpoint, exit with 130. A second
    // signal ends the process at once (the last complete checkpoint stays valid).
    struct sigaction sa {};
    sa.sa_handler = [](int sig) {
      anuvad::request_stop();
      std::signal(sig, SIG_DFL);
    };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const TrainResult r = train(*opts);
    if (r.interrupted) exit_code() = 130;
  });
}

}  // namespace anuvad::cli
