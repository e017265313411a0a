// Corpus-level translation metrics, computed as sacreBLEU 2.x computes them (Post 2018,
// "A Call for Clarity in Reporting BLEU Scores"): BLEU (Papineni et al. 2002), chrF and chrF++
// (Popović 2015, 2017), plus the exact-match rate. Every score is on a 0–100 scale.
//
// Text is handled as Unicode code points (UTF-8 in, invalid bytes read as U+FFFD); "whitespace"
// means what Python's str.split() splits on (ASCII \t\n\v\f\r and space, U+001C–U+001F, U+0085,
// U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), as in sacreBLEU.
//
// BLEU (defaults = sacreBLEU's): mteval-v13a tokenization, clipped n-gram matches for n = 1..4,
// corpus sums, closest reference length (the shorter one on ties), brevity penalty
// exp(1 − r/c) when c < r, "exp" smoothing (the k-th order with no match counts as
// 1 / (2^k · total)), and 0 when nothing at all matches.
//   ONE DEVIATION from sacreBLEU, on by default (tokenize = "13a+danda"): the Devanagari danda
//   "।" (U+0964) and double danda "॥" (U+0965) are added to 13a's punctuation rule, so they are
//   split off as tokens of their own ("घर गया।" → "घर गया ।"). Plain 13a leaves "गया।" as one
//   token, which makes every sentence-final Hindi word a miss unless the danda matches too.
//   tokenize = "13a" gives sacreBLEU's exact numbers; the signature says which one was used.
//
// chrF (no deviation): character n-grams n = 1..6 of the segment with all whitespace removed;
// chrF++ adds word n-grams n = 1..2 of the whitespace tokens with one trailing (else leading)
// ASCII punctuation mark split off (sacreBLEU's _remove_punctuation: the danda is NOT split
// there, exactly as in sacreBLEU). Per segment and order: [hypothesis n-grams (0 when the
// reference has none of that order), reference n-grams, clipped matches], summed over the
// corpus; precision and recall are averaged over the orders where both counts are > 0
// (sacreBLEU's "effective order"), then F_β = (1 + β²)·P·R / (β²·P + R), β = 2.
//
// Degenerate input never divides by zero: an empty corpus, empty hypotheses or segments
// shorter than the n-gram order give 0 (or the score of the orders that exist, for chrF).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace anuvad {

/// The "version:" field of every signature.
inline constexpr const char* kMetricsVersion = "anuvad-1";

/// BLEU settings (sacreBLEU's names and defaults, except the tokenizer: see above).
struct BleuOptions {
  int max_order = 4;
  std::string tokenize = "13a+danda";  ///< "13a+danda", "13a" (sacreBLEU) or "none" (split only)
  std::string smooth = "exp";          ///< "exp", "none", "floor" or "add-k"
  double smooth_value = -1;            ///< < 0: the method's default (floor 0.1, add-k 1)
  bool effective_order = false;        ///< average only over the orders the hypotheses have
};

/// A corpus BLEU score with the statistics it came from.
struct BleuScore {
  double score = 0;                  ///< 0..100
  std::vector<int64_t> counts;       ///< clipped matches per order (before add-k)
  std::vector<int64_t> totals;       ///< hypothesis n-grams per order
  std::vector<double> precisions;    ///< per order, 0..100 (after smoothing)
  double brevity_penalty = 0;
  int64_t sys_len = 0;               ///< hypothesis tokens
  int64_t ref_len = 0;               ///< closest-reference tokens
};

/// chrF settings (sacreBLEU's names and defaults; word_order 2 = chrF++).
struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;
  double beta = 2;
  bool whitespace = false;     ///< keep whitespace inside character n-grams
  bool eps_smoothing = false;  ///< chrF++.py/NLTK variant: mean of per-order F, 1e-16 for empty orders
};

/// A corpus chrF score with its summed statistics: [hyp, ref, match] per order, character
/// orders first, then word orders.
struct ChrfScore {
  double score = 0;  ///< 0..100
  std::vector<int64_t> stats;
};

/// Everything `anuvad evaluate` reports for one corpus (one reference per segment).
struct EvaluationScores {
  BleuScore bleu;
  ChrfScore chrf;     ///< chrF2
  ChrfScore chrf_pp;  ///< chrF2++
  double exact_match = 0;  ///< % of segments equal to their reference (outer whitespace ignored)
  int64_t exact_count = 0;
  int64_t sentences = 0;
  std::string bleu_signature, chrf_signature, chrf_pp_signature;
};

/// mteval-v13a tokenization as sacreBLEU's "13a" tokenizer does it (tokens joined by one space);
/// with split_danda, "।" and "॥" are also split off (our "13a+danda").
std::string tokenize_13a(const std::string& line, bool split_danda = false);

/// Corpus BLEU with one reference per hypothesis. Throws DataError when the sizes differ or an
/// option is unknown (ConfigError).
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& opts = {});
/// Corpus BLEU with several references: ref_streams[k][i] is the k-th reference of segment i
/// (sacreBLEU's layout).
BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& opts = {});
/// BLEU (0..100) from corpus statistics, sacreBLEU's compute_bleu.
BleuScore bleu_from_stats(const std::vector<int64_t>& correct, const std::vector<int64_t>& total,
                          int64_t sys_len, int64_t ref_len, const BleuOptions& opts = {});

/// Corpus chrF (chrF++ with opts.word_order = 2), one reference per hypothesis.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const ChrfOptions& opts = {});
/// Corpus chrF with several references (the best reference by segment F is used per segment).
ChrfScore corpus_chrf_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const ChrfOptions& opts = {});
/// chrF (0..100) of summed statistics.
double chrf_from_stats(const std::vector<int64_t>& stats, const ChrfOptions& opts = {});

/// % of hypotheses equal to their reference after removing leading and trailing whitespace
/// (0 for an empty corpus).
double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

/// sacreBLEU-style signatures, e.g.
///   "nrefs:1|case:mixed|eff:no|tok:13a+danda|smooth:exp|version:anuvad-1"
///   "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:anuvad-1"
std::string bleu_signature(const BleuOptions& opts = {}, int nrefs = 1);
std::string chrf_signature(const ChrfOptions& opts = {}, int nrefs = 1);

/// BLEU (opts), chrF2, chrF2++ and exact match of a corpus with one reference per segment.
EvaluationScores evaluate_translations(const std::vector<std::string>& hyps,
                                       const std::vector<std::string>& refs,
                                       const BleuOptions& bleu_opts = {});

}  // namespace anuvad
