// Subcommands of the anuvad executable: each has an options struct, a setup function that
// binds its flags to a CLI11 subcommand, and a run function (CLI11's subcom_in_files pattern).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "anuvad/core/bf16.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/ensemble.h"
#include "anuvad/io/model_file.h"

namespace anuvad::cli {

/// `anuvad train`: registers the subcommand; its callback trains a model.
void setup_train(CLI::App& app);
/// `anuvad translate` and `anuvad score`: register the subcommands.
void setup_translate(CLI::App& app);
void setup_score(CLI::App& app);
/// `anuvad evaluate`: registers the subcommand (translate a test corpus, print BLEU/chrF).
void setup_evaluate(CLI::App& app);
/// `anuvad attention`: renders an attention dump (JSON) as an HTML page.
void setup_attention(CLI::App& app);
/// `anuvad average`: element-wise mean of the weights of compatible models.
void setup_average(CLI::App& app);
/// `anuvad report`: renders a structured training log as an HTML page.
void setup_report(CLI::App& app);

/// The TrainOptions::on_log_event of `anuvad train`: at every "valid", "end" and "error" event,
/// re-reads the log and writes its report page atomically to `report_path` ("" =
/// training_report_path of the log). A failure is logged once as a warning and never stops
/// training.
std::function<void(const nlohmann::json& event, const std::string& log_path)> report_page_writer(
    std::string report_path);

/// Binds the search flags shared by translate and evaluate to `opts`: -b/--beam-size,
/// -n/--normalize, --word-penalty, --max-length-factor, --max-length, --allow-unk.
void add_decode_options(CLI::App* sub, DecodeOptions& opts);

/// The model flags of translate, score and evaluate: -m/--model FILE (one model), or
/// --models A B … (an ensemble, decode/ensemble.h; the two are mutually exclusive), and
/// --weights wA wB … (one per model, default 1 each; also allowed with -m), and
/// --compute-type auto|float32|bfloat16 (Transformer::set_compute_type, applied to every
/// model; auto is resolved per model by its size, core/bf16.h auto_compute_type).
struct ModelOptions {
  std::string model_path = "models/default.safetensors";
  std::vector<std::string> models;
  std::vector<double> weights;
  std::string compute_type = "auto";
};

/// Binds -m/--model, --models, --weights and --compute-type to `o`.
void add_model_options(CLI::App* sub, ModelOptions& o);

/// The models of a command, loaded, and the ensemble over them.
struct LoadedModels {
  std::vector<TranslationModel> models;  ///< in command-line order, never empty
  Ensemble ensemble;                     ///< over `models`, with the --weights
  std::vector<std::string> paths;        ///< the model files, as given

  /// The first model: its tokenizers and text normalization (shared by all, checked) serve the
  /// whole ensemble, and its attention is the ensemble's.
  const TranslationModel& first() const { return models.front(); }
  /// The model with the smallest max_positions: its encode_source truncates sources for all.
  const TranslationModel& shortest() const;
  /// first()'s config with the smallest max_positions of the models (for
  /// honoured_decode_options and length checks).
  ModelConfig limits() const;
};

/// Loads the models of `o` (load_model each, then set to o.compute_type). Throws ConfigError
/// with one line for an unknown compute type, when --weights
/// has another number of values than there are models, or when two models differ in their
/// target SentencePiece model (tokenizer.tgt bytes), source SentencePiece model (tokenizer.src
/// bytes) or text normalization, naming both files; ModelFileError or IoError as load_model.
LoadedModels load_models(const ModelOptions& o);

/// `opts` with max_length lowered to what a model of config `cfg` can produce (max_positions − 1
/// subwords), so that what is recorded is the limit actually used. When the user asked for more
/// (`given`: --max-length was on the command line), logs a one-line warning naming the cap.
DecodeOptions honoured_decode_options(DecodeOptions opts, const ModelConfig& cfg, bool given);

/// Exit code of the last subcommand run (0 = success); set by commands that keep going after
/// per-line errors.
int& exit_code();

}  // namespace anuvad::cli
