// Autoregressive translation with the key/value-cached decoder, and forced-decoding scores.
#pragma once

#include <string>
#include <vector>

#include "anuvad/decode/ensemble.h"
#include "anuvad/nn/transformer.h"

namespace anuvad {

/// Options of autoregressive decoding.
struct DecodeOptions {
  int beam_size = 1;          ///< 1 = greedy search
  int n_best = 1;             ///< hypotheses returned per sentence (≤ beam_size)
  /// Length normalisation α: rank by score / (target tokens incl. EOS)^α (Wu et al. 2016 §7
  /// use a smoothed variant; fairseq's default is α = 1). 1 by default: at beam 4 it raised
  /// chrF2 over α = 0 on all six models tried, by 0.8–1.3 on data/dev.tsv (3 tiny-preset models)
  /// and 0.4–1.3 on a Tatoeba tuning split (3 small-preset models); docs/quality.md. Greedy
  /// search (one hypothesis) does not depend on it.
  double normalize = 1.0;
  double word_penalty = 0.0;  ///< added to the score once per target token (incl. EOS)
  bool return_attention = false;  ///< fill Hypothesis::attention
  /// Output limit relative to the source: at most max_length_factor · (source subwords + 1) + 10
  /// target subwords (EOS excluded), and never more than max_length or the model's
  /// max_positions − 1.
  double max_length_factor = 2.0;
  int max_length = 256;
  bool allow_unk = false;  ///< when false, UNK is never produced
};

/// Every attention matrix of one translated sentence, as used while decoding (cached path).
/// S = source tokens incl. EOS; T = decoder steps = output tokens incl. EOS (query t is the
/// decoder input at position t: BOS for t = 0, else output token t − 1). Rows are (h·T + t).
struct AttentionRecord {
  std::vector<Mat> encoder_self;  ///< [L_enc] each [H·S, S]
  std::vector<Mat> decoder_self;  ///< [L_dec] each [H·T, T], zero above the diagonal
  std::vector<Mat> cross;         ///< [L_dec] each [H·T, S]
};

/// One output sentence.
struct Hypothesis {
  std::vector<int32_t> tokens;       ///< target subword ids, without BOS and EOS
  std::vector<double> token_scores;  ///< log p of each emitted token, EOS included when reached (nats)
  double score = 0;                  ///< Σ token_scores
  bool finished = false;             ///< true when EOS was produced before the length limit
  double normalized_score = 0;       ///< the ranking score: (score + word_penalty·n) / n^α
  AttentionRecord attention;         ///< filled when DecodeOptions::return_attention
};

struct BeamTrace;

/// Translates a batch of sources (subword ids without EOS) with greedy (beam_size 1) or beam
/// search over the models' combined scores (decode/ensemble.h: a Transformer is an ensemble of
/// one, decoded exactly as before; with several, token_scores and scores are the weighted sums
/// Σ_i w_i·log p_i and attention is the first model's); returns opts.n_best hypotheses per
/// source, best first. Results do not depend on
/// which other sentences are in the batch, nor on `trace`: when given, trace->sentences gets
/// one SentenceTrace per source (include/anuvad/decode/beam_trace.h). Throws ConfigError for
/// a beam size < 1, an n-best size outside [1, beam size] or trace->top < 1.
std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& models,
                                                  const std::vector<std::vector<int32_t>>& sources,
                                                  const DecodeOptions& opts,
                                                  BeamTrace* trace = nullptr);

/// Maximum number of target tokens (EOS excluded) for a source of `src_tokens` subwords.
int max_output_length(const ModelConfig& cfg, const DecodeOptions& opts, int src_tokens);

/// Greedy decoding of a batch of sources (subword ids without EOS; EOS is appended here),
/// encoded together as one padded batch and decoded in lockstep with the key/value cache.
/// Each step picks argmax over the target vocabulary excluding PAD and BOS (and UNK unless
/// allow_unk). token_scores are log-softmax values over the full vocabulary, the quantity that
/// forced_scores() computes. An empty source gives an empty hypothesis without decoding.
/// Throws ShapeError when a source is longer than max_positions − 1 (of any model).
std::vector<Hypothesis> greedy_decode(const Ensemble& models,
                                      const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opts);

/// Forced decoding (teacher forcing, no dropout): log p of every target token and of EOS for
/// each (source, target) pair; the result has |target| + 1 entries per pair (nats). For an
/// ensemble, entry t is Σ_i w_i·log p_i(token t), the score beam_search gives that token.
std::vector<std::vector<double>> forced_scores(const Ensemble& models,
                                               const std::vector<Example>& pairs);

}  // namespace anuvad
