// Greedy decoding with the key/value cache, and forced-decoding scores.
#include "anuvad/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "anuvad/error.h"
#include "anuvad/loss.h"

namespace anuvad {

int max_output_length(const ModelConfig& cfg, const DecodeOptions& opts, int src_tokens) {
  const double rel = opts.max_length_factor * (src_tokens + 1) + 10;
  int limit = static_cast<int>(std::min<double>(rel, opts.max_length));
  limit = std::min(limit, cfg.max_positions - 1);
  return std::max(limit, 0);
}

std::vector<Hypothesis> greedy_decode(const Transformer& model,
                                      const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opts) {
  const ModelConfig& cfg = model.config();
  std::vector<Hypothesis> out(sources.size());
  // Sentences with an empty source translate to the empty string without running the model.
  std::vector<const Example*> batch_examples;
  std::vector<Example> examples;
  std::vector<size_t> index;
  examples.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) {
      out[i].finished = true;
      continue;
    }
    ANUVAD_CHECK_SHAPE(static_cast<int>(sources[i].size()) + 1 <= cfg.max_positions,
                       "source of " + std::to_string(sources[i].size()) +
                           " subwords exceeds max_positions − 1");
    examples.push_back({sources[i], {}});
    index.push_back(i);
  }
  if (examples.empty()) return out;
  for (const Example& e : examples) batch_examples.push_back(&e);
  const Batch b = make_batch(batch_examples);

  ForwardCache cache;
  model.encode(b.src, b.batch, b.src_len, b.src_lengths, DropoutContext{}, cache);
  std::vector<int> limit(b.batch);
  int capacity = 1;
  for (int i = 0; i < b.batch; ++i) {
    limit[i] = max_output_length(cfg, opts, b.src_lengths[i] - 1);
    capacity = std::max(capacity, limit[i] + 1);
  }
  DecoderState state = model.begin_decoding(cache.memory, b.batch, b.src_len, b.src_lengths, capacity);
  std::vector<int32_t> tokens(b.batch, kBosId);
  std::vector<char> done(b.batch, 0);
  int n_done = 0;
  for (int i = 0; i < b.batch; ++i)
    if (limit[i] == 0) {
      done[i] = 1;
      ++n_done;
    }
  Mat logits;
  for (int t = 0; n_done < b.batch && t < capacity; ++t) {
    model.decode_step(tokens, state, logits);
    const Mat logp = log_softmax_rows(logits);
    for (int i = 0; i < b.batch; ++i) {
      if (done[i]) {
        tokens[i] = kPadId;  // finished rows keep stepping in lockstep; their output is ignored
        continue;
      }
      Hypothesis& h = out[index[i]];
      int32_t best = -1;
      Scalar best_v = -std::numeric_limits<Scalar>::infinity();
      for (int32_t k = 0; k < logp.cols(); ++k) {
        if (k == kPadId || k == kBosId || (k == kUnkId && !opts.allow_unk)) continue;
        if (best < 0 || logp(i, k) > best_v) {
          best = k;
          best_v = logp(i, k);
        }
      }
      h.token_scores.push_back(static_cast<double>(best_v));
      h.score += static_cast<double>(best_v);
      if (best == kEosId) {
        h.finished = true;
        done[i] = 1;
        ++n_done;
        continue;
      }
      h.tokens.push_back(best);
      tokens[i] = best;
      if (static_cast<int>(h.tokens.size()) >= limit[i]) {
        done[i] = 1;
        ++n_done;
      }
    }
  }
  return out;
}

std::vector<std::vector<double>> forced_scores(const Transformer& model,
                                               const std::vector<Example>& pairs) {
  std::vector<std::vector<double>> out(pairs.size());
  if (pairs.empty()) return out;
  std::vector<const Example*> ptrs;
  for (const Example& e : pairs) ptrs.push_back(&e);
  const Batch b = make_batch(ptrs);
  ForwardCache cache;
  Mat logits;
  model.forward(b, DropoutContext{}, cache, logits);
  const Mat logp = log_softmax_rows(logits);
  for (int i = 0; i < b.batch; ++i)
    for (int t = 0; t < b.tgt_lengths[i]; ++t) {
      const Index r = Index(i) * b.tgt_len + t;
      out[i].push_back(static_cast<double>(logp(r, b.tgt_out[r])));
    }
  return out;
}

}  // namespace anuvad

namespace anuvad {

std::vector<std::vector<Hypothesis>> decode_batch(const Transformer& model,
                                                  const std::vector<std::vector<int32_t>>& sources,
                                                  const DecodeOptions& opts) {
  std::vector<std::vector<Hypothesis>> out;
  for (Hypothesis& h : greedy_decode(model, sources, opts)) out.push_back({std::move(h)});
  return out;
}

}  // namespace anuvad
