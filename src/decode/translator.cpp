// Batching and ordering around beam_search (include/anuvad/decode/translator.h).
#include "anuvad/decode/translator.h"

#include <algorithm>
#include <numeric>

#include "anuvad/core/distributed.h"
#include "anuvad/decode/result_bytes.h"

namespace anuvad {

Translator::Translator(const Ensemble& models, const DecodeOptions& opts, int mini_batch)
    : models_(models), opts_(opts), mini_batch_(static_cast<size_t>(std::max(mini_batch, 1))) {}

void Translator::run(const std::vector<std::vector<int32_t>>& sources,
                     const std::function<void(size_t, std::vector<Hypothesis>&&)>& sink,
                     BeamTrace* trace, size_t first, size_t stride) const {
  if (trace != nullptr) trace->sentences.assign(sources.size(), SentenceTrace{});
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::vector<int32_t>> batch;
  for (size_t begin = 0, j = 0; begin < order.size(); begin += mini_batch_, ++j) {
    if (j % stride != first) continue;
    const size_t end = std::min(order.size(), begin + mini_batch_);
    batch.clear();
    for (size_t k = begin; k < end; ++k) batch.push_back(sources[order[k]]);
    BeamTrace batch_trace{trace != nullptr ? trace->top : 0, {}};
    auto hyps = beam_search(models_, batch, opts_, trace != nullptr ? &batch_trace : nullptr);
    for (size_t k = begin; k < end; ++k) {
      if (trace != nullptr) trace->sentences[order[k]] = std::move(batch_trace.sentences[k - begin]);
      sink(order[k], std::move(hyps[k - begin]));
    }
  }
}

std::vector<std::vector<Hypothesis>> Translator::translate(
    const std::vector<std::vector<int32_t>>& sources, BeamTrace* trace) const {
  std::vector<std::vector<Hypothesis>> out(sources.size());
  run(sources, [&](size_t i, std::vector<Hypothesis>&& n_best) { out[i] = std::move(n_best); }, trace);
  return out;
}

std::vector<std::string> Translator::translate_text(const std::vector<std::vector<int32_t>>& sources,
                                                    const Tokenizer& tgt) const {
  std::vector<std::string> out(sources.size());
  run(sources, [&](size_t i, std::vector<Hypothesis>&& n_best) { out[i] = tgt.detokenize(n_best.at(0).tokens); });
  return out;
}

std::vector<std::vector<Hypothesis>> Translator::translate_across_ranks(
    const std::vector<std::vector<int32_t>>& sources, BeamTrace* trace) const {
  if (world_size() <= 1) return translate(sources, trace);
  // This rank's share as records (decode/result_bytes.h); its search is moved out of `local`
  // as soon as it is written.
  BeamTrace local{trace != nullptr ? trace->top : 0, {}};
  std::string mine;
  run(sources, [&](size_t i, std::vector<Hypothesis>&& n_best) {
    append_result_bytes(mine, i, n_best, trace != nullptr ? &local.sentences[i] : nullptr);
    if (trace != nullptr) local.sentences[i] = SentenceTrace{};
  }, trace != nullptr ? &local : nullptr, static_cast<size_t>(world_rank()), static_cast<size_t>(world_size()));
  const std::vector<std::string> all = gather_to_root(mine);
  if (trace != nullptr) trace->sentences.assign(all.empty() ? 0 : sources.size(), SentenceTrace{});
  std::vector<std::vector<Hypothesis>> out(all.empty() ? 0 : sources.size());
  for (const std::string& records : all) {
    for (size_t pos = 0; pos < records.size();) {
      SourceResult r = read_result_bytes(records, pos);
      out.at(r.index) = std::move(r.n_best);
      if (trace != nullptr && r.has_trace) trace->sentences.at(r.index) = std::move(r.trace);
    }
  }
  return out;
}

std::vector<std::string> Translator::translate_text_across_ranks(
    const std::vector<std::vector<int32_t>>& sources, const Tokenizer& tgt) const {
  std::vector<std::string> out;
  for (const std::vector<Hypothesis>& n_best : translate_across_ranks(sources))
    out.push_back(tgt.detokenize(n_best.at(0).tokens));
  return out;
}

std::vector<std::string> best_translations(const Ensemble& models,
                                           const std::vector<Example>& examples,
                                           const Tokenizer& tgt, int mini_batch,
                                           const DecodeOptions& decode) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(examples.size());
  for (const Example& e : examples) sources.push_back(e.src);
  return Translator(models, decode, mini_batch).translate_text(sources, tgt);
}

}  // namespace anuvad
