// Batching and ordering around beam_search (include/anuvad/decode/translator.h).
#include "anuvad/decode/translator.h"

#include <algorithm>
#include <numeric>

namespace anuvad {

Translator::Translator(const Transformer& model, const DecodeOptions& opts, int mini_batch)
    : model_(model), opts_(opts), mini_batch_(static_cast<size_t>(std::max(mini_batch, 1))) {}

void Translator::run(const std::vector<std::vector<int32_t>>& sources,
                     const std::function<void(size_t, std::vector<Hypothesis>&&)>& sink,
                     BeamTrace* trace) const {
  if (trace != nullptr) trace->sentences.assign(sources.size(), SentenceTrace{});
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::vector<int32_t>> batch;
  for (size_t begin = 0; begin < order.size(); begin += mini_batch_) {
    const size_t end = std::min(order.size(), begin + mini_batch_);
    batch.clear();
    for (size_t k = begin; k < end; ++k) batch.push_back(sources[order[k]]);
    BeamTrace batch_trace{trace != nullptr ? trace->top : 0, {}};
    auto hyps = beam_search(model_, batch, opts_, trace != nullptr ? &batch_trace : nullptr);
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

std::vector<std::string> best_translations(const Transformer& model,
                                           const std::vector<Example>& examples,
                                           const Tokenizer& tgt, int mini_batch,
                                           const DecodeOptions& decode) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(examples.size());
  for (const Example& e : examples) sources.push_back(e.src);
  return Translator(model, decode, mini_batch).translate_text(sources, tgt);
}

}  // namespace anuvad
