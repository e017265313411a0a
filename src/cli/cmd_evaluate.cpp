// `anuvad evaluate`: translate the source side of a test corpus and score the translations
// against its target side with BLEU, chrF2, chrF2++ and exact match (anuvad/metrics.h).
#include <omp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "anuvad/text/corpus.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/translator.h"
#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"
#include "anuvad/text/metrics.h"
#include "anuvad/io/model_file.h"
#include "anuvad/core/runtime.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct EvaluateOptions {
  ModelOptions model;
  std::vector<std::string> test_sets;
  DecodeOptions decode;
  int mini_batch = 32;
  std::string tokenize = "13a+danda";
  std::string output_path;
  bool json = false;
  int cpu_threads = 0;
  bool max_length_given = false;  ///< --max-length was on the command line
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)",
/// sacreBLEU's format.
std::string bleu_line(const BleuScore& b) {
  std::string s = "BLEU = " + fixed(b.score, 2) + " ";
  for (size_t i = 0; i < b.precisions.size(); ++i) s += (i ? "/" : "") + fixed(b.precisions[i], 1);
  const double ratio = b.ref_len > 0 ? static_cast<double>(b.sys_len) / static_cast<double>(b.ref_len) : 0.0;
  s += " (BP = " + fixed(b.brevity_penalty, 3) + " ratio = " + fixed(ratio, 3) +
       " hyp_len = " + std::to_string(b.sys_len) + " ref_len = " + std::to_string(b.ref_len) + ")";
  return s;
}

void run_evaluate(const EvaluateOptions& o) {
  configure_threads(o.cpu_threads);
  if (o.decode.n_best > o.decode.beam_size) throw ConfigError("--n-best must not exceed --beam-size");
  BleuOptions bleu_opts;
  bleu_opts.tokenize = o.tokenize;
  const LoadedModels models = load_models(o.model);
  const TranslationModel& m = models.first();
  const auto pairs = read_parallel_corpus(o.test_sets, m.normalization);

  // Sources as subword ids, truncated (with a warning) to what the model can encode.
  std::vector<std::vector<int32_t>> sources(pairs.size());
  std::vector<std::string> refs;
  refs.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    sources[i] = models.shortest().encode_source(pairs[i].src, pairs[i].origin);
    refs.push_back(pairs[i].tgt);
  }

  const DecodeOptions decode = honoured_decode_options(o.decode, models.limits(), o.max_length_given);
  const auto t0 = std::chrono::steady_clock::now();
  // Under mpirun every rank decodes its share of the mini-batches; rank 0 scores and prints.
  const auto hyps =
      Translator(models.ensemble, decode, o.mini_batch).translate_text_across_ranks(sources, *m.tgt_tokenizer);
  if (!is_root_rank()) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("translated {} sentences in {:.2f} s (beam size {})", hyps.size(), seconds,
               o.decode.beam_size);
  if (!o.output_path.empty()) {
    std::ofstream out(o.output_path, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(o.output_path + ": cannot write the translations");
    for (const auto& h : hyps) out << h << '\n';
    if (!out.flush()) throw IoError(o.output_path + ": write failed");
  }

  // Hypotheses are compared with the references under the same normalization.
  std::vector<std::string> normalized_hyps;
  normalized_hyps.reserve(hyps.size());
  for (const auto& h : hyps) normalized_hyps.push_back(m.normalize(h));
  const EvaluationScores e = evaluate_translations(normalized_hyps, refs, bleu_opts);
  if (o.json) {
    nlohmann::json j;
    j["model"] = models.paths.front();
    if (models.models.size() > 1 || !o.model.weights.empty()) {
      j["models"] = models.paths;
      std::vector<double> weights;
      for (size_t i = 0; i < models.ensemble.size(); ++i) weights.push_back(models.ensemble.weight(i));
      j["weights"] = weights;
    }
    j["test"] = o.test_sets;
    j["sentences"] = e.sentences;
    j["beam_size"] = o.decode.beam_size;
    j["normalize"] = o.decode.normalize;
    j["compute_type"] = compute_type_name(m.transformer->compute_type());  // auto resolved
    j["bleu"] = {{"score", e.bleu.score},
                 {"signature", e.bleu_signature},
                 {"counts", e.bleu.counts},
                 {"totals", e.bleu.totals},
                 {"precisions", e.bleu.precisions},
                 {"bp", e.bleu.brevity_penalty},
                 {"sys_len", e.bleu.sys_len},
                 {"ref_len", e.bleu.ref_len}};
    j["chrf"] = {{"score", e.chrf.score}, {"signature", e.chrf_signature}};
    j["chrf++"] = {{"score", e.chrf_pp.score}, {"signature", e.chrf_pp_signature}};
    j["exact_match"] = {{"percent", e.exact_match}, {"count", e.exact_count}};
    j["translate_seconds"] = seconds;
    std::cout << j.dump() << std::endl;
    return;
  }
  std::cout << bleu_line(e.bleu) << "  " << e.bleu_signature << "\n"
            << "chrF2 = " << fixed(e.chrf.score, 2) << "  " << e.chrf_signature << "\n"
            << "chrF2++ = " << fixed(e.chrf_pp.score, 2) << "  " << e.chrf_pp_signature << "\n"
            << "exact match = " << fixed(e.exact_match, 2) << " % (" << e.exact_count << " of "
            << e.sentences << ")\n"
            << "sentences = " << e.sentences << std::endl;
}

}  // namespace

void setup_evaluate(CLI::App& app) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* sub = app.add_subcommand(
      "evaluate", "Translate a test corpus and score it: BLEU, chrF2, chrF2++, exact match");
  add_model_options(sub, o->model);
  sub->add_option("--test", o->test_sets,
                  "Test corpus: one TSV (english<TAB>hindi) or two line-aligned files (.en .hi)")
      ->required()
      ->expected(1, 2);
  add_decode_options(sub, o->decode);
  sub->add_option("--mini-batch", o->mini_batch, "Sentences translated per batch")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("--tokenize", o->tokenize,
                  "BLEU tokenization: 13a+danda (13a with the Hindi danda split off), 13a "
                  "(sacreBLEU's exact default) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"13a+danda", "13a", "none"}));
  sub->add_option("-o,--output", o->output_path, "Also write the translations here, one per line");
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->add_option("--cpu-threads", o->cpu_threads, "Threads (0 = all cores)")->capture_default_str();
  sub->callback([o, sub] {
    o->max_length_given = sub->count("--max-length") > 0;
    run_evaluate(*o);
  });
}

}  // namespace anuvad::cli
