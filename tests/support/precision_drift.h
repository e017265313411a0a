// How far decoding with lower-precision weights (Transformer::set_compute_type: bfloat16, int8)
// moves a model's results: the two reference fixture models (tests/data/reference/, pre-norm
// tied and post-norm untied, 20 training steps) on the bundled dev and test pairs. Shared by
// bf16_test and int8_test.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "anuvad/decode/decode.h"
#include "anuvad/io/model_file.h"
#include "anuvad/text/corpus.h"

namespace anuvad::test {

/// tests/data/reference/model_<which>.safetensors ("pre" or "post").
inline std::string fixture_model(const std::string& which) {
  return std::string(ANUVAD_TEST_DATA) + "/reference/model_" + which + ".safetensors";
}

/// The pairs of data/dev.tsv and data/test.tsv as subwords of model m, those that fit its
/// max_positions (the fixtures have 32: 184 pairs).
inline std::vector<Example> dev_pairs(const TranslationModel& m) {
  std::vector<Example> pairs;
  const size_t limit = size_t(m.transformer->config().max_positions - 1);
  const std::string data = std::string(ANUVAD_SOURCE_DIR) + "/data/";
  for (const SentencePair& p : read_parallel_corpus({data + "dev.tsv", data + "test.tsv"})) {
    Example e{m.src_tokenizer->encode(p.src), m.tgt_tokenizer->encode(p.tgt)};
    if (e.src.size() <= limit && e.tgt.size() <= limit) pairs.push_back(std::move(e));
  }
  return pairs;
}

/// What lower precision changed between two copies of one model.
struct PrecisionDrift {
  double max_abs = 0;  ///< largest |Δ| of a sentence's forced-decoding log-probability, nats
  double max_rel = 0;  ///< the same relative to the float32 log-probability
  int same_greedy = 0;  ///< sentences whose greedy output is identical
  int sentences = 0;
};

/// Forced scores and greedy outputs of `reference` (float32) and `lowp` on dev_pairs.
inline PrecisionDrift precision_drift(const TranslationModel& reference, const TranslationModel& lowp) {
  const std::vector<Example> pairs = dev_pairs(reference);
  const auto a = forced_scores(*reference.transformer, pairs);
  const auto b = forced_scores(*lowp.transformer, pairs);
  PrecisionDrift d;
  d.sentences = int(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    double sa = 0, sb = 0;
    for (double v : a[i]) sa += v;
    for (double v : b[i]) sb += v;
    d.max_abs = std::max(d.max_abs, std::abs(sa - sb));
    d.max_rel = std::max(d.max_rel, std::abs(sa - sb) / std::abs(sa));
  }
  std::vector<std::vector<int32_t>> sources;
  for (const Example& e : pairs) sources.push_back(e.src);
  const auto ga = greedy_decode(*reference.transformer, sources, DecodeOptions{});
  const auto gb = greedy_decode(*lowp.transformer, sources, DecodeOptions{});
  for (size_t i = 0; i < sources.size(); ++i) d.same_greedy += ga[i].tokens == gb[i].tokens;
  return d;
}

}  // namespace anuvad::test
