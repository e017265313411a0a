// `anuvad translate` (greedy autoregressive decoding with the KV cache) and `anuvad score`
// (forced decoding of given translations), with one model or an ensemble (--models, --weights;
// the model flags are shared with evaluate).
#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "anuvad/inspect/attention_dump.h"
#include "anuvad/inspect/beam_trace_dump.h"
#include "anuvad/text/corpus.h"
#include "anuvad/decode/alignment.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/translator.h"
#include "anuvad/core/bf16.h"
#include "anuvad/core/int8.h"
#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"
#include "anuvad/core/runtime.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct TranslateOptions {
  ModelOptions model;
  std::vector<std::string> sentences;
  DecodeOptions decode;
  bool word_scores = false;
  bool print_n_best = false;  ///< --n-best: print every hypothesis of the beam (Moses format)
  /// Sentences decoded together. 32 since finished sentences leave the batch (2026-12-03,
  /// README "Finished sentences leave the batch": 0.99-1.21x the speed of 16, greedy and beam 4).
  int mini_batch = 32;
  int maxi_batch = 100;
  std::string alignment;    ///< "", "hard", "soft" or a threshold in (0, 1]
  int alignment_layer = -1; ///< decoder layer (0-based) whose heads are averaged; −1 = last
  std::string attention_json;  ///< write every attention weight here (docs/attention.md)
  std::string attention_html;  ///< write the attention viewer page here
  std::string beam_trace_json; ///< write the search of every sentence here (docs/attention.md)
  int beam_trace_top = 5;      ///< candidates recorded per live hypothesis
  int cpu_threads = 0;
  bool max_length_given = false;  ///< --max-length was on the command line
};

struct ScoreOptions {
  ModelOptions model;
  bool word_scores = false;
  int cpu_threads = 0;
};

std::string format_scores(const std::vector<double>& scores) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(6);
  for (size_t i = 0; i < scores.size(); ++i) out << (i ? " " : "") << scores[i];
  return out.str();
}

/// One input sentence: its text (normalized as the model's training text), where it came from,
/// and an error (then it is not translated).
struct InputLine {
  std::string text;
  std::string where;
  std::string error;
};

/// A line or argument as the model sees it: checked (UTF-8, NUL), then normalized with the
/// model's rule (empty when it has nothing but whitespace and byte-order marks).
InputLine make_line(std::string text, std::string where, const TranslationModel& m) {
  InputLine l{std::move(text), std::move(where), {}};
  l.error = check_text(l.text);
  if (l.error.empty()) l.text = m.normalize(l.text);
  return l;
}

/// Up to `limit` lines of standard input, cleaned (clean_line), the first of them line
/// `lines_before` + 1 of the input; fewer only at the end of the input.
std::vector<std::string> read_lines(size_t limit, size_t lines_before) {
  std::vector<std::string> lines;
  std::string line;
  while (lines.size() < limit && std::getline(std::cin, line)) {
    clean_line(line, lines_before + lines.size() == 0);
    lines.push_back(std::move(line));
  }
  return lines;
}

/// Translates batches of input lines with the Translator and prints them in input order in the
/// format the flags ask for; keeps the best hypotheses for --attention/--html until finish().
class LinePrinter {
 public:
  /// Decodes with m.ensemble; tokenizers, attention layout and the alignment layer are
  /// m.first()'s.
  LinePrinter(const TranslateOptions& o, const LoadedModels& m, const AlignmentSpec& alignment)
      : o_(o), m_(m.first()), source_(m.shortest()), cfg_(m_.transformer->config()),
        translator_(m.ensemble, decode_options(o), o.mini_batch), alignment_(alignment) {
    layer_ = o.alignment_layer < 0 ? cfg_.decoder_layers + o.alignment_layer : o.alignment_layer;
    if (layer_ < 0 || layer_ >= cfg_.decoder_layers)
      throw ConfigError("--alignment-layer must name a decoder layer in [0, " +
                        std::to_string(cfg_.decoder_layers - 1) + "] or -1 for the last");
  }

  /// What beam_search is asked for: all beam-size hypotheses with --n-best, attention for
  /// --alignment, --attention and --html.
  static DecodeOptions decode_options(const TranslateOptions& o) {
    DecodeOptions d = o.decode;
    d.n_best = o.print_n_best ? d.beam_size : 1;
    d.return_attention = !o.alignment.empty() || dumping(o);
    return d;
  }
  static bool dumping(const TranslateOptions& o) { return !o.attention_json.empty() || !o.attention_html.empty(); }
  /// The search is recorded for --beam-trace and for the page's decoding view (--html); the
  /// attention document then carries it too.
  static bool tracing(const TranslateOptions& o) { return !o.beam_trace_json.empty() || !o.attention_html.empty(); }

  /// Translates `lines` (a line with an error is reported and printed empty) and prints them.
  /// Under mpirun every rank calls it with the same lines: the mini-batches are dealt out to
  /// the ranks (Translator::translate_across_ranks) and rank 0 alone prints.
  void translate(const std::vector<InputLine>& lines) {
    std::vector<std::vector<int32_t>> src(lines.size());
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].error.empty()) src[i] = source_.encode_source(lines[i].text, lines[i].where);
    BeamTrace trace{o_.beam_trace_top, {}};
    const std::vector<std::vector<Hypothesis>> result =
        translator_.translate_across_ranks(src, tracing(o_) ? &trace : nullptr);
    if (!is_root_rank()) return;
    for (size_t i = 0; i < lines.size(); ++i, ++sentence_id_) {
      if (!lines[i].error.empty()) {
        std::cerr << "anuvad: error: " << lines[i].where << ": " << lines[i].error << " (line skipped)" << std::endl;
        exit_code() = 1;
        print_empty();
        continue;
      }
      if (dumping(o_) || tracing(o_))
        kept_.push_back({result[i].front(), src[i], lines[i].text, tracing(o_) ? std::move(trace.sentences[i]) : SentenceTrace{}});
      if (src[i].empty()) {  // an empty (or blank) line gives one empty record, whatever the format
        print_empty();
        continue;
      }
      for (const Hypothesis& h : result[i]) {
        print(h);
        if (!o_.print_n_best) break;
      }
    }
    std::cout << std::flush;
  }

  /// Writes the --attention / --html / --beam-trace files of every translated line (rank 0).
  void finish() const {
    if ((!dumping(o_) && !tracing(o_)) || !is_root_rank()) return;
    std::vector<AttentionDumpSentence> entries;
    const auto piece = [this](int32_t id) { return m_.tgt_tokenizer->piece(id); };
    for (const Kept& k : kept_) {
      entries.push_back(attention_dump_sentence(*m_.src_tokenizer, *m_.tgt_tokenizer, k.text, k.src, k.best));
      if (tracing(o_)) entries.back().beam_trace = beam_trace_json(k.trace, o_.beam_trace_top, piece);
    }
    if (!o_.beam_trace_json.empty())
      write_beam_trace_json(o_.beam_trace_json,
                            make_beam_trace_dump(cfg_, translator_.options(), o_.beam_trace_top, entries));
    if (!dumping(o_)) return;
    const nlohmann::json doc = make_attention_dump(cfg_, translator_.options(), entries);
    if (!o_.attention_json.empty()) write_attention_json(o_.attention_json, doc);
    if (!o_.attention_html.empty()) write_attention_html(o_.attention_html, doc);
  }

 private:
  struct Kept {
    Hypothesis best;
    std::vector<int32_t> src;
    std::string text;
    SentenceTrace trace;  ///< with tracing()
  };

  void print(const Hypothesis& h) const {
    print_record(m_.tgt_tokenizer->detokenize(h.tokens),
                 o_.alignment.empty() ? "" : format_alignment(h, alignment_, cfg_.n_heads, layer_),
                 h.token_scores, h.score, h.normalized_score);
  }

  /// The record of an input with nothing to translate (empty after normalization, or skipped
  /// for an error): the empty translation with empty fields and scores 0, e.g.
  /// "1 |||  ||| F0= 0.000000 ||| 0.000000" with --n-best; a bare empty line without flags.
  void print_empty() const { print_record("", "", {}, 0.0, 0.0); }

  /// One output line in the format the flags ask for (fields joined by " ||| ").
  void print_record(const std::string& translation, const std::string& alignment,
                    const std::vector<double>& token_scores, double score, double normalized) const {
    if (o_.print_n_best) std::cout << sentence_id_ << " ||| ";
    std::cout << translation;
    if (!o_.alignment.empty()) std::cout << " ||| " << alignment;
    if (o_.word_scores) std::cout << " ||| WordScores= " << format_scores(token_scores);
    if (o_.print_n_best) std::cout << " ||| F0= " << format_scores({score}) << " ||| " << format_scores({normalized});
    std::cout << "\n";
  }

  const TranslateOptions& o_;
  const TranslationModel& m_;
  const TranslationModel& source_;  ///< encodes (and truncates) the sources of every model
  const ModelConfig& cfg_;
  const Translator translator_;
  const AlignmentSpec alignment_;
  int layer_ = 0;
  size_t sentence_id_ = 0;
  std::vector<Kept> kept_;
};

void run_translate(const TranslateOptions& o) {
  configure_threads(o.cpu_threads);
  const AlignmentSpec alignment = o.alignment.empty() ? AlignmentSpec{} : parse_alignment(o.alignment);
  if (o.decode.n_best > o.decode.beam_size && o.print_n_best)
    throw ConfigError("--n-best prints beam-size hypotheses; raise --beam-size");
  const LoadedModels m = load_models(o.model);
  TranslateOptions used = o;
  used.decode = honoured_decode_options(o.decode, m.limits(), o.max_length_given);
  LinePrinter printer(used, m, alignment);
  if (!o.sentences.empty()) {
    std::vector<InputLine> lines;
    for (size_t i = 0; i < o.sentences.size(); ++i)
      lines.push_back(make_line(o.sentences[i], "argument " + std::to_string(i + 1), m.first()));
    printer.translate(lines);
    printer.finish();
    return;
  }
  // Interactive input (a terminal) or --mini-batch 1 is answered line by line; otherwise
  // up to maxi-batch × mini-batch lines are read, sorted by length and translated in batches.
  // Under mpirun rank 0 reads and sends each chunk to every rank; an empty chunk ends.
  const bool streaming = ::isatty(STDIN_FILENO) || o.mini_batch == 1;
  const size_t chunk = streaming ? 1 : size_t(o.mini_batch) * size_t(o.maxi_batch);
  for (size_t n = 0;;) {
    std::vector<std::string> raw = is_root_rank() ? read_lines(chunk, n) : std::vector<std::string>{};
    broadcast(raw);
    if (raw.empty()) break;
    std::vector<InputLine> lines;
    for (std::string& text : raw) lines.push_back(make_line(std::move(text), "<stdin>:" + std::to_string(++n), m.first()));
    printer.translate(lines);
  }
  printer.finish();
}

void run_score(const ScoreOptions& o) {
  configure_threads(o.cpu_threads);
  const LoadedModels models = load_models(o.model);
  const TranslationModel& m = models.first();
  const int max_tokens = models.ensemble.max_positions() - 1;
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    clean_line(line, n == 1);
    const std::string where = "<stdin>:" + std::to_string(n);
    std::string why = check_text(line);
    SentencePair pair;
    if (why.empty()) why = split_tsv_pair(line, pair, m.normalization);
    Example e;
    if (why.empty()) {
      // Not truncated (unlike translate's sources): a score of part of a pair would be wrong.
      e.src = m.src_tokenizer->encode(pair.src);
      e.tgt = m.tgt_tokenizer->encode(pair.tgt);
      if (static_cast<int>(e.src.size()) > max_tokens || static_cast<int>(e.tgt.size()) > max_tokens)
        why = "longer than max_positions − 1 = " + std::to_string(max_tokens) + " subwords";
    }
    if (!why.empty()) {
      std::cerr << "anuvad: error: " << where << ": " << why << " (line skipped)" << std::endl;
      exit_code() = 1;
      std::cout << "\n" << std::flush;
      continue;
    }
    const auto scores = forced_scores(models.ensemble, {e})[0];
    double total = 0;
    for (double s : scores) total += s;
    std::cout << format_scores({total});
    if (o.word_scores) std::cout << " ||| WordScores= " << format_scores(scores);
    std::cout << "\n" << std::flush;
  }
}

}  // namespace

DecodeOptions honoured_decode_options(DecodeOptions opts, const ModelConfig& cfg, bool given) {
  const int cap = cfg.max_positions - 1;
  if (opts.max_length <= cap) return opts;
  if (given)
    spdlog::warn("--max-length {} exceeds this model's limit of max_positions − 1 = {} subwords; using {}",
                 opts.max_length, cap, cap);
  opts.max_length = cap;
  return opts;
}

void add_model_options(CLI::App* sub, ModelOptions& o) {
  CLI::Option* one = sub->add_option("-m,--model", o.model_path, "Model file")->capture_default_str();
  sub->add_option("--models", o.models,
                  "Ensemble of these model files (instead of -m): each next token is scored by the "
                  "weighted sum of the models' log-probabilities, Σ w_i·log p_i (Marian's ensemble). "
                  "They must share the source and target SentencePiece models and the text normalization. "
                  "The list takes every following argument: put sentences before it")
      ->excludes(one);
  sub->add_option("--weights", o.weights,
                  "One weight per model of --models (or -m); default 1 each");
  sub->add_option("--compute-type", o.compute_type,
                  "Precision of the weight matrices: float32, or bfloat16 (every matrix the "
                  "encoder, the decoder and the output projection multiply by, rounded to 8-bit "
                  "mantissas and read at half the bytes, for faster translation; sums stay "
                  "float32, and on CPUs with AVX-512 BF16 each product's activations are rounded "
                  "to bfloat16 too), or auto: bfloat16 for a model of at least 8 MiB of float32 "
                  "weight matrices where this build has an AVX2 or AVX-512 bfloat16 kernel (a "
                  "native build; `anuvad --version` says), float32 otherwise (smaller models "
                  "translate as fast or faster in float32). "
                  "On the models tried, sentence log-probabilities moved by up to 0.09 nats "
                  "(0.5 %) and dev chrF2 by -0.08 to +0.21. int8: every such matrix quantized per "
                  "output row to 8 bits and each product's activations per row (a quarter of the "
                  "float32 bytes; AVX-512 VNNI or AVX2 kernels; never chosen by auto)")
      ->capture_default_str();  // checked by load_models: a one-line anuvad error
}

LoadedModels load_models(const ModelOptions& o) {
  std::vector<std::string> paths = o.models.empty() ? std::vector<std::string>{o.model_path} : o.models;
  if (!o.weights.empty() && o.weights.size() != paths.size())
    throw ConfigError("--weights has " + std::to_string(o.weights.size()) + " values but there are " +
                      std::to_string(paths.size()) + " models; give one weight per model");
  ComputeType compute_type;
  try {
    compute_type = parse_compute_type(o.compute_type);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--compute-type: ") + e.what());
  }
  const std::string kernel = bf16_kernel_name(Bf16Kernel::kAuto);  // e.g. "onednn+scalar"
  if (compute_type == ComputeType::kBfloat16 && kernel.size() >= 6 && kernel.compare(kernel.size() - 6, 6, "scalar") == 0)
    spdlog::warn("--compute-type bfloat16: this build has no AVX2 or AVX-512 bfloat16 kernel (a "
                 "portable build, ANUVAD_NATIVE=OFF), so it runs a scalar one, about 2x slower "
                 "than float32");
  if (compute_type == ComputeType::kInt8 && int8_kernels_compiled().back() == Int8Kernel::kScalar)
    spdlog::warn("--compute-type int8: this build has no AVX2 or AVX-512 VNNI int8 kernel (a "
                 "portable build, ANUVAD_NATIVE=OFF), so it runs a scalar one, several times "
                 "slower than float32");
  std::vector<TranslationModel> models;
  std::vector<const Transformer*> nets;
  for (const std::string& path : paths) {
    models.push_back(load_model(path));
    models.back().transformer->set_compute_type(compute_type);
    const TranslationModel& a = models.front();
    const TranslationModel& b = models.back();
    const auto differ = [&](const std::string& what) {
      return ConfigError(paths.front() + " and " + path + " have different " + what +
                         "; the models of an ensemble must share it");
    };
    if (b.tgt_tokenizer->serialized() != a.tgt_tokenizer->serialized())
      throw differ("target vocabularies (tokenizer.tgt)");
    if (b.src_tokenizer->serialized() != a.src_tokenizer->serialized())
      throw differ("source vocabularies (tokenizer.src)");
    if (b.normalization != a.normalization) throw differ("text normalizations (text_normalization)");
    nets.push_back(b.transformer.get());
  }
  Ensemble ensemble(std::move(nets), o.weights);
  return LoadedModels{std::move(models), std::move(ensemble), std::move(paths)};
}

const TranslationModel& LoadedModels::shortest() const {
  const TranslationModel* best = &models.front();
  for (const TranslationModel& m : models)
    if (m.transformer->config().max_positions < best->transformer->config().max_positions) best = &m;
  return *best;
}

ModelConfig LoadedModels::limits() const {
  ModelConfig cfg = first().transformer->config();
  cfg.max_positions = ensemble.max_positions();
  return cfg;
}

void add_decode_options(CLI::App* sub, DecodeOptions& opts) {
  sub->add_option("-b,--beam-size", opts.beam_size, "Beam size (1 = greedy search)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  sub->add_option("-n,--normalize", opts.normalize,
                  "Length normalisation α: rank hypotheses by score / (target tokens incl. EOS)^α")
      ->capture_default_str()->check(CLI::Range(0.0, 10.0));
  sub->add_option("--word-penalty", opts.word_penalty,
                  "Added to a hypothesis score once per target token (incl. EOS)")->capture_default_str();
  sub->add_option("--max-length-factor", opts.max_length_factor,
                  "Output at most FACTOR·(source subwords + 1) + 10 subwords")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--max-length", opts.max_length, "Absolute output limit in subwords")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_flag("--allow-unk", opts.allow_unk, "Allow the decoder to produce <unk>");
}

void setup_translate(CLI::App& app) {
  auto o = std::make_shared<TranslateOptions>();
  CLI::App* sub = app.add_subcommand(
      "translate", "Translate English sentences to Hindi (arguments, or stdin one sentence per line)");
  add_model_options(sub, o->model);
  sub->add_option("sentences", o->sentences, "Sentences to translate (default: read stdin)");
  add_decode_options(sub, o->decode);
  sub->add_flag("--n-best", o->print_n_best,
                "Print all beam-size hypotheses: ID ||| translation ||| F0= score ||| normalized score");
  sub->add_flag("--word-scores", o->word_scores,
                "Append ' ||| WordScores= ' and the log-probability of each output token (EOS included)");
  sub->add_option("--mini-batch", o->mini_batch, "Sentences decoded together (1 = line by line)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  sub->add_option("--maxi-batch", o->maxi_batch,
                  "Mini-batches read ahead and sorted by length before decoding")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  sub->add_option("--alignment", o->alignment,
                  "Append ' ||| ' and a word alignment: hard, soft, or a threshold in (0, 1] "
                  "(subword positions, from cross-attention averaged over heads; of an "
                  "ensemble, the first model's)");
  sub->add_option("--alignment-layer", o->alignment_layer,
                  "Decoder layer (0-based) for --alignment; -1 = last")->capture_default_str();
  sub->add_option("--attention", o->attention_json,
                  "Write every attention weight (all layers, heads and kinds, from the cached "
                  "decoder, for the output hypothesis; of an ensemble, the first model's) to "
                  "FILE.json (docs/attention.md)");
  sub->add_option("--html", o->attention_html,
                  "Write a self-contained attention viewer page to FILE.html (with the decoding "
                  "view: the beam search is recorded as for --beam-trace)");
  sub->add_option("--beam-trace", o->beam_trace_json,
                  "Write every step of the search (each live hypothesis, its best candidates "
                  "and whether they were kept, pruned or finished) to FILE.json (docs/attention.md)");
  sub->add_option("--beam-trace-top", o->beam_trace_top,
                  "Candidates recorded per live hypothesis for --beam-trace and --html")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  sub->add_option("--cpu-threads", o->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->callback([o, sub] {
    o->max_length_given = sub->count("--max-length") > 0;
    run_translate(*o);
  });
}

void setup_score(CLI::App& app) {
  auto o = std::make_shared<ScoreOptions>();
  CLI::App* sub = app.add_subcommand(
      "score", "Forced decoding: read source<TAB>target lines on stdin, print the total "
               "log-probability (natural log, EOS included) of each target");
  add_model_options(sub, o->model);
  sub->add_flag("--word-scores", o->word_scores,
                "Print 'TOTAL ||| WordScores= s1 … sN', one score per target token (EOS included)");
  sub->add_option("--cpu-threads", o->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->callback([o] { run_score(*o); });
}

}  // namespace anuvad::cli
