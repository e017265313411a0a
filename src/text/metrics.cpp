// Corpus BLEU, chrF, chrF++ and exact match, following sacreBLEU 2.x step by step (see
// metrics.h for the definitions and our one deviation, the danda rule of "13a+danda").
#include "anuvad/text/metrics.h"

#include <utf8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "anuvad/core/error.h"

namespace anuvad {

namespace {

using U32 = std::u32string;

/// UTF-8 → code points; invalid bytes become U+FFFD instead of an exception.
U32 to_u32(const std::string& s) {
  if (utf8::find_invalid(s.begin(), s.end()) == s.end()) return utf8::utf8to32(s);
  return utf8::utf8to32(utf8::replace_invalid(s));
}

std::string to_utf8(const U32& s) { return utf8::utf32to8(s); }

/// Python's str.isspace(): what str.split() without arguments splits on.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Python's str.split(): maximal runs of non-whitespace.
std::vector<U32> py_split(const U32& s) {
  std::vector<U32> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_py_space(s[i])) ++i;
    if (i > start) out.emplace_back(s, start, i - start);
  }
  return out;
}

/// Python's str.strip() (and rstrip()).
U32 py_strip(const U32& s, bool left = true) {
  size_t b = 0, e = s.size();
  while (e > b && is_py_space(s[e - 1])) --e;
  if (left)
    while (b < e && is_py_space(s[b])) ++b;
  return s.substr(b, e - b);
}

/// Python's str.replace(old, new): every non-overlapping occurrence, left to right.
U32 replace_all(const U32& s, const U32& from, const U32& to) {
  U32 out;
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(from, pos);
    if (hit == U32::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(s, pos, U32::npos);
  return out;
}

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

/// 13a's first rule: [\{-\~\[-\` -\&\(-\+\:-\@\/] (ASCII symbols except ' - . , and digits),
/// plus "।" and "॥" with split_danda.
bool is_13a_symbol(char32_t c, bool split_danda) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == U'/' ||
         (split_danda && (c == 0x0964 || c == 0x0965));
}

/// re.sub of a two-character pattern ([A][B]) over `s`: non-overlapping matches, left to right;
/// `emit` writes the replacement of a match.
template <class A, class B, class Emit>
U32 sub_pair(const U32& s, A first, B second, Emit emit) {
  U32 out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

/// sacreBLEU's Tokenizer13a (language-independent part + TokenizerRegexp), code point exact.
std::vector<U32> tokens_13a(const U32& input, bool split_danda) {
  U32 line = replace_all(input, U"<skipped>", U"");
  line = replace_all(line, U"-\n", U"");
  line = replace_all(line, U"\n", U" ");
  if (line.find(U'&') != U32::npos) {
    line = replace_all(line, U"&quot;", U"\"");
    line = replace_all(line, U"&amp;", U"&");
    line = replace_all(line, U"&lt;", U"<");
    line = replace_all(line, U"&gt;", U">");
  }
  line = U" " + line + U" ";
  // Rule 1: " \1 " around every symbol.
  U32 r1;
  r1.reserve(line.size() * 2);
  for (char32_t c : line) {
    if (is_13a_symbol(c, split_danda)) {
      r1 += U' ';
      r1 += c;
      r1 += U' ';
    } else {
      r1 += c;
    }
  }
  auto not_digit = [](char32_t c) { return !is_ascii_digit(c); };
  auto dot_comma = [](char32_t c) { return c == U'.' || c == U','; };
  // Rule 2: ([^0-9])([\.,]) → "\1 \2 ".
  U32 r2 = sub_pair(r1, not_digit, dot_comma, [](U32& o, char32_t a, char32_t b) {
    o += a;
    o += U' ';
    o += b;
    o += U' ';
  });
  // Rule 3: ([\.,])([^0-9]) → " \1 \2".
  U32 r3 = sub_pair(r2, dot_comma, not_digit, [](U32& o, char32_t a, char32_t b) {
    o += U' ';
    o += a;
    o += U' ';
    o += b;
  });
  // Rule 4: ([0-9])(-) → "\1 \2 ".
  U32 r4 = sub_pair(r3, is_ascii_digit, [](char32_t c) { return c == U'-'; },
                    [](U32& o, char32_t a, char32_t b) {
                      o += a;
                      o += U' ';
                      o += b;
                      o += U' ';
                    });
  return py_split(r4);
}

std::vector<U32> bleu_tokens(const std::string& text, const BleuOptions& opts) {
  const U32 s = py_strip(to_u32(text), /*left=*/false);  // sacreBLEU tokenizes sent.rstrip()
  if (opts.tokenize == "13a") return tokens_13a(s, false);
  if (opts.tokenize == "13a+danda") return tokens_13a(s, true);
  return py_split(s);  // "none"
}

/// Tokens joined by a space: a unique key, since tokens never hold whitespace.
U32 join(const std::vector<U32>& toks, size_t begin, size_t n) {
  U32 key;
  for (size_t k = 0; k < n; ++k) {
    if (k) key += U' ';
    key += toks[begin + k];
  }
  return key;
}

using Counts = std::unordered_map<U32, int64_t>;

/// Word n-gram counts of each order 1..max_n.
std::vector<Counts> word_ngrams(const std::vector<U32>& toks, int max_n) {
  std::vector<Counts> out(static_cast<size_t>(std::max(max_n, 0)));
  for (int n = 1; n <= max_n; ++n)
    for (size_t i = 0; i + static_cast<size_t>(n) <= toks.size(); ++i)
      ++out[n - 1][join(toks, i, static_cast<size_t>(n))];
  return out;
}

void check_bleu_options(const BleuOptions& o) {
  if (o.max_order < 1) throw ConfigError("BLEU max_order must be ≥ 1");
  if (o.tokenize != "13a+danda" && o.tokenize != "13a" && o.tokenize != "none")
    throw ConfigError("unknown BLEU tokenizer '" + o.tokenize + "' (13a+danda, 13a or none)");
  if (o.smooth != "exp" && o.smooth != "none" && o.smooth != "floor" && o.smooth != "add-k")
    throw ConfigError("unknown BLEU smoothing '" + o.smooth + "' (exp, none, floor or add-k)");
}

void check_chrf_options(const ChrfOptions& o) {
  if (o.char_order < 0 || o.word_order < 0 || o.char_order + o.word_order == 0)
    throw ConfigError("chrF needs char_order + word_order ≥ 1");
  if (!(o.beta > 0)) throw ConfigError("chrF beta must be > 0");
}

void check_streams(size_t n_hyps, const std::vector<std::vector<std::string>>& ref_streams) {
  if (ref_streams.empty() && n_hyps > 0) throw DataError("no reference stream given");
  for (const auto& r : ref_streams)
    if (r.size() != n_hyps)
      throw DataError(std::to_string(n_hyps) + " hypotheses but a reference stream has " +
                      std::to_string(r.size()) + " lines");
}

// ---- chrF ----------------------------------------------------------------------------------

bool is_ascii_punct(char32_t c) {  // Python's string.punctuation
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

/// sacreBLEU CHRF._remove_punctuation: one trailing (else leading) punctuation mark split off.
std::vector<U32> chrf_words(const U32& s) {
  std::vector<U32> out;
  for (U32& w : py_split(s)) {
    if (w.size() > 1 && is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (w.size() > 1 && is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(std::move(w));
    }
  }
  return out;
}

/// Character n-grams 1..char_order, then word n-grams 1..word_order.
std::vector<Counts> chrf_ngrams(const std::string& text, const ChrfOptions& o) {
  const U32 s = to_u32(text);
  U32 chars;
  if (o.whitespace) {
    chars = s;
  } else {
    chars.reserve(s.size());
    for (char32_t c : s)
      if (!is_py_space(c)) chars += c;
  }
  std::vector<Counts> out(static_cast<size_t>(o.char_order + o.word_order));
  for (int n = 1; n <= o.char_order; ++n)
    for (size_t i = 0; i + static_cast<size_t>(n) <= chars.size(); ++i)
      ++out[n - 1][chars.substr(i, static_cast<size_t>(n))];
  if (o.word_order > 0) {
    auto words = word_ngrams(chrf_words(s), o.word_order);
    for (int n = 0; n < o.word_order; ++n) out[o.char_order + n] = std::move(words[n]);
  }
  return out;
}

/// [hyp, ref, match] of one order (sacreBLEU CHRF._get_match_statistics).
void chrf_match(const Counts& hyp, const Counts& ref, std::vector<int64_t>& st) {
  int64_t n_hyp = 0, n_ref = 0, n_match = 0;
  for (const auto& [g, c] : hyp) {
    n_hyp += c;
    const auto it = ref.find(g);
    if (it != ref.end()) n_match += std::min(c, it->second);
  }
  for (const auto& kv : ref) n_ref += kv.second;
  st.push_back(ref.empty() ? 0 : n_hyp);
  st.push_back(n_ref);
  st.push_back(n_match);
}

}  // namespace

std::string tokenize_13a(const std::string& line, bool split_danda) {
  const auto toks = tokens_13a(to_u32(line), split_danda);
  return to_utf8(join(toks, 0, toks.size()));
}

BleuScore bleu_from_stats(const std::vector<int64_t>& correct_in, const std::vector<int64_t>& total_in,
                          int64_t sys_len, int64_t ref_len, const BleuOptions& opts) {
  check_bleu_options(opts);
  const size_t max_order = static_cast<size_t>(opts.max_order);
  if (correct_in.size() != max_order || total_in.size() != max_order)
    throw DataError("BLEU statistics need max_order = " + std::to_string(max_order) + " entries");
  BleuScore r;
  r.counts = correct_in;
  r.totals = total_in;
  r.sys_len = sys_len;
  r.ref_len = ref_len;
  r.precisions.assign(max_order, 0.0);
  double smooth_value = opts.smooth_value;
  if (smooth_value < 0) smooth_value = opts.smooth == "floor" ? 0.1 : 1.0;
  if (sys_len < ref_len)
    r.brevity_penalty = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / sys_len) : 0.0;
  else
    r.brevity_penalty = 1.0;
  if (std::all_of(correct_in.begin(), correct_in.end(), [](int64_t c) { return c == 0; })) {
    r.score = 0.0;  // sacreBLEU #141: no match at all
    return r;
  }
  std::vector<double> correct(correct_in.begin(), correct_in.end());
  std::vector<double> total(total_in.begin(), total_in.end());
  double smooth_mteval = 1.0;
  size_t eff_order = max_order;
  for (size_t n = 1; n <= max_order; ++n) {
    if (opts.smooth == "add-k" && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (opts.effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (opts.smooth == "exp") {
        smooth_mteval *= 2;
        r.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (opts.smooth == "floor") {
        r.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      r.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  // sacreBLEU's my_log: log(0) is taken as -9999999999, which makes the score 0.
  double sum_log = 0;
  for (size_t n = 0; n < eff_order; ++n)
    sum_log += r.precisions[n] == 0.0 ? -9999999999.0 : std::log(r.precisions[n]);
  r.score = r.brevity_penalty * std::exp(sum_log / static_cast<double>(eff_order));
  return r;
}

BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& opts) {
  check_bleu_options(opts);
  check_streams(hyps.size(), ref_streams);
  const int max_order = opts.max_order;
  std::vector<int64_t> correct(max_order, 0), total(max_order, 0);
  int64_t sys_len = 0, ref_len = 0;
  for (size_t i = 0; i < hyps.size(); ++i) {
    // Reference n-grams: the maximum count of each n-gram over the references.
    std::vector<Counts> ref_max(max_order);
    int64_t closest = -1, closest_diff = -1;
    const auto h = bleu_tokens(hyps[i], opts);
    const int64_t h_len = static_cast<int64_t>(h.size());
    for (const auto& stream : ref_streams) {
      const auto rt = bleu_tokens(stream[i], opts);
      const int64_t r_len = static_cast<int64_t>(rt.size());
      const int64_t diff = std::llabs(h_len - r_len);
      if (closest_diff < 0 || diff < closest_diff) {
        closest_diff = diff;
        closest = r_len;
      } else if (diff == closest_diff && r_len < closest) {
        closest = r_len;
      }
      const auto grams = word_ngrams(rt, max_order);
      for (int n = 0; n < max_order; ++n)
        for (const auto& [g, c] : grams[n]) {
          int64_t& m = ref_max[n][g];
          m = std::max(m, c);
        }
    }
    const auto hg = word_ngrams(h, max_order);
    for (int n = 0; n < max_order; ++n)
      for (const auto& [g, c] : hg[n]) {
        total[n] += c;
        const auto it = ref_max[n].find(g);
        if (it != ref_max[n].end()) correct[n] += std::min(c, it->second);
      }
    sys_len += h_len;
    ref_len += std::max<int64_t>(closest, 0);
  }
  return bleu_from_stats(correct, total, sys_len, ref_len, opts);
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& opts) {
  return corpus_bleu_multi(hyps, std::vector<std::vector<std::string>>{refs}, opts);
}

double chrf_from_stats(const std::vector<int64_t>& stats, const ChrfOptions& opts) {
  check_chrf_options(opts);
  const int order = opts.char_order + opts.word_order;
  if (stats.size() != static_cast<size_t>(3 * order))
    throw DataError("chrF statistics need 3 entries per order");
  constexpr double eps = 1e-16;
  const double factor = opts.beta * opts.beta;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const double n_hyp = static_cast<double>(stats[3 * i]);
    const double n_ref = static_cast<double>(stats[3 * i + 1]);
    const double n_match = static_cast<double>(stats[3 * i + 2]);
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opts.eps_smoothing) return 100.0 * score / order;
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100.0 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

ChrfScore corpus_chrf_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const ChrfOptions& opts) {
  check_chrf_options(opts);
  check_streams(hyps.size(), ref_streams);
  const size_t order = static_cast<size_t>(opts.char_order + opts.word_order);
  ChrfScore r;
  r.stats.assign(3 * order, 0);
  std::vector<int64_t> st;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto hg = chrf_ngrams(hyps[i], opts);
    std::vector<int64_t> best;
    double best_f = -1.0;
    for (const auto& stream : ref_streams) {
      const auto rg = chrf_ngrams(stream[i], opts);
      st.clear();
      for (size_t n = 0; n < order; ++n) chrf_match(hg[n], rg[n], st);
      const double f = chrf_from_stats(st, opts);
      if (f > best_f) {
        best_f = f;
        best = st;
      }
    }
    for (size_t k = 0; k < best.size(); ++k) r.stats[k] += best[k];
  }
  r.score = chrf_from_stats(r.stats, opts);
  return r;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const ChrfOptions& opts) {
  return corpus_chrf_multi(hyps, std::vector<std::vector<std::string>>{refs}, opts);
}

namespace {

int64_t count_exact(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  check_streams(hyps.size(), {refs});
  int64_t hit = 0;
  for (size_t i = 0; i < hyps.size(); ++i) hit += py_strip(to_u32(hyps[i])) == py_strip(to_u32(refs[i]));
  return hit;
}

}  // namespace

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  const int64_t hit = count_exact(hyps, refs);
  return hyps.empty() ? 0.0 : 100.0 * static_cast<double>(hit) / static_cast<double>(hyps.size());
}

std::string bleu_signature(const BleuOptions& opts, int nrefs) {
  std::string s = "nrefs:" + std::to_string(nrefs) + "|case:mixed|eff:" +
                  (opts.effective_order ? "yes" : "no") + "|tok:" + opts.tokenize +
                  "|smooth:" + opts.smooth;
  if ((opts.smooth == "floor" || opts.smooth == "add-k") && opts.smooth_value >= 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%.2f]", opts.smooth_value);
    s += buf;
  }
  if (opts.max_order != 4) s += "|ngram:" + std::to_string(opts.max_order);
  return s + "|version:" + kMetricsVersion;
}

std::string chrf_signature(const ChrfOptions& opts, int nrefs) {
  return "nrefs:" + std::to_string(nrefs) + "|case:mixed|eff:" +
         (opts.eps_smoothing ? "no" : "yes") + "|nc:" + std::to_string(opts.char_order) +
         "|nw:" + std::to_string(opts.word_order) + "|space:" + (opts.whitespace ? "yes" : "no") +
         "|version:" + kMetricsVersion;
}

EvaluationScores evaluate_translations(const std::vector<std::string>& hyps,
                                       const std::vector<std::string>& refs,
                                       const BleuOptions& bleu_opts) {
  EvaluationScores e;
  ChrfOptions chrf2, chrf2pp;
  chrf2pp.word_order = 2;
  e.bleu = corpus_bleu(hyps, refs, bleu_opts);
  e.chrf = corpus_chrf(hyps, refs, chrf2);
  e.chrf_pp = corpus_chrf(hyps, refs, chrf2pp);
  e.exact_count = count_exact(hyps, refs);
  e.sentences = static_cast<int64_t>(hyps.size());
  e.exact_match = hyps.empty() ? 0.0 : 100.0 * static_cast<double>(e.exact_count) / static_cast<double>(e.sentences);
  e.bleu_signature = bleu_signature(bleu_opts);
  e.chrf_signature = chrf_signature(chrf2);
  e.chrf_pp_signature = chrf_signature(chrf2pp);
  return e;
}

}  // namespace anuvad
