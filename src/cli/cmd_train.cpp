// `anuvad train`: flags (Marian names where they exist) → TrainOptions → anuvad::train.
#include <spdlog/spdlog.h>

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
                  "Validation corpus (TSV or .en .hi); dev cross-entropy and perplexity are logged")
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
  sub->add_option("--disp-freq", opts->disp_freq, "Log a line every N updates")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--src-vocab-size", opts->src_vocab_size, "Source SentencePiece vocabulary size")
      ->capture_default_str()->check(CLI::Range(8, 1000000));
  sub->add_option("--tgt-vocab-size", opts->tgt_vocab_size, "Target SentencePiece vocabulary size")
      ->capture_default_str()->check(CLI::Range(8, 1000000));
  sub->add_flag("-q,--quiet", opts->quiet, "No live progress line");
  sub->callback([opts] { train(*opts); });
}

}  // namespace anuvad::cli
