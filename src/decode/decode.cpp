// Autoregressive decoding on the key/value cache: the batch driver of beam search (greedy is
// beam size 1; one SentenceBeam per sentence, include/anuvad/decode/beam.h), and
// forced-decoding scores, of one model or an ensemble (include/anuvad/decode/ensemble.h).
#include "anuvad/decode/decode.h"

#include <algorithm>
#include <limits>


#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"
#include "anuvad/decode/beam.h"
#include "anuvad/nn/loss.h"

namespace anuvad {

namespace {

/// Logits per block of top_proposals' scan (a multiple of the widest vector).
constexpr Index kScanBlock = 64;

/// For each row r of logits [R, V]: the `take` tokens with the highest log-probability
/// log_softmax(logits)[r, v] (ties: lower id first), PAD, BOS and (unless allow_unk) UNK
/// excluded, best first, into out[r·take ..]. Only the rows with wanted[r] are computed.
/// The log-probabilities are bit-identical to log_softmax_rows (same logsumexp, then
/// logit − lse); no [R, V] matrix is written. `log_probs`: the rows already are the scores
/// (an ensemble's, ensemble_log_probs), taken as they are.
void top_proposals(const Mat& logits, int take, bool allow_unk, const std::vector<char>& wanted,
                   std::vector<Proposal>& out, bool log_probs = false) {
  const Index R = logits.rows(), V = logits.cols();
  out.assign(size_t(R) * take, Proposal{-std::numeric_limits<Scalar>::infinity(), -1});
  parallel_for(R, double(R) * double(V) >= 65536.0, [&](Index r) {
    if (!wanted[size_t(r)]) return;
    const auto z = logits.row(r);
    const Scalar lse = log_probs ? Scalar(0) : logsumexp(z);
    Proposal* best = out.data() + size_t(r) * take;  // sorted, best first
    int n = 0;
    const auto consider = [&](Index v) {
      if (v == kPadId || v == kBosId || (v == kUnkId && !allow_unk)) return;
      const Scalar lp = z[v] - lse;
      // Ascending v: an equal log-probability ranks after the ones already kept.
      if (n == take && !(lp > best[n - 1].logp)) return;
      int j = n < take ? n++ : take - 1;
      while (j > 0 && lp > best[j - 1].logp) {
        best[j] = best[j - 1];
        --j;
      }
      best[j] = Proposal{lp, static_cast<int32_t>(v)};
    };
    // Blocks of kScanBlock logits: once `take` are kept, a block whose largest logit (NaN
    // ignored: once `take` are kept a NaN never enters) cannot beat the last kept one is
    // skipped whole. The same proposals as testing every logit: z − lse is monotonic in z, so
    // no logit of a skipped block would have passed the test in `consider`.
    Index v = 0;
    for (; v < V && v < kScanBlock; ++v) consider(v);  // the special ids sit at the start
    for (; v < V; v += kScanBlock) {
      const Index len = std::min(kScanBlock, V - v);
      if (n == take && !(z.segment(v, len).maxCoeff<Eigen::PropagateNumbers>() - lse > best[n - 1].logp))
        continue;
      for (Index u = v; u < v + len; ++u) consider(u);
    }
  });
}

/// Runs the beam searches of a batch in lockstep on the decoder states, one per model, until
/// every sentence is done or `capacity` steps were taken. The states hold the rows of the
/// sentences still searching, in order (`active`): rows p·K + k belong to sentence active[p];
/// a finished sentence's rows are dropped from every state after the step that finished it
/// (DecoderState::keep_rows), so later steps spend nothing on it. One model with weight 1
/// ranks its own log-softmax; an ensemble ranks ensemble_log_probs. Attention rows come from
/// the first model's state. trace_top > 0: each live beam proposes that many tokens (or 2K if
/// more) for the trace; the search still ranks only its 2K best, the same ones as without a
/// trace.
void search(const Ensemble& models, std::vector<DecoderState>& states, std::vector<SentenceBeam>& beams,
            const DecodeOptions& opts, int capacity, int trace_top) {
  const int K = opts.beam_size;
  std::vector<int> active(beams.size());
  for (size_t i = 0; i < beams.size(); ++i) active[i] = static_cast<int>(i);
  std::vector<int32_t> tokens(active.size() * K, kBosId);
  std::vector<int> parents, keep;
  // Drops the rows of the finished sentences from `active`, `tokens` and every state.
  auto drop_finished = [&] {
    keep.clear();
    size_t n_active = 0;
    for (size_t p = 0; p < active.size(); ++p) {
      if (beams[active[p]].done()) continue;
      for (int k = 0; k < K; ++k) {
        keep.push_back(static_cast<int>(p) * K + k);
        tokens[n_active * K + k] = tokens[p * K + k];
      }
      active[n_active++] = active[p];
    }
    if (n_active == active.size()) return;
    active.resize(n_active);
    tokens.resize(n_active * K);
    for (DecoderState& state : states) state.keep_rows(keep);
  };
  std::vector<char> wanted;
  std::vector<Proposal> proposals;
  std::vector<Mat> logits(models.size());
  Mat combined;
  const int n_allowed = static_cast<int>(models.first().config().tgt_vocab_size) - 2 - (opts.allow_unk ? 0 : 1);
  const int take = std::max(0, std::min(2 * K, n_allowed));
  const int stride = std::max(take, std::min(trace_top, n_allowed));
  drop_finished();  // a sentence whose length limit is 0 is done before the first step
  for (int t = 0; t < capacity && !active.empty(); ++t) {
    const int P = static_cast<int>(active.size());
    for (size_t m = 0; m < models.size(); ++m) models.model(m).decode_step(tokens, states[m], logits[m]);
    // Proposals of every live beam: its 2K best tokens (PAD, BOS and maybe UNK excluded).
    wanted.assign(size_t(P) * K, 0);
    for (int p = 0; p < P; ++p)
      for (int k = 0; k < K; ++k) wanted[size_t(p) * K + k] = beams[active[p]].live(k);
    if (models.single()) {
      top_proposals(logits[0], stride, opts.allow_unk, wanted, proposals);
    } else {
      ensemble_log_probs(models, logits, wanted, combined);
      top_proposals(combined, stride, opts.allow_unk, wanted, proposals, /*log_probs=*/true);
    }
    parents.resize(size_t(P) * K);
    for (int p = 0; p < P; ++p) {
      const size_t row = size_t(p) * K;
      beams[active[p]].advance(proposals.data() + row * stride, take, states[0], int(row), &parents[row],
                               &tokens[row], stride);
    }
    for (DecoderState& state : states) state.select_rows(parents);
    drop_finished();
  }
}

/// Encoder self-attention of sentence i of an inference-mode encoder pass (rows (i·H + h)·S_pad
/// + q of every layer's probs), cut to its own S source tokens: [L_enc] each [H·S, S].
std::vector<Mat> encoder_attention(const ForwardCache& cache, int i, int n_heads, int src_len, int S) {
  std::vector<Mat> out;
  for (size_t l = 0; l < cache.enc.size(); ++l) {
    Mat m(Index(n_heads) * S, S);
    for (int hd = 0; hd < n_heads; ++hd)
      m.middleRows(Index(hd) * S, S) =
          cache.enc[l].self_attn.probs.block((Index(i) * n_heads + hd) * src_len, 0, S, S);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int max_output_length(const ModelConfig& cfg, const DecodeOptions& opts, int src_tokens) {
  const double rel = opts.max_length_factor * (src_tokens + 1) + 10;
  int limit = static_cast<int>(std::min<double>(rel, opts.max_length));
  limit = std::min(limit, cfg.max_positions - 1);
  return std::max(limit, 0);
}

std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& models,
                                                  const std::vector<std::vector<int32_t>>& sources,
                                                  const DecodeOptions& opts, BeamTrace* trace) {
  const ModelConfig& cfg = models.first().config();
  if (opts.beam_size < 1) throw ConfigError("beam size must be at least 1");
  if (opts.n_best < 1 || opts.n_best > opts.beam_size)
    throw ConfigError("n-best size must be between 1 and the beam size");
  if (trace != nullptr && trace->top < 1) throw ConfigError("beam trace: top must be at least 1");
  std::vector<std::vector<Hypothesis>> out(sources.size());
  if (trace != nullptr) trace->sentences.assign(sources.size(), SentenceTrace{});

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
    ANUVAD_CHECK_SHAPE(static_cast<int>(sources[i].size()) + 1 <= models.max_positions(),
                       "source of " + std::to_string(sources[i].size()) +
                           " subwords exceeds max_positions − 1");
    examples.push_back({sources[i], {}});
    index.push_back(i);
  }
  if (examples.empty()) return out;
  std::vector<const Example*> ptrs;
  for (const Example& e : examples) ptrs.push_back(&e);
  const Batch b = make_batch(ptrs);
  const int N = b.batch_size;

  std::vector<SentenceBeam> beams;
  beams.reserve(size_t(N));
  int capacity = 1;
  for (int i = 0; i < N; ++i) {
    int limit = max_output_length(cfg, opts, b.src_lengths[i] - 1);
    for (size_t m = 1; m < models.size(); ++m)
      limit = std::min(limit, max_output_length(models.model(m).config(), opts, b.src_lengths[i] - 1));
    capacity = std::max(capacity, limit + 1);
    SentenceTrace* t = trace != nullptr ? &trace->sentences[index[size_t(i)]] : nullptr;
    beams.emplace_back(opts, limit, cfg.decoder_layers, cfg.n_heads, t, t ? trace->top : 0,
                       Index(b.src_lengths[i]));
  }
  // Every model encodes the batch and keeps its own key/value cache.
  std::vector<ForwardCache> caches(models.size());
  std::vector<DecoderState> states;
  states.reserve(models.size());
  for (size_t m = 0; m < models.size(); ++m) {
    caches[m].inference = true;
    models.model(m).encode(b.src, b.src_rows, DropoutContext{}, caches[m]);
    states.push_back(models.model(m).begin_decoding(caches[m].memory, b.src_rows, capacity, opts.beam_size));
  }
  search(models, states, beams, opts, capacity, trace != nullptr ? trace->top : 0);

  for (int i = 0; i < N; ++i) {
    const int S = b.src_lengths[i];
    if (trace != nullptr) trace->sentences[index[size_t(i)]].n_best = beams[i].n_best_ids();
    std::vector<Hypothesis> n_best = beams[i].n_best(S);
    if (opts.return_attention)
      for (Hypothesis& h : n_best) h.attention.encoder_self = encoder_attention(caches[0], i, cfg.n_heads, b.src_len, S);
    out[index[i]] = std::move(n_best);
  }
  return out;
}

std::vector<Hypothesis> greedy_decode(const Ensemble& models,
                                      const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opts) {
  DecodeOptions o = opts;
  o.beam_size = 1;
  o.n_best = 1;
  std::vector<Hypothesis> out;
  for (auto& n_best : beam_search(models, sources, o)) out.push_back(std::move(n_best.front()));
  return out;
}

std::vector<std::vector<double>> forced_scores(const Ensemble& models,
                                               const std::vector<Example>& pairs) {
  std::vector<std::vector<double>> out(pairs.size());
  if (pairs.empty()) return out;
  std::vector<const Example*> ptrs;
  for (const Example& e : pairs) ptrs.push_back(&e);
  const Batch b = make_batch(ptrs);
  for (size_t m = 0; m < models.size(); ++m) {
    ForwardCache cache;
    Mat logits;
    models.model(m).forward(b, DropoutContext{}, cache, logits);
    const Mat logp = log_softmax_rows(logits);
    const double w = models.weight(m);  // the first model's terms are written, the others added
    for (int i = 0; i < b.batch_size; ++i)
      for (int t = 0; t < b.tgt_lengths[i]; ++t) {
        const Index r = Index(b.tgt_rows.offsets[i]) + t;
        const double lp = w * static_cast<double>(logp(r, b.tgt_out[r]));
        if (m == 0)
          out[i].push_back(lp);
        else
          out[i][size_t(t)] += lp;
      }
  }
  return out;
}

}  // namespace anuvad
