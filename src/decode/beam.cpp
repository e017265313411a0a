// One sentence's beam search over a tree of partial hypotheses (include/anuvad/decode/beam.h).
#include "anuvad/decode/beam.h"

#include <algorithm>

namespace anuvad {

SentenceBeam::SentenceBeam(const DecodeOptions& opts, int limit, int n_layers, int n_heads,
                           SentenceTrace* trace, int trace_top, Index src_tokens)
    : opts_(opts),
      limit_(limit),
      n_layers_(n_layers),
      n_heads_(n_heads),
      stopping_(opts, limit),
      live_(size_t(opts.beam_size), -1),
      next_live_(size_t(opts.beam_size), -1),
      slot_attention_(size_t(opts.beam_size), -1),
      trace_(trace),
      trace_top_(trace_top),
      src_tokens_(src_tokens) {
  nodes_.push_back(Node{-1, kBosId, 0.0, 0.0, 0, -1});
  live_[0] = 0;
  if (limit_ == 0) {  // nothing may be produced: an empty, unfinished output
    finish(0, false);
    done_ = true;
  }
}

void SentenceBeam::finish(int node, bool eos) {
  const Node& n = nodes_[size_t(node)];
  const double normalized = normalized_score(n.score, n.length, opts_);
  finished_.add({node, normalized, eos});
  if (trace_) trace_->finished.push_back({node, n.parent, n_steps_, n.token, n.logp, n.score, normalized, eos});
}

void SentenceBeam::trace_step(const Proposal* proposals, int stride, const DecoderState& state,
                              int first_row) {
  std::vector<TraceHypothesis>& step = trace_->steps.emplace_back();
  trace_slot_.assign(size_t(opts_.beam_size), -1);
  const int top = std::min(stride, trace_top_);
  for (int k = 0; k < opts_.beam_size; ++k) {
    if (!live(k)) continue;
    const int id = live_[size_t(k)];
    const Node& n = nodes_[size_t(id)];
    TraceHypothesis h;
    h.id = id;
    h.parent = n.parent;
    h.token = n.token;
    h.logprob = n.logp;
    h.score = n.score;
    h.normalized = normalized_score(n.score, n.length, opts_);
    h.cross.resize(n_layers_, src_tokens_);  // head average of the step's rows (row·H + h)
    const Index row = Index(first_row) + k;
    for (int l = 0; l < n_layers_; ++l)
      h.cross.row(l) = state.last_cross_probs[size_t(l)].block(row * n_heads_, 0, n_heads_, src_tokens_)
                           .colwise().sum() / Scalar(n_heads_);
    const Proposal* p = proposals + size_t(k) * size_t(stride);
    for (int j = 0; j < top && p[j].token >= 0; ++j) {
      const double lp = static_cast<double>(p[j].logp);
      h.candidates.push_back({p[j].token, j, lp, n.score + lp,
                              normalized_score(n.score + lp, n.length + 1, opts_), TraceStatus::kPruned, -1});
    }
    trace_slot_[size_t(k)] = static_cast<int>(step.size());
    step.push_back(std::move(h));
  }
}

void SentenceBeam::trace_mark(const Candidate& c, TraceStatus status, int node) {
  TraceHypothesis& h = trace_->steps.back()[size_t(trace_slot_[size_t(c.slot)])];
  auto it = std::find_if(h.candidates.begin(), h.candidates.end(),
                         [&](const TraceCandidate& t) { return t.rank == c.rank; });
  if (it == h.candidates.end()) {  // ranked below trace_top_ but kept or finished: recorded too
    const Node& n = nodes_[size_t(node)];
    h.candidates.push_back({c.token, c.rank, c.logp, c.score, normalized_score(c.score, n.length, opts_),
                            status, node});
    return;
  }
  it->status = status;
  it->id = node;
}

int SentenceBeam::record_attention(int slot, const DecoderState& state, int first_row) {
  int& index = slot_attention_[size_t(slot)];
  if (index >= 0) return index;
  const Index row = Index(first_row) + slot;
  StepAttention a;
  for (int l = 0; l < n_layers_; ++l) {
    a.self.push_back(state.last_self_probs[size_t(l)].middleRows(row * n_heads_, n_heads_));
    a.cross.push_back(state.last_cross_probs[size_t(l)].middleRows(row * n_heads_, n_heads_));
  }
  steps_.push_back(std::move(a));
  index = static_cast<int>(steps_.size()) - 1;
  return index;
}

int SentenceBeam::add_node(const Candidate& c, const DecoderState& state, int first_row) {
  const int parent = live_[size_t(c.slot)];
  const int attention = opts_.return_attention ? record_attention(c.slot, state, first_row) : -1;
  nodes_.push_back(Node{parent, c.token, c.logp, c.score, nodes_[size_t(parent)].length + 1, attention});
  return static_cast<int>(nodes_.size()) - 1;
}

void SentenceBeam::advance(const Proposal* proposals, int take, const DecoderState& state,
                           int first_row, int* parents, int32_t* tokens, int stride) {
  const int K = opts_.beam_size;
  if (stride == 0) stride = take;
  if (trace_) trace_step(proposals, stride, state, first_row);
  candidates_.clear();
  for (int k = 0; k < K; ++k) {
    parents[k] = first_row + k;
    if (!live(k)) continue;
    const Proposal* p = proposals + size_t(k) * size_t(stride);
    const double base = nodes_[size_t(live_[size_t(k)])].score;
    for (int j = 0; j < take && p[j].token >= 0; ++j) {
      const double lp = static_cast<double>(p[j].logp);
      candidates_.push_back({base + lp, k, p[j].token, lp, j});
    }
  }
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.slot != b.slot) return a.slot < b.slot;
    return a.token < b.token;
  });
  std::fill(next_live_.begin(), next_live_.end(), -1);
  std::fill(slot_attention_.begin(), slot_attention_.end(), -1);
  int n_next = 0;
  const bool at_limit = n_steps_ + 1 >= limit_;  // the next token would exceed the limit
  for (size_t c = 0; c < candidates_.size() && n_next < K; ++c) {
    const Candidate& cd = candidates_[c];
    if (cd.token == kEosId) {  // finalised only when ranked among the top K candidates
      if (c < size_t(K)) {
        const int node = add_node(cd, state, first_row);
        finish(node, true);
        if (trace_) trace_mark(cd, TraceStatus::kFinished, node);
      }
      continue;
    }
    const int node = add_node(cd, state, first_row);
    if (at_limit) {  // length limit: finish without EOS, keeps the n-best list complete
      finish(node, false);
      if (trace_) trace_mark(cd, TraceStatus::kFinished, node);
      ++n_next;
      continue;
    }
    if (trace_) trace_mark(cd, TraceStatus::kKept, node);
    parents[n_next] = first_row + cd.slot;
    tokens[n_next] = cd.token;
    next_live_[size_t(n_next)] = node;
    ++n_next;
  }
  for (int k = n_next; k < K; ++k) tokens[k] = kPadId;
  if (trace_)
    for (TraceHypothesis& h : trace_->steps.back())
      std::stable_sort(h.candidates.begin(), h.candidates.end(),
                       [](const TraceCandidate& a, const TraceCandidate& b) { return a.rank < b.rank; });
  live_.swap(next_live_);
  ++n_steps_;
  live_scores_.clear();
  for (int k = 0; k < K; ++k)
    if (live(k)) live_scores_.push_back(nodes_[size_t(live_[size_t(k)])].score);
  done_ = stopping_.done(n_steps_, live_scores_, finished_);
}

Hypothesis SentenceBeam::materialise(const FinishedHypothesis& f, Index src_tokens) const {
  std::vector<const Node*> path;  // first token first
  for (int n = f.node; n > 0; n = nodes_[size_t(n)].parent) path.push_back(&nodes_[size_t(n)]);
  std::reverse(path.begin(), path.end());
  Hypothesis h;
  for (const Node* n : path) {
    h.token_scores.push_back(n->logp);
    h.tokens.push_back(n->token);
  }
  if (f.eos) h.tokens.pop_back();  // EOS is scored but not part of the output
  h.score = nodes_[size_t(f.node)].score;
  h.finished = f.eos;
  h.normalized_score = f.normalized_score;
  if (!opts_.return_attention) return h;
  // Rows h·T + t: the decoder step t of this hypothesis, from the tree's shared step records.
  const Index T = static_cast<Index>(path.size()), H = n_heads_;
  for (int l = 0; l < n_layers_; ++l) {
    Mat self = Mat::Zero(H * T, T), cross(H * T, src_tokens);
    for (Index t = 0; t < T; ++t) {
      const StepAttention& a = steps_[size_t(path[size_t(t)]->attention)];
      for (Index hd = 0; hd < H; ++hd) {
        self.block(hd * T + t, 0, 1, t + 1) = a.self[size_t(l)].row(hd);
        cross.row(hd * T + t) = a.cross[size_t(l)].row(hd).head(src_tokens);
      }
    }
    h.attention.decoder_self.push_back(std::move(self));
    h.attention.cross.push_back(std::move(cross));
  }
  return h;
}

std::vector<int> SentenceBeam::n_best_ids() const {
  std::vector<int> out;
  for (const FinishedHypothesis& f : finished_.best(opts_.n_best)) out.push_back(f.node);
  return out;
}

std::vector<Hypothesis> SentenceBeam::n_best(Index src_tokens) const {
  std::vector<Hypothesis> out;
  for (const FinishedHypothesis& f : finished_.best(opts_.n_best)) out.push_back(materialise(f, src_tokens));
  return out;
}

}  // namespace anuvad
