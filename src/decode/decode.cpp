// Autoregressive decoding on the key/value cache: greedy search and beam search (one code path;
// beam size 1 is greedy), and forced-decoding scores.
//
// Beam search follows fairseq's sequence_generator: every step each sentence's live beams
// propose their 2K best continuations; an EOS proposal ranked among the top K is finalised,
// the best K non-EOS proposals become the new beams, and the self-attention cache rows are
// gathered by parent (DecoderState::select_rows). A sentence's search ends when it has K
// finished hypotheses, when its n-best-th finished hypothesis scores at least the best that
// any live beam could still reach, or at the length limit (live beams are then finished
// without EOS, so the n-best list is always complete).
#include "anuvad/decode/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <omp.h>

#include "anuvad/core/error.h"
#include "anuvad/nn/loss.h"

namespace anuvad {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// A partial hypothesis (a beam) with its ancestry.
struct Beam {
  std::vector<int32_t> tokens;
  std::vector<double> token_scores;
  double score = 0;
  // Attention of each step so far (only with return_attention): per layer, per step [H, ·].
  std::vector<std::vector<Mat>> self_steps, cross_steps;
};

/// Ranking score: (Σ log p + word_penalty·n) / n^α, n = target tokens incl. EOS.
double normalized(double score, int n_tokens, const DecodeOptions& o) {
  const double n = std::max(n_tokens, 1);
  return (score + o.word_penalty * n) / std::pow(n, o.normalize);
}

/// Best normalised score a live beam (raw score s, n tokens so far) can still reach when it
/// finishes with between n + 1 and max_tokens tokens: log-probabilities only lower s.
double best_reachable(double s, int n, int max_tokens, const DecodeOptions& o) {
  double best = kNegInf;
  for (int len = n + 1; len <= std::max(max_tokens, n + 1); ++len)
    best = std::max(best, normalized(s, len, o));
  return best;
}

Hypothesis finish(const Beam& b, bool eos, const DecodeOptions& o, int n_layers, int n_heads) {
  Hypothesis h;
  h.tokens = b.tokens;
  h.token_scores = b.token_scores;
  h.score = b.score;
  h.finished = eos;
  h.normalized_score = normalized(b.score, static_cast<int>(b.token_scores.size()), o);
  if (o.return_attention) {
    const int T = static_cast<int>(b.token_scores.size());
    for (int l = 0; l < n_layers; ++l) {
      const Index S = b.cross_steps[l].empty() ? 0 : b.cross_steps[l][0].cols();
      Mat self = Mat::Zero(Index(n_heads) * T, T), cross(Index(n_heads) * T, S);
      for (int t = 0; t < T; ++t)
        for (int hd = 0; hd < n_heads; ++hd) {
          self.block(Index(hd) * T + t, 0, 1, t + 1) = b.self_steps[l][t].row(hd);
          cross.row(Index(hd) * T + t) = b.cross_steps[l][t].row(hd);
        }
      h.attention.decoder_self.push_back(std::move(self));
      h.attention.cross.push_back(std::move(cross));
    }
  }
  return h;
}

struct Candidate {
  double score;
  int beam;
  int32_t token;
  double logp;
};

/// A proposed next token of one row and its log-probability.
struct Proposal {
  Scalar logp;
  int32_t token;
};

/// For each row r of logits [R, V]: the `take` tokens with the highest log-probability
/// log_softmax(logits)[r, v] (ties: lower id first), PAD, BOS and (unless allow_unk) UNK
/// excluded, best first, into out[r·take ..]. Only the rows with wanted[r] are computed.
/// The log-probabilities are bit-identical to log_softmax_rows (same logsumexp, then
/// logit − lse); no [R, V] matrix is written.
void top_proposals(const Mat& logits, int take, bool allow_unk, const std::vector<char>& wanted,
                   std::vector<Proposal>& out) {
  const Index R = logits.rows(), V = logits.cols();
  out.assign(size_t(R) * take, Proposal{-std::numeric_limits<Scalar>::infinity(), -1});
  const bool parallel = double(R) * double(V) >= 65536.0 && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (Index r = 0; r < R; ++r) {
    if (!wanted[size_t(r)]) continue;
    const auto z = logits.row(r);
    const Scalar lse = logsumexp(z);
    Proposal* best = out.data() + size_t(r) * take;  // sorted, best first
    int n = 0;
    for (Index v = 0; v < V; ++v) {
      if (v == kPadId || v == kBosId || (v == kUnkId && !allow_unk)) continue;
      const Scalar lp = z[v] - lse;
      // Ascending v: an equal log-probability ranks after the ones already kept.
      if (n == take && !(lp > best[n - 1].logp)) continue;
      int j = n < take ? n++ : take - 1;
      while (j > 0 && lp > best[j - 1].logp) {
        best[j] = best[j - 1];
        --j;
      }
      best[j] = Proposal{lp, static_cast<int32_t>(v)};
    }
  }
}

}  // namespace

int max_output_length(const ModelConfig& cfg, const DecodeOptions& opts, int src_tokens) {
  const double rel = opts.max_length_factor * (src_tokens + 1) + 10;
  int limit = static_cast<int>(std::min<double>(rel, opts.max_length));
  limit = std::min(limit, cfg.max_positions - 1);
  return std::max(limit, 0);
}

std::vector<std::vector<Hypothesis>> decode_batch(const Transformer& model,
                                                  const std::vector<std::vector<int32_t>>& sources,
                                                  const DecodeOptions& opts) {
  const ModelConfig& cfg = model.config();
  if (opts.beam_size < 1) throw ConfigError("beam size must be at least 1");
  if (opts.n_best < 1 || opts.n_best > opts.beam_size)
    throw ConfigError("n-best size must be between 1 and the beam size");
  const int K = opts.beam_size;
  const int H = cfg.n_heads, L = cfg.decoder_layers;
  std::vector<std::vector<Hypothesis>> out(sources.size());

  // Empty sources translate to the empty string without running the model.
  std::vector<Example> examples;
  std::vector<size_t> index;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) {
      Hypothesis h;
      h.finished = true;
      out[i].push_back(h);
      continue;
    }
    ANUVAD_CHECK_SHAPE(static_cast<int>(sources[i].size()) + 1 <= cfg.max_positions,
                       "source of " + std::to_string(sources[i].size()) +
                           " subwords exceeds max_positions − 1");
    examples.push_back({sources[i], {}});
    index.push_back(i);
  }
  if (examples.empty()) return out;
  std::vector<const Example*> ptrs;
  for (const Example& e : examples) ptrs.push_back(&e);
  const Batch b = make_batch(ptrs);
  const int N = b.batch;

  ForwardCache cache;
  cache.inference = true;
  model.encode(b.src, N, b.src_len, b.src_lengths, DropoutContext{}, cache);
  std::vector<int> limit(N);
  int capacity = 1;
  for (int i = 0; i < N; ++i) {
    limit[i] = max_output_length(cfg, opts, b.src_lengths[i] - 1);
    capacity = std::max(capacity, limit[i] + 1);
  }
  DecoderState state = model.begin_decoding(cache.memory, N, b.src_len, b.src_lengths, capacity, K);

  // beams[i][k]: live beam k of sentence i (row i·K + k); only beam 0 is live at the start.
  std::vector<std::vector<Beam>> beams(N, std::vector<Beam>(K));
  std::vector<std::vector<char>> live(N, std::vector<char>(K, 0));
  std::vector<std::vector<Hypothesis>> finished(N);
  std::vector<char> done(N, 0);
  for (int i = 0; i < N; ++i) {
    live[i][0] = 1;
    if (opts.return_attention)
      for (auto& bm : beams[i]) {
        bm.self_steps.assign(L, {});
        bm.cross_steps.assign(L, {});
      }
    if (limit[i] == 0) {  // nothing may be produced: an empty, unfinished output
      finished[i].push_back(finish(beams[i][0], false, opts, L, H));
      done[i] = 1;
    }
  }

  std::vector<int32_t> tokens(size_t(N) * K, kBosId);
  std::vector<int> parents(size_t(N) * K);
  Mat logits;
  std::vector<Candidate> cands;
  std::vector<char> wanted(size_t(N) * K);
  std::vector<Proposal> proposals;
  const int n_allowed = static_cast<int>(model.config().tgt_vocab_size) - 2 - (opts.allow_unk ? 0 : 1);
  const int take = std::max(0, std::min(2 * K, n_allowed));
  for (int t = 0; t < capacity; ++t) {
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
    model.decode_step(tokens, state, logits);
    // Proposals of every live beam: its 2K best tokens (PAD, BOS and maybe UNK excluded).
    for (int i = 0; i < N; ++i)
      for (int k = 0; k < K; ++k) wanted[size_t(i) * K + k] = !done[i] && live[i][k];
    top_proposals(logits, take, opts.allow_unk, wanted, proposals);
    for (int i = 0; i < N; ++i) {
      for (int k = 0; k < K; ++k) parents[size_t(i) * K + k] = i * K + k;
      if (done[i]) continue;
      cands.clear();
      for (int k = 0; k < K; ++k) {
        if (!live[i][k]) continue;
        const Proposal* p = proposals.data() + (size_t(i) * K + k) * take;
        for (int j = 0; j < take && p[j].token >= 0; ++j) {
          const double lp = static_cast<double>(p[j].logp);
          cands.push_back({beams[i][k].score + lp, k, p[j].token, lp});
        }
      }
      std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& c) {
        if (a.score != c.score) return a.score > c.score;
        if (a.beam != c.beam) return a.beam < c.beam;
        return a.token < c.token;
      });
      std::vector<Beam> next(K);
      std::vector<char> next_live(K, 0);
      int n_next = 0;
      const bool at_limit = t + 1 >= limit[i];  // the next token would exceed the limit
      for (size_t c = 0; c < cands.size() && n_next < K; ++c) {
        const Candidate& cd = cands[c];
        Beam nb = beams[i][cd.beam];
        nb.token_scores.push_back(cd.logp);
        nb.score = cd.score;
        if (opts.return_attention) {
          const Index row = Index(i) * K + cd.beam;
          for (int l = 0; l < L; ++l) {
            nb.self_steps[l].push_back(state.last_self_probs[l].middleRows(row * H, H));
            nb.cross_steps[l].push_back(state.last_cross_probs[l].middleRows(row * H, H));
          }
        }
        if (cd.token == kEosId) {
          if (c < size_t(K)) finished[i].push_back(finish(nb, true, opts, L, H));
          continue;
        }
        nb.tokens.push_back(cd.token);
        if (at_limit) {  // length limit: finish without EOS, keeps the n-best list complete
          finished[i].push_back(finish(nb, false, opts, L, H));
          ++n_next;
          continue;
        }
        parents[size_t(i) * K + n_next] = i * K + cd.beam;
        tokens[size_t(i) * K + n_next] = cd.token;
        next[n_next] = std::move(nb);
        next_live[n_next] = 1;
        ++n_next;
      }
      for (int k = n_next; k < K; ++k) tokens[size_t(i) * K + k] = kPadId;
      beams[i] = std::move(next);
      live[i] = next_live;

      // Stopping: K finished, nothing live, or the n-best-th finished cannot be beaten.
      const int n_live = static_cast<int>(std::count(live[i].begin(), live[i].end(), 1));
      bool stop = n_live == 0 || static_cast<int>(finished[i].size()) >= K || at_limit;
      if (!stop && static_cast<int>(finished[i].size()) >= opts.n_best) {
        std::vector<double> f;
        for (const auto& h : finished[i]) f.push_back(h.normalized_score);
        std::nth_element(f.begin(), f.begin() + (opts.n_best - 1), f.end(), std::greater<>());
        const double nth = f[opts.n_best - 1];
        double reachable = kNegInf;
        for (int k = 0; k < K; ++k)
          if (live[i][k])
            reachable = std::max(reachable, best_reachable(beams[i][k].score, t + 1, limit[i] + 1, opts));
        stop = nth >= reachable;
      }
      if (stop) done[i] = 1;
    }
    state.select_rows(parents);
  }

  for (int i = 0; i < N; ++i) {
    auto& f = finished[i];
    std::stable_sort(f.begin(), f.end(), [](const Hypothesis& a, const Hypothesis& c) {
      return a.normalized_score > c.normalized_score;
    });
    if (static_cast<int>(f.size()) > opts.n_best) f.resize(opts.n_best);
    if (opts.return_attention) {
      // Encoder self-attention of sentence i: rows (i·H + h)·S + q of every layer.
      const int S = b.src_lengths[i];
      for (Hypothesis& h : f) {
        for (size_t l = 0; l < cache.enc.size(); ++l) {
          Mat m(Index(H) * S, S);
          for (int hd = 0; hd < H; ++hd)
            m.middleRows(Index(hd) * S, S) =
                cache.enc[l].self_attn.probs.block((Index(i) * H + hd) * b.src_len, 0, S, S);
          h.attention.encoder_self.push_back(std::move(m));
        }
        for (Mat& c : h.attention.cross) c = c.leftCols(S).eval();
      }
    }
    out[index[i]] = std::move(f);
  }
  return out;
}

std::vector<Hypothesis> greedy_decode(const Transformer& model,
                                      const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opts) {
  DecodeOptions o = opts;
  o.beam_size = 1;
  o.n_best = 1;
  std::vector<Hypothesis> out;
  for (auto& n_best : decode_batch(model, sources, o)) out.push_back(std::move(n_best.front()));
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
