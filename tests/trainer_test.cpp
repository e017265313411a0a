// The parts of training on their own: option resolution (preset < -c FILE < flags) and the
// field table behind --dump-config and the resume fingerprint (train/options.h), validators and
// their best/stalled bookkeeping (train/validator.h), the checkpoint file
// (train/checkpoint.h), the progress arithmetic (train/progress.h), Adam and the gradient norm
// (train/adam.h), and the training state moved onto huge pages (core/runtime.h).
#include <catch2/catch.hpp>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/core/reduce.h"
#include "anuvad/core/runtime.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/text/corpus.h"
#include "anuvad/text/metrics.h"
#include "anuvad/train/adam.h"
#include "anuvad/train/checkpoint.h"
#include "anuvad/train/options.h"
#include "anuvad/train/progress.h"
#include "anuvad/train/validator.h"

using namespace anuvad;
namespace fs = std::filesystem;

namespace {

/// A file path in the temporary directory, removed when the object goes out of scope.
struct ScratchFile {
  explicit ScratchFile(const std::string& name)
      : path((fs::temp_directory_path() / ("anuvad_trainer_test_" + std::to_string(::getpid()) + "_" + name)).string()) {}
  ~ScratchFile() { std::error_code ec; fs::remove(path, ec); }
  std::string path;
};

std::vector<std::string> keys_with(unsigned use) {
  std::vector<std::string> out;
  for (const TrainOptionField& f : train_option_fields())
    if (f.use & use) out.push_back(f.key);
  return out;
}

/// A random matrix of the given shape (values in [-1, 1), exactly representable as float).
Mat random_mat(Index rows, Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<Scalar>(u(rng));
  return m;
}

}  // namespace

// ---- Options ---------------------------------------------------------------------------------

TEST_CASE("Options resolve as preset, then -c FILE, then explicit flags", "[train][options]") {
  TrainArgs args;
  args.preset = "small";
  args.options.learning_rate = 0.01;  // parsed, but not given explicitly: the preset's wins
  args.options.warmup_steps = 7;      // given explicitly: wins over the preset
  args.explicit_options = {"warmup_steps"};
  TrainOptions o = resolve_train_options(args);
  CHECK(o.preset == "small");
  CHECK(o.learning_rate == 1e-3);
  CHECK(o.warmup_steps == 7);
  CHECK(o.model.dropout == 0.3);  // the small preset's
  CHECK(o.model.attention_dropout == 0.1);
  CHECK(o.model.d_model == 256);  // the small preset's width
  // The small preset's stopping rule, with one of its fields given explicitly.
  CHECK(o.valid_metrics == std::vector<std::string>{"chrf", "cross-entropy", "bleu"});
  CHECK(o.valid_freq == 300);
  CHECK(o.early_stopping == 8);
  CHECK(o.after_epochs == 2000);
  CHECK(o.final_model == "best");
  args.options.early_stopping = 3;
  args.explicit_options.push_back("early_stopping");
  CHECK(resolve_train_options(args).early_stopping == 3);
  args.preset = "tiny";  // tiny's stopping rule: 120 epochs, chrF every 100 updates, best
  o = resolve_train_options(args);
  CHECK(o.valid_metrics == std::vector<std::string>{"chrf", "cross-entropy"});
  CHECK(o.valid_freq == 100);
  CHECK(o.after_epochs == 120);
  CHECK(o.final_model == "best");
  CHECK(o.early_stopping == 3);
  CHECK(o.model.dropout == 0.2);
  CHECK(o.model.ffn_dropout == 0.1);
  args.preset = "small";
  args.explicit_options = {"warmup_steps"};

  ScratchFile cfg("config.json");
  std::ofstream(cfg.path) << R"({"d_model": 64, "n_heads": 2, "dropout": 0.2})";
  args.options.config_path = cfg.path;
  o = resolve_train_options(args);
  CHECK(o.model.d_model == 64);             // file over preset
  CHECK(o.model.dropout == 0.2);            // file over preset
  CHECK(o.model.attention_dropout == 0.1);  // preset, not in the file

  args.model_flags = {{"dropout", 0.05}, {"d_ff", 100}};
  args.options.src_vocab_size = 300;
  args.explicit_options.push_back("src_vocab_size");
  o = resolve_train_options(args);
  CHECK(o.model.dropout == 0.05);  // flag over file
  CHECK(o.model.d_ff == 100);
  CHECK(o.model.d_model == 64);    // file, no flag
  CHECK(o.src_vocab_size == 300);
  CHECK(o.model.src_vocab_size == 300);  // the vocabulary sizes come from the options
  CHECK(o.model.tgt_vocab_size == 1000);
  CHECK(o.exponential_smoothing == 0);

  args.exponential_smoothing = "";
  CHECK(resolve_train_options(args).exponential_smoothing == 1e-4);  // Marian's default
  args.exponential_smoothing = "0.25";
  CHECK(resolve_train_options(args).exponential_smoothing == 0.25);
  args.exponential_smoothing = "abc";
  CHECK_THROWS_WITH(resolve_train_options(args), Catch::Contains("'abc' is not a number"));
  args.exponential_smoothing = "1.5";
  CHECK_THROWS_AS(resolve_train_options(args), ConfigError);
  args.exponential_smoothing.reset();

  args.model_flags = {{"n_heads", 3}};
  CHECK_THROWS_WITH(resolve_train_options(args), Catch::Contains("command line"));
  args.model_flags = nlohmann::json::object();
  std::ofstream(cfg.path) << R"({"d_model": 64, "dropout": 0.2, "d_model": 32})";
  args.options.config_path = cfg.path;  // a key given twice: an error naming it, not last-wins
  CHECK_THROWS_WITH(resolve_train_options(args), Catch::Contains(cfg.path) && Catch::Contains("duplicate key d_model"));
  CHECK_THROWS_AS(resolve_train_options(args), ConfigError);
  args.options.config_path = cfg.path + ".missing";
  CHECK_THROWS_AS(resolve_train_options(args), IoError);
  args.options.config_path.clear();
  args.preset = "huge";
  CHECK_THROWS_AS(resolve_train_options(args), ConfigError);
}

TEST_CASE("One field table gives --dump-config and the resume fingerprint", "[train][options]") {
  std::set<std::string> seen;
  for (const TrainOptionField& f : train_option_fields()) CHECK(seen.insert(f.key).second);
  // The "training" keys of --dump-config (the output is sorted by key).
  CHECK(keys_with(kDumpConfig) ==
        std::vector<std::string>{"train_sets", "valid_sets", "model_path", "config_path", "seed",
                                 "cpu_threads", "after_epochs", "after_steps", "batch_tokens",
                                 "learning_rate", "warmup_steps", "label_smoothing", "rdrop_alpha",
                                 "lr_decay", "lr_decay_stalled", "clip_norm", "valid_freq",
                                 "valid_metrics", "early_stopping", "final_model",
                                 "average_best", "valid_mini_batch", "src_vocab_size",
                                 "tgt_vocab_size", "sentencepiece_alphas", "save_freq", "resume",
                                 "exponential_smoothing"});
  CHECK(keys_with(kFingerprint) ==
        std::vector<std::string>{"train_sets", "valid_sets", "preset", "seed", "batch_tokens",
                                 "learning_rate", "warmup_steps", "label_smoothing", "rdrop_alpha",
                                 "lr_decay", "clip_norm", "valid_freq", "valid_metrics", "src_vocab_size",
                                 "tgt_vocab_size", "exponential_smoothing"});

  TrainOptions o;
  o.seed = 42;
  o.valid_metrics = {"chrf", "bleu"};
  o.model.d_model = 64;
  const nlohmann::json fp = resume_fingerprint(o);
  CHECK(fp.at("seed") == 42);
  CHECK(fp.at("valid_metrics") == nlohmann::json({"chrf", "bleu"}));
  CHECK(fp.at("config") == o.model.to_json());
  // + config, − rdrop_alpha and lr_decay (defaults: left out)
  CHECK(fp.size() == keys_with(kFingerprint).size() - 1);
  const nlohmann::json dump = effective_config_json(o);
  CHECK(dump.at("preset") == "tiny");
  CHECK(dump.at("model").at("d_model") == 64);
  CHECK(dump.at("training").size() == keys_with(kDumpConfig).size());
  CHECK(dump.at("training").at("seed") == 42);

  // get/set through the table reach the field itself.
  TrainOptions p;
  train_option_field("learning_rate").set(p, 0.5);
  CHECK(p.learning_rate == 0.5);
  CHECK(train_option_field("valid_metrics").get(o) == nlohmann::json({"chrf", "bleu"}));
  CHECK_THROWS_AS(train_option_field("no_such_option"), ConfigError);
}

// ---- Validation bookkeeping ------------------------------------------------------------------

TEST_CASE("The tracker keeps each metric's best and counts stalls of the first", "[train][valid]") {
  ValidationTracker t({{"chrf", false}, {"cross-entropy", true}}, 2);
  CHECK(t.record({{"chrf", 10}, {"cross-entropy", 3.0}}) == std::vector<std::string>{"chrf", "cross-entropy"});
  CHECK(t.stalled() == 0);
  // Only the second metric improves: the first has stalled once.
  CHECK(t.record({{"chrf", 10}, {"cross-entropy", 2.5}}) == std::vector<std::string>{"cross-entropy"});
  CHECK(t.stalled() == 1);
  CHECK_FALSE(t.should_stop());
  CHECK(t.record({{"chrf", 9}, {"cross-entropy", 2.6}}).empty());
  CHECK(t.stalled() == 2);
  CHECK(t.should_stop());  // early stopping after 2 stalls
  CHECK(t.best() == std::map<std::string, double>{{"chrf", 10}, {"cross-entropy", 2.5}});
  CHECK(t.record({{"chrf", 11}, {"cross-entropy", 3.0}}) == std::vector<std::string>{"chrf"});
  CHECK(t.stalled() == 0);
  CHECK_FALSE(t.should_stop());

  ValidationTracker never({{"perplexity", true}}, 0);
  for (int i = 0; i < 5; ++i) never.record({{"perplexity", 7.0}});
  CHECK(never.stalled() == 4);
  CHECK_FALSE(never.should_stop());
  never.restore({{"perplexity", 5.0}}, 1);
  CHECK(never.record({{"perplexity", 6.0}}).empty());
  CHECK(never.stalled() == 2);
  CHECK(never.best().at("perplexity") == 5.0);
  CHECK_THROWS(never.record({{"chrf", 1.0}}));  // a score for every tracked metric is needed
}

TEST_CASE("Each validator scores its metric; the best cross-entropy has one source", "[train][valid]") {
  ValidationInputs in;
  in.cross_entropy = 2.0;
  in.translations = {"नमस्ते दुनिया", "मैं ठीक हूँ"};
  const std::vector<std::string> refs{"नमस्ते दुनिया", "मैं ठीक हूं"};
  in.references = &refs;
  for (const std::string& name : valid_metric_names()) {
    const auto v = make_validator(name);
    CHECK(v->metric() == name);
    CHECK(v->lower_is_better() == (name == "cross-entropy" || name == "perplexity"));
    CHECK(v->needs_cross_entropy() != v->needs_translations());
  }
  CHECK(make_validator("cross-entropy")->score(in) == 2.0);
  CHECK(make_validator("perplexity")->score(in) == std::exp(2.0));
  CHECK(make_validator("chrf")->score(in) == corpus_chrf(in.translations, refs).score);
  CHECK(make_validator("bleu")->score(in) == corpus_bleu(in.translations, refs).score);
  CHECK(make_validator("chrf")->score(in) < 100);
  CHECK_THROWS_AS(make_validator("accuracy"), ConfigError);

  CHECK(best_cross_entropy({{"cross-entropy", 2.5}, {"perplexity", 100.0}}) == 2.5);
  CHECK(best_cross_entropy({{"perplexity", std::exp(1.5)}, {"chrf", 3.0}}) == Approx(1.5));
  CHECK(std::isnan(best_cross_entropy({{"chrf", 3.0}})));
  CHECK(format_metric("cross-entropy", 3.14159) == "cross-entropy 3.1416 nats/token");
  CHECK(format_metric("chrf", 21.374) == "chrf 21.37");
}

TEST_CASE("The validation log line lists every metric, new bests and stalls", "[train][valid]") {
  TrainOptions o;
  o.valid_metrics = {"cross-entropy"};
  o.early_stopping = 3;
  const std::vector<Example> none;
  Validation val(o, none, nullptr);
  CHECK_FALSE(val.active());
  ValidationResult v;
  v.step = 500;
  v.scores = {{"cross-entropy", 3.0}};
  v.improved = val.tracker().record(v.scores);
  CHECK(val.summary(v) == "valid step 500 | cross-entropy 3.0000 nats/token | perplexity 20.09 | new best");
  v.scores = {{"cross-entropy", 3.5}};
  v.improved = val.tracker().record(v.scores);
  CHECK(val.summary(v) == "valid step 500 | cross-entropy 3.5000 nats/token | perplexity 33.12 | stalled 1x of 3");

  o.valid_metrics = {"chrf", "chrf"};
  CHECK_THROWS_WITH(Validation(o, none, nullptr), Catch::Contains("listed twice"));
  o.valid_metrics = {};
  CHECK_THROWS_AS(Validation(o, none, nullptr), ConfigError);
  o.valid_metrics = {"bleu"};
  o.early_stopping = -1;
  CHECK_THROWS_AS(Validation(o, none, nullptr), ConfigError);
}

// ---- Checkpoints -----------------------------------------------------------------------------

TEST_CASE("A checkpoint reads back every tensor and counter it was written with", "[train][checkpoint]") {
  const auto pairs = read_parallel_corpus({std::string(ANUVAD_TEST_DATA) + "/cli/tiny.tsv"});
  std::vector<std::string> src, tgt;
  for (const auto& p : pairs) {
    src.push_back(p.src);
    tgt.push_back(p.tgt);
  }
  const Tokenizer src_tok = Tokenizer::train(src, {60, "unigram"});
  const Tokenizer tgt_tok = Tokenizer::train(tgt, {80, "unigram"});
  ModelConfig cfg;
  cfg.src_vocab_size = src_tok.vocab_size();
  cfg.tgt_vocab_size = tgt_tok.vocab_size();
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.d_ff = 32;
  cfg.encoder_layers = cfg.decoder_layers = 1;
  Transformer model(cfg);
  model.init_parameters(9);

  std::mt19937_64 rng(3);
  TrainState st;
  st.step = 1234;
  st.epoch = 7;
  st.next_batch = 5;
  st.rng_epoch_start = "11 22 33";
  st.rng = "44 55 66";
  st.epoch_loss = 123.456789012345;
  st.epoch_tokens = 987;
  st.tokens_total = 654321;
  st.elapsed_seconds = 42.25;
  st.stalled = 2;
  st.lr_scale = 0.25;
  st.epoch_losses = {5.5, 4.25, 3.125};
  st.best_valid = {{"chrf", 12.5}, {"cross-entropy", 2.75}};
  for (const Param& p : model.params().params()) {
    st.adam_m.push_back(random_mat(p.value.rows(), p.value.cols(), rng));
    st.adam_v.push_back(random_mat(p.value.rows(), p.value.cols(), rng));
    st.ema.push_back(random_mat(p.value.rows(), p.value.cols(), rng));
  }
  TrainOptions o;
  o.model = cfg;
  const nlohmann::json fingerprint = resume_fingerprint(o);
  ScratchFile file("round_trip.checkpoint.safetensors");
  const nlohmann::json hashes = {{"data/train.tsv", "fnv1a64:0123456789abcdef"}};
  write_checkpoint(file.path, model, src_tok, tgt_tok, fingerprint, st, hashes);

  const Checkpoint c = read_checkpoint(file.path, fingerprint, true);
  CHECK(c.corpus_hashes == hashes);
  const TrainState& r = c.state;
  CHECK(r.step == st.step);
  CHECK(r.epoch == st.epoch);
  CHECK(r.next_batch == st.next_batch);
  CHECK(r.rng_epoch_start == st.rng_epoch_start);
  CHECK(r.rng == st.rng);
  CHECK(r.epoch_loss == st.epoch_loss);
  CHECK(r.epoch_tokens == st.epoch_tokens);
  CHECK(r.tokens_total == st.tokens_total);
  CHECK(r.elapsed_seconds == st.elapsed_seconds);
  CHECK(r.stalled == st.stalled);
  CHECK(r.lr_scale == st.lr_scale);
  CHECK(r.epoch_losses == st.epoch_losses);
  CHECK(r.best_valid == st.best_valid);
  REQUIRE(r.adam_m.size() == st.adam_m.size());
  REQUIRE(r.adam_v.size() == st.adam_v.size());
  REQUIRE(r.ema.size() == st.ema.size());
  const auto& params = model.params().params();
  const auto& loaded = c.model.transformer->params().params();
  REQUIRE(loaded.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    INFO(params[i].name);
    CHECK(r.adam_m[i] == st.adam_m[i]);
    CHECK(r.adam_v[i] == st.adam_v[i]);
    CHECK(r.ema[i] == st.ema[i]);
    CHECK(loaded[i].value == params[i].value);
  }
  CHECK(c.model.transformer->config().to_json() == cfg.to_json());
  CHECK(c.model.src_tokenizer->serialized() == src_tok.serialized());
  CHECK(c.model.tgt_tokenizer->serialized() == tgt_tok.serialized());
  CHECK_NOTHROW(check_state_matches(r, c.model.transformer->params(), true));
  CHECK(read_checkpoint(file.path, fingerprint, false).state.ema.empty());

  // The on-disk names and metadata (docs/model-format.md) are those older checkpoints have.
  const SafetensorsFile raw = read_safetensors(file.path);
  const std::string first = params.front().name;
  CHECK(raw.tensors.count("adam.m." + first) == 1);
  CHECK(raw.tensors.count("adam.v." + first) == 1);
  CHECK(raw.tensors.count("ema." + first) == 1);
  CHECK(raw.tensors.at("adam.m." + first).dtype == "F32");
  CHECK(state_tensor_name(StateTensor::kAdamSecondMoment, "x.weight") == "adam.v.x.weight");
  const auto state_json = nlohmann::json::parse(raw.metadata.at("training_state"));
  CHECK(state_json.at("best_ce") == 2.75);  // derived from best_valid, for older readers
  // A checkpoint from before --lr-decay has no lr_scale: the undecayed rate; a bad one is refused.
  nlohmann::json older = state_json;
  older.erase("lr_scale");
  TrainState from_older;
  from_older.counters_from_json(older);
  CHECK(from_older.lr_scale == 1.0);
  older["lr_scale"] = 0.0;
  CHECK_THROWS_WITH(from_older.counters_from_json(older), Catch::Contains("lr_scale not in (0, 1]"));
  CHECK(nlohmann::json::parse(raw.metadata.at("training_options")) == fingerprint);

  // Another option: refused, naming it.
  TrainOptions other = o;
  other.learning_rate = 5e-4;
  CHECK_THROWS_WITH(read_checkpoint(file.path, resume_fingerprint(other), true),
                    Catch::Contains("checkpoint was written with another learning_rate (0.001 instead of 0.0005)"));
  // R-Drop is in the fingerprint only when on (checkpoints from before it resume): turning it on
  // or off on resume is refused, naming it, both ways.
  CHECK(!fingerprint.contains("rdrop_alpha"));
  TrainOptions rdrop = o;
  rdrop.rdrop_alpha = 5;
  CHECK(resume_fingerprint(rdrop).at("rdrop_alpha") == 5.0);
  CHECK_THROWS_WITH(read_checkpoint(file.path, resume_fingerprint(rdrop), true),
                    Catch::Contains("checkpoint was written with another rdrop_alpha (none instead of 5.0)"));
  {
    ScratchFile with_rdrop("rdrop.checkpoint.safetensors");
    write_checkpoint(with_rdrop.path, model, src_tok, tgt_tok, resume_fingerprint(rdrop), st, hashes);
    CHECK_NOTHROW(read_checkpoint(with_rdrop.path, resume_fingerprint(rdrop), true));
    CHECK_THROWS_WITH(read_checkpoint(with_rdrop.path, fingerprint, true),
                      Catch::Contains("checkpoint was written with another rdrop_alpha (5.0 instead of the default)"));
  }
  // A checkpoint written before layer_dropout existed (its config lacks the key) resumes; one
  // written with layer dropout on does not resume without it.
  {
    ScratchFile older_file("older_config.checkpoint.safetensors");
    nlohmann::json older_fp = fingerprint;
    older_fp["config"].erase("layer_dropout");
    write_checkpoint(older_file.path, model, src_tok, tgt_tok, older_fp, st, hashes);
    CHECK_NOTHROW(read_checkpoint(older_file.path, fingerprint, true));
    TrainOptions layer_drop = o;
    layer_drop.model.layer_dropout = 0.2;
    CHECK_THROWS_WITH(read_checkpoint(older_file.path, resume_fingerprint(layer_drop), true),
                      Catch::Contains("checkpoint was written with another config"));
  }
  // More early-stopping patience, or a longer run: accepted (the stall count is in the state).
  TrainOptions patient = o;
  patient.early_stopping = o.early_stopping + 8;
  patient.after_steps = o.after_steps + 1000;
  CHECK(read_checkpoint(file.path, resume_fingerprint(patient), true).state.stalled == st.stalled);
  // A state without EMA, read as one with: refused, naming the tensor.
  TrainState no_ema = st;
  no_ema.ema.clear();
  write_checkpoint(file.path, model, src_tok, tgt_tok, fingerprint, no_ema);
  CHECK_THROWS_WITH(read_checkpoint(file.path, fingerprint, true),
                    Catch::Contains("optimizer/EMA tensor ema.") && Catch::Contains("missing or misshapen"));
  CHECK_THROWS_AS(check_state_matches(no_ema, model.params(), true), ConfigError);
  no_ema.adam_v.pop_back();
  CHECK_THROWS_AS(check_state_matches(no_ema, model.params(), false), ConfigError);
}

TEST_CASE("Corpus hashes are FNV-1a of the bytes; a changed file is named", "[train][checkpoint]") {
  ScratchFile a("a.tsv"), empty("empty.tsv");
  std::ofstream(a.path) << "a";
  std::ofstream(empty.path);
  // The published FNV-1a 64-bit test values.
  CHECK(file_content_hash(empty.path) == "fnv1a64:cbf29ce484222325");
  CHECK(file_content_hash(a.path) == "fnv1a64:af63dc4c8601ec8c");
  CHECK_THROWS_AS(file_content_hash(a.path + ".missing"), IoError);
  const nlohmann::json saved = corpus_hashes({a.path, empty.path});
  CHECK(saved.at(a.path) == "fnv1a64:af63dc4c8601ec8c");
  CHECK_NOTHROW(check_corpus_unchanged(saved, saved, "x.checkpoint.safetensors"));
  CHECK_NOTHROW(check_corpus_unchanged(nullptr, saved, "x.checkpoint.safetensors"));  // older checkpoint
  std::ofstream(a.path) << "b";
  const nlohmann::json now = corpus_hashes({a.path, empty.path});
  CHECK_THROWS_AS(check_corpus_unchanged(saved, now, "x.checkpoint.safetensors"), DataError);
  CHECK_THROWS_WITH(check_corpus_unchanged(saved, now, "x.checkpoint.safetensors"),
                    Catch::StartsWith(a.path + ": changed since the checkpoint x.checkpoint.safetensors") &&
                        Catch::Contains("--no-resume"));
}

TEST_CASE("F32 packing round-trips a matrix and refuses a wrong size", "[train][checkpoint]") {
  std::mt19937_64 rng(1);
  const Mat m = random_mat(3, 5, rng);
  const RawTensor t = pack_f32(m, {3, 5});
  CHECK(t.dtype == "F32");
  CHECK(t.shape == std::vector<int64_t>{3, 5});
  CHECK(t.bytes.size() == 15 * sizeof(float));
  CHECK(unpack_f32(t, 3, 5, "m") == m);
  CHECK_THROWS_WITH(unpack_f32(t, 5, 5, "tensor m"), "tensor m missing or misshapen");
  RawTensor f64 = t;
  f64.dtype = "F64";
  CHECK_THROWS_AS(unpack_f32(f64, 3, 5, "m"), ModelFileError);
  CHECK(checkpoint_path("models/x.safetensors") == "models/x.checkpoint.safetensors");
}

// ---- Progress --------------------------------------------------------------------------------

TEST_CASE("Progress: planned updates, ETA and time formatting", "[train][progress]") {
  const int64_t unknown = std::numeric_limits<int64_t>::max();
  CHECK(planned_steps(10, 5, 0) == 50);
  CHECK(planned_steps(10, 5, 30) == 30);
  CHECK(planned_steps(10, 5, 80) == 50);
  CHECK(planned_steps(10, 0, 30) == 30);
  CHECK(planned_steps(10, 0, 0) == unknown);
  CHECK(eta_seconds(20.0, 10, 50) == 80.0);  // 2 s per update, 40 updates to go
  CHECK(eta_seconds(20.0, 50, 50) == 0.0);
  CHECK(eta_seconds(20.0, 10, unknown) == -1);
  CHECK(format_hms(0) == "0:00");
  CHECK(format_hms(59.4) == "0:59");
  CHECK(format_hms(59.6) == "1:00");
  CHECK(format_hms(3599.4) == "59:59");
  CHECK(format_hms(3600) == "1:00:00");
  CHECK(format_eta(3600, false) == "1:00:00");
  CHECK(format_eta(3600, true) == "≤ 1:00:00");
  CHECK(format_eta(-1, true) == "--:--");
  CHECK(format_hms(3725) == "1:02:05");
  CHECK(format_hms(-1) == "--:--");
  CHECK(format_hms(std::nan("")) == "--:--");
  const ProgressReporter p(100, 0, true, 30.0);
  CHECK(p.elapsed_seconds() >= 30.0);
  CHECK(p.elapsed_seconds() < 60.0);
}

TEST_CASE("gradient_norm and clipping inside Adam: the definition, whatever the thread count", "[adam]") {
  // 3 parameters (one of 77,000 values: 19 blocks of 4,096, enough for the parallel path): the
  // norm equals the sum of squares in long double to double rounding, 1 and 2 threads give the
  // same bits, and an Adam step with the clipping factor equals clip_grad_norm followed by a
  // plain step, bit for bit.
  const auto make = [] {
    ParamRegistry reg;
    reg.add("a", {3, 5});
    reg.add("big", {70, 1100});
    reg.add("b", {7});
    std::mt19937_64 rng(11);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (Param& p : reg.params()) {
      p.grad_acc();
      for (Index j = 0; j < p.value.size(); ++j) p.value.data()[j] = Scalar(nd(rng));
      for (Index j = 0; j < p.grad.size(); ++j) p.grad.data()[j] = Scalar(nd(rng));
    }
    return reg;
  };
  ParamRegistry reg = make();
  long double sq = 0;
  for (const Param& p : reg.params())
    for (Index j = 0; j < p.grad.size(); ++j) sq += (long double)p.grad.data()[j] * p.grad.data()[j];
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = gradient_norm(reg);
  omp_set_num_threads(2);
  const double two = gradient_norm(reg);
  CHECK(one == two);
  CHECK(std::abs(one - double(std::sqrt(sq))) <= 1e-12 * one);
  CHECK(clip_coefficient(one, 0.0) == Scalar(1));
  CHECK(clip_coefficient(one, 2 * one) == Scalar(1));
  CHECK(clip_coefficient(one, 1.0) == Scalar(1.0 / (one + 1e-12)));

  ParamRegistry clipped = make(), folded = make();
  Adam a1(clipped), a2(folded);
  CHECK(clip_grad_norm(clipped, 1.0) == one);
  a1.step(clipped, 1e-3, 1);
  a2.step(folded, 1e-3, 1, clip_coefficient(gradient_norm(folded), 1.0));
  for (size_t i = 0; i < clipped.params().size(); ++i)
    CHECK(clipped.params()[i].value == folded.params()[i].value);

  reg.params()[1].grad(5, 7) = std::numeric_limits<Scalar>::infinity();
  CHECK_FALSE(std::isfinite(gradient_norm(reg)));
  reg.params()[1].grad(5, 7) = std::numeric_limits<Scalar>::quiet_NaN();
  CHECK(std::isnan(gradient_norm(reg)));
  omp_set_num_threads(saved);
}

TEST_CASE("sum_in_double and sum_of_squares_in_double accumulate in double at any length", "[adam]") {
  // 1 followed by n values of 2^-26: a float accumulator stays at 1 (each addend is below half an
  // ulp of 1), a double one adds them all. Lengths around the vector width exercise the tails.
  for (const Index n : {Index(0), Index(1), Index(15), Index(16), Index(17), Index(1000), Index(4097)}) {
    std::vector<Scalar> x(static_cast<size_t>(n) + 1, Scalar(std::ldexp(1.0, -26)));
    x[0] = Scalar(1);
    const double tiny = std::ldexp(1.0, -26);
    CHECK(sum_in_double(x.data(), n + 1) == 1.0 + double(n) * tiny);
    CHECK(sum_of_squares_in_double(x.data(), n + 1) == 1.0 + double(n) * tiny * tiny);
  }
  CHECK(sum_in_double(nullptr, 0) == 0.0);
  const std::vector<Scalar> bad{Scalar(1), std::numeric_limits<Scalar>::quiet_NaN(), Scalar(2)};
  CHECK(std::isnan(sum_in_double(bad.data(), 3)));
  CHECK(std::isnan(sum_of_squares_in_double(bad.data(), 3)));
}

TEST_CASE("Adam::step follows Kingma & Ba's Algorithm 1 on every value, whatever the thread count", "[adam]") {
  // Three parameters of different sizes (37,000 values in one), three steps with new gradients
  // each: every value equals Algorithm 1 computed in double (float32 rounding only), and 1 and 2
  // threads give the same bits.
  const auto run = [](int threads) {
    ParamRegistry reg;
    reg.add("a", {3, 5});
    reg.add("big", {37, 1000});
    reg.add("b", {7});
    std::mt19937_64 rng(5);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (Param& p : reg.params())
      for (Index j = 0; j < p.value.size(); ++j) p.value.data()[j] = Scalar(nd(rng));
    Adam adam(reg, 0.9, 0.98, 1e-9);
    std::vector<Eigen::MatrixXd> theta, m, v;
    for (const Param& p : reg.params()) {
      theta.push_back(p.value.cast<double>());
      m.push_back(Eigen::MatrixXd::Zero(p.value.rows(), p.value.cols()));
      v.push_back(Eigen::MatrixXd::Zero(p.value.rows(), p.value.cols()));
    }
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    double worst = 0;
    for (int64_t t = 1; t <= 3; ++t) {
      size_t i = 0;
      for (Param& p : reg.params()) {
        p.grad_acc();
        for (Index j = 0; j < p.grad.size(); ++j) p.grad.data()[j] = Scalar(nd(rng) * 1e-2);
        const Eigen::MatrixXd g = p.grad.cast<double>();
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.98 * v[i] + 0.02 * g.cwiseAbs2();
        const Eigen::MatrixXd m_hat = m[i] / (1 - std::pow(0.9, double(t)));
        const Eigen::MatrixXd v_hat = v[i] / (1 - std::pow(0.98, double(t)));
        theta[i].array() -= 1e-3 * m_hat.array() / (v_hat.array().sqrt() + 1e-9);
        ++i;
      }
      adam.step(reg, 1e-3, t);
      i = 0;
      for (const Param& p : reg.params()) worst = std::max(worst, (p.value.cast<double>() - theta[i++]).cwiseAbs().maxCoeff());
    }
    omp_set_num_threads(saved);
    CHECK(worst < 1e-6);  // values ~1, steps ~1e-3: float32 rounding of θ and of the moments
    std::vector<Mat> out;
    for (const Param& p : reg.params()) out.push_back(p.value);
    return out;
  };
  const std::vector<Mat> one = run(1), two = run(2);
  for (size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
}

namespace {

/// AnonHugePages of the process's [heap] mappings (/proc/self/smaps), in KiB.
long heap_huge_page_kib() {
  std::ifstream smaps("/proc/self/smaps");
  long kib = 0;
  bool in_heap = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find('-') < line.find(' ') && line.find(':') > line.find(' '))  // a mapping's first line
      in_heap = line.size() >= 6 && line.compare(line.size() - 6, 6, "[heap]") == 0;
    else if (in_heap && line.rfind("AnonHugePages:", 0) == 0)
      kib += std::stol(line.substr(14));
  }
  return kib;
}

}  // namespace

TEST_CASE("back_heap_with_huge_pages moves the heap's buffers onto huge pages, contents kept", "[runtime]") {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    WARN("this kernel has no transparent huge pages: nothing to check");
    return;
  }
#if defined(__SANITIZE_ADDRESS__)
  WARN("AddressSanitizer's allocator keeps the buffers out of glibc's heap: nothing to check");
  return;
#endif
  configure_allocator();  // (as anuvad does at start-up: a 64 MiB buffer comes from the heap)
  std::vector<float> buffer(size_t(16) << 20);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = float(i % 9973);
  const long before = heap_huge_page_kib();
  const size_t advised = back_heap_with_huge_pages();
  CHECK(advised >= (size_t(60) << 20));
  CHECK(heap_huge_page_kib() >= before + 60 * 1024);  // the buffer's whole 2 MiB pages (MADV_COLLAPSE)
  size_t changed = 0;
  for (size_t i = 0; i < buffer.size(); ++i) changed += buffer[i] != float(i % 9973);
  CHECK(changed == 0);
}
