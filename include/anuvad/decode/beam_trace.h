// The step-by-step record of beam search (`translate --beam-trace`, docs/attention.md): for each
// sentence and decoder step, every live hypothesis with its best candidate expansions and what
// the search did with them. Recording is optional (beam_search's BeamTrace* = nullptr costs
// nothing) and never changes the search: the proposals the search ranks are the same either way.
#pragma once

#include <cstdint>
#include <vector>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// What the search did with a candidate expansion.
enum class TraceStatus {
  kKept,      ///< became a live hypothesis of the next step
  kPruned,    ///< dropped (outside the beam; an EOS outside the top beam_size; or never ranked)
  kFinished,  ///< finished: EOS ranked among the top beam_size candidates, or cut at the length limit
};

/// One candidate expansion of a live hypothesis: its next token.
struct TraceCandidate {
  int32_t token = 0;
  int rank = 0;             ///< 0-based rank among the parent's proposals (best log p first)
  double logprob = 0;       ///< log p(token | hypothesis), nats
  double score = 0;         ///< parent score + logprob (nats)
  double normalized = 0;    ///< normalized_score(score, parent length + 1): the finished ranking
  TraceStatus status = TraceStatus::kPruned;
  int id = -1;              ///< the hypothesis it became (kept or finished), −1 when pruned
};

/// One live hypothesis at one decoder step (the step feeds its last token and predicts the next).
struct TraceHypothesis {
  int id = 0;          ///< unique within the sentence; 0 = the start (BOS)
  int parent = -1;     ///< id of the hypothesis of the previous step, −1 for the start
  int32_t token = 0;   ///< its last token (BOS for the start)
  double logprob = 0;  ///< log p of that token (0 for the start), nats
  double score = 0;    ///< Σ logprob (nats)
  double normalized = 0;  ///< normalized_score(score, tokens so far)
  /// Cross-attention of this step, averaged over heads: [decoder_layers, S] (S = source tokens
  /// incl. EOS); row l sums to 1.
  Mat cross;
  /// The `top` best proposals, best first, then any further proposal the search kept or
  /// finished (so every hypothesis of the tree is a candidate of its parent); ranks increase.
  std::vector<TraceCandidate> candidates;
};

/// A finished hypothesis, in order of finishing.
struct TraceFinished {
  int id = 0, parent = -1;
  int step = 0;        ///< the decoder step that produced its last token
  int32_t token = 0;   ///< its last token: EOS, or the token cut at the length limit
  double logprob = 0, score = 0, normalized = 0;
  bool eos = false;    ///< ended by EOS (else cut at the length limit)
};

/// The search of one sentence. An empty source is not searched: everything is empty.
struct SentenceTrace {
  std::vector<std::vector<TraceHypothesis>> steps;  ///< [step][live hypothesis], slot order
  std::vector<TraceFinished> finished;              ///< in order of finishing
  std::vector<int> n_best;  ///< ids of the finished hypotheses returned, best first
};

/// What beam_search records when given one: one SentenceTrace per source, in input order.
struct BeamTrace {
  int top = 5;  ///< candidates recorded per live hypothesis (≥ 1)
  std::vector<SentenceTrace> sentences;
};

}  // namespace anuvad
