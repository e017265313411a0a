// `anuvad translate` (greedy autoregressive decoding with the KV cache) and `anuvad score`
// (forced decoding of given translations).
#include <omp.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "anuvad/corpus.h"
#include "anuvad/decode.h"
#include "anuvad/error.h"
#include "anuvad/model_file.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct TranslateOptions {
  std::string model_path = "models/default.safetensors";
  std::vector<std::string> sentences;
  DecodeOptions decode;
  bool word_scores = false;
  int cpu_threads = 0;
};

struct ScoreOptions {
  std::string model_path = "models/default.safetensors";
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

/// Source text → subword ids, truncated (with a warning) to what the model can encode.
std::vector<int32_t> encode_source(const TranslationModel& m, const std::string& text,
                                   const std::string& where) {
  std::vector<int32_t> ids = m.src_tokenizer->encode(text);
  const size_t max_src = static_cast<size_t>(m.transformer->config().max_positions - 1);
  if (ids.size() > max_src) {
    spdlog::warn("{}: source has {} subwords, truncated to max_positions − 1 = {}", where,
                 ids.size(), max_src);
    ids.resize(max_src);
  }
  return ids;
}

void run_translate(const TranslateOptions& o) {
  if (o.cpu_threads > 0) omp_set_num_threads(o.cpu_threads);
  const TranslationModel m = load_model(o.model_path);
  auto translate_one = [&](const std::string& text, const std::string& where) {
    const std::string why = check_text(text);
    if (!why.empty()) {
      std::cerr << "anuvad: error: " << where << ": " << why << " (line skipped)" << std::endl;
      exit_code() = 1;
      std::cout << "\n" << std::flush;
      return;
    }
    const auto src = encode_source(m, text, where);
    const Hypothesis h = greedy_decode(*m.transformer, {src}, o.decode)[0];
    std::cout << m.tgt_tokenizer->decode(h.tokens);
    if (o.word_scores) std::cout << " ||| WordScores= " << format_scores(h.token_scores);
    std::cout << "\n" << std::flush;
  };
  if (!o.sentences.empty()) {
    for (size_t i = 0; i < o.sentences.size(); ++i)
      translate_one(o.sentences[i], "argument " + std::to_string(i + 1));
    return;
  }
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    clean_line(line, n == 1);
    translate_one(line, "<stdin>:" + std::to_string(n));
  }
}

void run_score(const ScoreOptions& o) {
  if (o.cpu_threads > 0) omp_set_num_threads(o.cpu_threads);
  const TranslationModel m = load_model(o.model_path);
  const int max_tokens = m.transformer->config().max_positions - 1;
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    clean_line(line, n == 1);
    const std::string where = "<stdin>:" + std::to_string(n);
    std::string why = check_text(line);
    const auto tab = line.find('\t');
    if (why.empty() && (tab == std::string::npos || line.find('\t', tab + 1) != std::string::npos))
      why = "expected exactly one tab (source<TAB>target)";
    Example e;
    if (why.empty()) {
      e.src = m.src_tokenizer->encode(line.substr(0, tab));
      e.tgt = m.tgt_tokenizer->encode(line.substr(tab + 1));
      if (static_cast<int>(e.src.size()) > max_tokens || static_cast<int>(e.tgt.size()) > max_tokens)
        why = "longer than max_positions − 1 = " + std::to_string(max_tokens) + " subwords";
    }
    if (!why.empty()) {
      std::cerr << "anuvad: error: " << where << ": " << why << " (line skipped)" << std::endl;
      exit_code() = 1;
      std::cout << "\n" << std::flush;
      continue;
    }
    const auto scores = forced_scores(*m.transformer, {e})[0];
    double total = 0;
    for (double s : scores) total += s;
    std::cout << format_scores({total});
    if (o.word_scores) std::cout << " ||| WordScores= " << format_scores(scores);
    std::cout << "\n" << std::flush;
  }
}

}  // namespace

void setup_translate(CLI::App& app) {
  auto o = std::make_shared<TranslateOptions>();
  CLI::App* sub = app.add_subcommand(
      "translate", "Translate English sentences to Hindi (arguments, or stdin one sentence per line)");
  sub->add_option("-m,--model", o->model_path, "Model file")->capture_default_str();
  sub->add_option("sentences", o->sentences, "Sentences to translate (default: read stdin)");
  sub->add_option("--max-length-factor", o->decode.max_length_factor,
                  "Output at most FACTOR·(source subwords + 1) + 10 subwords")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--max-length", o->decode.max_length, "Absolute output limit in subwords")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_flag("--allow-unk", o->decode.allow_unk, "Allow the decoder to produce <unk>");
  sub->add_flag("--word-scores", o->word_scores,
                "Append ' ||| WordScores= ' and the log-probability of each output token (EOS included)");
  sub->add_option("--cpu-threads", o->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->callback([o] { run_translate(*o); });
}

void setup_score(CLI::App& app) {
  auto o = std::make_shared<ScoreOptions>();
  CLI::App* sub = app.add_subcommand(
      "score", "Forced decoding: read source<TAB>target lines on stdin, print the total "
               "log-probability (natural log, EOS included) of each target");
  sub->add_option("-m,--model", o->model_path, "Model file")->capture_default_str();
  sub->add_flag("--word-scores", o->word_scores,
                "Print 'TOTAL ||| WordScores= s1 … sN', one score per target token (EOS included)");
  sub->add_option("--cpu-threads", o->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->callback([o] { run_score(*o); });
}

}  // namespace anuvad::cli
