// Training options: the field table, presets and the resolution preset → -c FILE → flags.
#include "anuvad/train/options.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "anuvad/core/error.h"
#include "anuvad/io/json.h"

namespace anuvad {

namespace {

/// A table row for the field `Member` of TrainOptions under `key`.
template <auto Member>
TrainOptionField field(const char* key, unsigned use) {
  return {key, use, [](const TrainOptions& o) { return nlohmann::json(o.*Member); },
          [](TrainOptions& o, const nlohmann::json& v) { v.get_to(o.*Member); }};
}

/// The model config: `base`, then the keys of the JSON file `config_path` (when set), then
/// `flags`, with the given vocabulary sizes; validated. Throws IoError / ConfigError naming the
/// file or key ("--preset NAME" or "command line" when they come from there).
ModelConfig resolve_model_config(const ModelConfig& base, const std::string& preset,
                                 const std::string& config_path, const nlohmann::json& flags,
                                 int src_vocab_size, int tgt_vocab_size) {
  nlohmann::json j = base.to_json();
  std::string origin = "--preset " + preset;
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    if (!in) throw IoError(config_path + ": cannot open config file");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // A key given twice is an error naming it, not a silent last-wins.
    const nlohmann::json file = parse_json_unique_keys(text, config_path);
    // Checked on its own first, so that an unknown key or bad type names the file.
    (void)ModelConfig::from_json(file, config_path);
    j.update(file);
    origin = config_path;
  }
  if (!flags.empty()) {
    j.update(flags);
    origin = "command line";
  }
  j["src_vocab_size"] = src_vocab_size;
  j["tgt_vocab_size"] = tgt_vocab_size;
  ModelConfig cfg = ModelConfig::from_json(j, origin);
  cfg.validate();
  return cfg;
}

/// --exponential-smoothing [DECAY] as given: "" or "true" = Marian's default 1e-4. Throws
/// ConfigError for a value that is not a number in [0, 1).
double parse_smoothing(const std::string& v) {
  double d = 1e-4;  // Marian's default when the flag has no value
  if (!v.empty() && v != "true") {
    try {
      size_t used = 0;
      d = std::stod(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      throw ConfigError("--exponential-smoothing: '" + v + "' is not a number");
    }
  }
  if (!(d >= 0 && d < 1)) throw ConfigError("--exponential-smoothing must be in [0, 1)");
  return d;
}

/// Every kFingerprint / kDumpConfig field of `o` as JSON.
nlohmann::json fields_json(const TrainOptions& o, unsigned use) {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainOptionField& f : train_option_fields())
    if (f.use & use) j[f.key] = f.get(o);
  return j;
}

}  // namespace

const std::vector<TrainOptionField>& train_option_fields() {
  using O = TrainOptions;
  constexpr unsigned kBoth = kDumpConfig | kFingerprint;
  static const std::vector<TrainOptionField> fields{
      field<&O::train_sets>("train_sets", kBoth),
      field<&O::valid_sets>("valid_sets", kBoth),
      field<&O::model_path>("model_path", kDumpConfig),
      field<&O::config_path>("config_path", kDumpConfig),
      field<&O::preset>("preset", kFingerprint),  // --dump-config shows it at the top level
      field<&O::seed>("seed", kBoth),
      field<&O::cpu_threads>("cpu_threads", kDumpConfig),
      field<&O::after_epochs>("after_epochs", kDumpConfig),
      field<&O::after_steps>("after_steps", kDumpConfig),
      field<&O::batch_tokens>("batch_tokens", kBoth),
      field<&O::learning_rate>("learning_rate", kBoth),
      field<&O::warmup_steps>("warmup_steps", kBoth),
      field<&O::label_smoothing>("label_smoothing", kBoth),
      field<&O::rdrop_alpha>("rdrop_alpha", kBoth | kFingerprintUnlessDefault),
      field<&O::lr_decay>("lr_decay", kBoth | kFingerprintUnlessDefault),
      // Like the early-stopping patience, not in the fingerprint (the stall count is in the state).
      field<&O::lr_decay_stalled>("lr_decay_stalled", kDumpConfig),
      field<&O::clip_norm>("clip_norm", kBoth),
      field<&O::valid_freq>("valid_freq", kBoth),
      field<&O::valid_metrics>("valid_metrics", kBoth),
      // Not in the fingerprint: a resumed run may be given more (or less) patience; the count of
      // validations without a better score is kept in the checkpoint and compared to the new one.
      field<&O::early_stopping>("early_stopping", kDumpConfig),
      field<&O::final_model>("final_model", kDumpConfig),
      field<&O::average_best>("average_best", kDumpConfig),
      field<&O::valid_translation_output>("valid_translation_output", 0),
      field<&O::valid_mini_batch>("valid_mini_batch", kDumpConfig),
      field<&O::disp_freq>("disp_freq", 0),
      field<&O::src_vocab_size>("src_vocab_size", kBoth),
      field<&O::tgt_vocab_size>("tgt_vocab_size", kBoth),
      // Not in the fingerprint: a resumed run may change it, and repeats its epoch either way.
      field<&O::sentencepiece_alphas>("sentencepiece_alphas", kDumpConfig),
      field<&O::quiet>("quiet", 0),
      field<&O::save_freq>("save_freq", kDumpConfig),
      field<&O::resume>("resume", kDumpConfig),
      field<&O::exponential_smoothing>("exponential_smoothing", kBoth),
      field<&O::log_json>("log_json", 0),
  };
  return fields;
}

const TrainOptionField& train_option_field(const std::string& key) {
  for (const TrainOptionField& f : train_option_fields())
    if (key == f.key) return f;
  throw ConfigError("training options: unknown option '" + key + "'");
}

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names{"tiny", "small"};
  return names;
}

void apply_preset(const std::string& name, TrainOptions& opts) {
  if (name != "tiny" && name != "small")
    throw ConfigError("--preset: unknown preset '" + name + "' (tiny or small)");
  ModelConfig m;  // the built-in defaults are the tiny recipe
  const TrainOptions defaults;
  opts.after_epochs = defaults.after_epochs;
  opts.valid_freq = defaults.valid_freq;
  opts.valid_metrics = defaults.valid_metrics;
  opts.early_stopping = defaults.early_stopping;
  opts.final_model = defaults.final_model;
  opts.sentencepiece_alphas = defaults.sentencepiece_alphas;
  if (name == "tiny") {
    // The bundled corpus (1097 pairs) in under 2 minutes on 2 cores: 120 epochs with dropout
    // 0.2 on the residual branches and 0.1 on attention weights and the feed-forward hidden
    // layer, chrF on the validation set every 100 updates, and the best-chrF weights at -m
    // (the last weights without a validation set). Chosen on data/dev.tsv: dev chrF2 25.8 for
    // the earlier 60 epochs at dropout 0.1 and the last weights, 33.0 for this rule, with
    // 98.3 % of the training pairs still translated exactly (session notes, 2026-11-30).
    m.dropout = 0.2;
    m.attention_dropout = 0.1;
    m.ffn_dropout = 0.1;
    opts.after_epochs = 120;
    opts.valid_freq = 100;
    opts.valid_metrics = {"chrf", "cross-entropy"};
    opts.final_model = "best";
  }
  if (name == "small") {
    // A few thousand pairs (Tatoeba hin-eng, 2541) in under 30 minutes on 2 cores: the tiny
    // network twice as wide (d_model 256: 3.1 M parameters instead of 1.2 M; 4 heads of 64,
    // d_ff 512) with the regularisation such a corpus needs (the PyTorch reference's best
    // Tatoeba setting used dropout 0.3 everywhere). Width 256 learns faster per update: dev
    // chrF2 1.3-6.3 ahead of width 128 at every validation up to its early stop at update 8,400,
    // best 31.35 against 30.66 (docs/quality.md, session 22), at about 4x the time per update.
    m.d_model = 256;
    m.dropout = 0.3;
    m.attention_dropout = 0.1;
    m.ffn_dropout = 0.1;
    // It stops by itself: chrF on the validation set every 300 updates (12 epochs of Tatoeba's
    // 2541 pairs), early stopping after 8 validations without a better chrF (2400 updates), an
    // epoch cap no plateau on a few thousand pairs reaches, and the best-chrF weights at -m.
    opts.after_epochs = 2000;
    opts.valid_freq = 300;
    opts.valid_metrics = {"chrf", "cross-entropy", "bleu"};
    opts.early_stopping = 8;
    opts.final_model = "best";
    // Subword regularisation (Kudo 2018) at alpha 0.5 on both sides: on a tuning split carved
    // from Tatoeba's train.tsv (277 pairs, by English sentence) the best chrF2 went from 29.9
    // to 30.9 within 10,500 updates (alpha 0.1 segments too finely: 12 at update 2100).
    opts.sentencepiece_alphas = {0.5};
  }
  // Both recipes share the optimizer settings and vocabulary sizes.
  opts.learning_rate = 1e-3;
  opts.warmup_steps = 400;
  opts.label_smoothing = 0.1;
  opts.src_vocab_size = opts.tgt_vocab_size = 1000;
  opts.preset = name;
  opts.model = m;
}

TrainOptions resolve_train_options(const TrainArgs& args) {
  TrainOptions opts = args.options;
  apply_preset(args.preset, opts);
  for (const std::string& key : args.explicit_options) {
    const TrainOptionField& f = train_option_field(key);
    f.set(opts, f.get(args.options));
  }
  if (args.exponential_smoothing) opts.exponential_smoothing = parse_smoothing(*args.exponential_smoothing);
  (void)sentencepiece_alphas(opts);  // checked here, so that --dump-config refuses it too
  opts.model = resolve_model_config(opts.model, opts.preset, opts.config_path, args.model_flags,
                                    opts.src_vocab_size, opts.tgt_vocab_size);
  return opts;
}

std::pair<double, double> sentencepiece_alphas(const TrainOptions& opts) {
  const std::vector<double>& a = opts.sentencepiece_alphas;
  if (a.size() > 2)
    throw ConfigError("--sentencepiece-alphas: one value (both sides) or two (source, target), got " +
                      std::to_string(a.size()));
  for (double v : a)
    if (!(v >= 0 && v < 1e6)) throw ConfigError("--sentencepiece-alphas: " + std::to_string(v) + " is not a smoothing >= 0");
  if (a.empty()) return {0.0, 0.0};
  return {a.front(), a.back()};
}

nlohmann::json training_options_json(const TrainOptions& opts) {
  return fields_json(opts, kDumpConfig);
}

nlohmann::json effective_config_json(const TrainOptions& opts) {
  return {{"preset", opts.preset}, {"model", opts.model.to_json()},
          {"training", training_options_json(opts)}};
}

nlohmann::json resume_fingerprint(const TrainOptions& opts) {
  nlohmann::json j = fields_json(opts, kFingerprint);
  const TrainOptions defaults;
  for (const TrainOptionField& f : train_option_fields())
    if ((f.use & kFingerprintUnlessDefault) && f.get(opts) == f.get(defaults)) j.erase(f.key);
  j["config"] = opts.model.to_json();
  return j;
}

}  // namespace anuvad
