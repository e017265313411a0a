// The beam search of one sentence: a tree of partial hypotheses with parent pointers.
//
// Beam search follows fairseq's sequence_generator: every step each live beam proposes its 2K
// best continuations (K = beam_size); an EOS proposal ranked among the top K candidates is
// finalised, the best K non-EOS candidates become the new beams (the decoder rows are then
// reordered by parent, DecoderState::select_rows), and the StoppingRule decides when the
// sentence is done. At the length limit the live beams finish without EOS, so the n-best list
// is always complete. Beam size 1 is greedy search.
#pragma once

#include <cstdint>
#include <vector>

#include "anuvad/decode/beam_trace.h"
#include "anuvad/decode/decode.h"
#include "anuvad/decode/nbest.h"
#include "anuvad/decode/stopping.h"

namespace anuvad {

/// A proposed next token of one beam and its log-probability (nats).
struct Proposal {
  Scalar logp;
  int32_t token;  ///< −1 = no proposal
};

/// The search state of one sentence: the tree of emitted tokens (each node points to its
/// parent; node 0 is the start, BOS), the live beams (slots 0..K−1, which are the decoder rows
/// first_row + k of the sentence), the finished hypotheses and the stopping rule.
/// With DecodeOptions::return_attention, the attention rows of a decoder step are copied once
/// per expanded beam and shared by all its children through the parent pointers; the
/// AttentionRecord of a hypothesis is assembled only for the hypotheses returned by n_best().
/// With a SentenceTrace, every step's live hypotheses, their candidates and the finished
/// hypotheses are recorded there (include/anuvad/decode/beam_trace.h); node ids are trace ids.
class SentenceBeam {
 public:
  /// limit: maximum output tokens (EOS excluded; 0 gives one empty, unfinished hypothesis).
  /// n_layers, n_heads: of the decoder (for the attention records). trace: where to record the
  /// search (nullptr = not recorded), with trace_top candidates per live hypothesis and
  /// cross-attention rows cut to the sentence's src_tokens source tokens (EOS included).
  SentenceBeam(const DecodeOptions& opts, int limit, int n_layers, int n_heads,
               SentenceTrace* trace = nullptr, int trace_top = 0, Index src_tokens = 0);

  bool done() const { return done_; }
  /// Whether slot k (decoder row first_row + k) holds a live beam.
  bool live(int k) const { return live_[size_t(k)] >= 0; }

  /// One search step after DecoderState::decode_step. proposals: [K·stride], row k the `stride`
  /// best tokens of slot k, best first (read for live slots only; stride 0 means take); the
  /// search ranks the first `take` ≤ stride of each row, the trace records up to trace_top of
  /// them. state: for the attention rows (first_row + k)·H.. of its last step. Writes, for each
  /// slot k of the next step, parents[k] (the decoder row it continues: first_row + old slot,
  /// or itself when empty) and tokens[k] (its next input; PAD for an empty slot).
  void advance(const Proposal* proposals, int take, const DecoderState& state, int first_row,
               int* parents, int32_t* tokens, int stride = 0);

  /// The n_best best hypotheses, best first (fewer only when fewer finished). Cross-attention
  /// records keep the first src_tokens columns (the sentence's own source, EOS included);
  /// encoder attention is left to the caller.
  std::vector<Hypothesis> n_best(Index src_tokens) const;
  /// The nodes (trace ids) of the hypotheses n_best() returns, best first.
  std::vector<int> n_best_ids() const;

 private:
  struct Node {
    int parent;       ///< previous token's node; −1 for the start node
    int32_t token;    ///< emitted token (EOS for a hypothesis that ended with it)
    double logp;      ///< log p of token (nats)
    double score;     ///< Σ logp from the start
    int length;       ///< tokens from the start incl. this one (= decoder steps)
    int attention;    ///< index into steps_ of the step that predicted token, or −1
  };
  /// Attention rows of one beam at one decoder step, per layer: self [H, t + 1], cross [H, S].
  struct StepAttention {
    std::vector<Mat> self, cross;
  };
  struct Candidate {
    double score;
    int slot;
    int32_t token;
    double logp;
    int rank;  ///< among the slot's proposals
  };

  int add_node(const Candidate& c, const DecoderState& state, int first_row);
  int record_attention(int slot, const DecoderState& state, int first_row);
  /// Adds a finished hypothesis (node) to the collector and to the trace.
  void finish(int node, bool eos);
  Hypothesis materialise(const FinishedHypothesis& f, Index src_tokens) const;
  /// Trace: the live hypotheses of this step with their first trace_top_ proposals (pruned).
  void trace_step(const Proposal* proposals, int stride, const DecoderState& state, int first_row);
  /// Trace: candidate `c` of this step became `node` (kept or finished).
  void trace_mark(const Candidate& c, TraceStatus status, int node);

  DecodeOptions opts_;
  int limit_, n_layers_, n_heads_;
  StoppingRule stopping_;
  NBestCollector finished_;
  std::vector<Node> nodes_;
  std::vector<StepAttention> steps_;
  std::vector<int> live_, next_live_;  ///< [K] node of each slot, −1 = empty
  std::vector<int> slot_attention_;    ///< [K] this step's steps_ entry of each slot, or −1
  std::vector<Candidate> candidates_;
  std::vector<double> live_scores_;
  int n_steps_ = 0;
  bool done_ = false;
  SentenceTrace* trace_;
  int trace_top_;
  Index src_tokens_;
  std::vector<int> trace_slot_;  ///< [K] index of each slot's hypothesis in this trace step
};

}  // namespace anuvad
