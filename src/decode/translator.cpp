// Batching and ordering around beam_search (include/anuvad/decode/translator.h).
#include "anuvad/decode/translator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "anuvad/core/distributed.h"

namespace anuvad {

Translator::Translator(const Transformer& model, const DecodeOptions& opts, int mini_batch)
    : model_(model), opts_(opts), mini_batch_(static_cast<size_t>(std::max(mini_batch, 1))) {}

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

std::vector<std::string> Translator::translate_text_across_ranks(
    const std::vector<std::vector<int32_t>>& sources, const Tokenizer& tgt) const {
  if (world_size() <= 1) return translate_text(sources, tgt);
  // This rank's translations as records: input index (8 bytes), length (8 bytes), text.
  std::string mine;
  const auto put = [&mine](uint64_t v) { mine.append(reinterpret_cast<const char*>(&v), sizeof v); };
  run(sources, [&](size_t i, std::vector<Hypothesis>&& n_best) {
    const std::string text = tgt.detokenize(n_best.at(0).tokens);
    put(i);
    put(text.size());
    mine += text;
  }, nullptr, static_cast<size_t>(world_rank()), static_cast<size_t>(world_size()));
  const std::vector<std::string> all = gather_to_root(mine);
  std::vector<std::string> out(all.empty() ? 0 : sources.size());
  for (const std::string& records : all) {
    for (size_t pos = 0; pos + 16 <= records.size();) {
      uint64_t index = 0, length = 0;
      std::memcpy(&index, records.data() + pos, 8);
      std::memcpy(&length, records.data() + pos + 8, 8);
      out.at(index) = records.substr(pos + 16, length);
      pos += 16 + length;
    }
  }
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
