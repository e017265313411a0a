// Word alignment from cross-attention (include/anuvad/decode/alignment.h).
#include "anuvad/decode/alignment.h"

#include <cstdlib>
#include <sstream>

#include "anuvad/core/error.h"

namespace anuvad {

AlignmentSpec parse_alignment(const std::string& text) {
  AlignmentSpec spec;
  if (text == "hard") return spec;
  if (text == "soft") {
    spec.kind = AlignmentSpec::Kind::kSoft;
    return spec;
  }
  char* end = nullptr;
  const double th = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(th > 0 && th <= 1))
    throw ConfigError("--alignment must be hard, soft or a threshold in (0, 1], got \"" + text + "\"");
  spec.kind = AlignmentSpec::Kind::kThreshold;
  spec.threshold = th;
  return spec;
}

Mat head_average(const AttentionRecord& attention, int layer, int n_heads) {
  const Mat& c = attention.cross.at(static_cast<size_t>(layer));
  const Index T = c.rows() / n_heads;
  Mat avg = Mat::Zero(T, c.cols());
  for (int hd = 0; hd < n_heads; ++hd) avg += c.middleRows(Index(hd) * T, T);
  return avg / static_cast<Scalar>(n_heads);
}

std::vector<std::pair<Index, Index>> hard_alignment(const Mat& avg, Index n_tgt, Index n_src) {
  std::vector<std::pair<Index, Index>> out;
  for (Index t = 0; t < n_tgt && n_src > 0; ++t) {
    Index best = 0;
    for (Index s = 0; s < n_src; ++s)
      if (avg(t, s) > avg(t, best)) best = s;
    out.emplace_back(best, t);
  }
  return out;
}

std::vector<std::pair<Index, Index>> threshold_alignment(const Mat& avg, Index n_tgt, Index n_src,
                                                         double threshold) {
  std::vector<std::pair<Index, Index>> out;
  for (Index t = 0; t < n_tgt; ++t)
    for (Index s = 0; s < n_src; ++s)
      if (avg(t, s) >= threshold) out.emplace_back(s, t);
  return out;
}

Mat soft_alignment(const Mat& avg, Index n_tgt, Index n_src) {
  Mat out = avg.topLeftCorner(n_tgt, n_src);
  for (Index t = 0; t < n_tgt; ++t) {
    double sum = 0;
    for (Index s = 0; s < n_src; ++s) sum += out(t, s);
    if (sum > 0)
      for (Index s = 0; s < n_src; ++s) out(t, s) = static_cast<Scalar>(out(t, s) / sum);
  }
  return out;
}

std::string format_alignment(const Hypothesis& h, const AlignmentSpec& spec, int n_heads, int layer) {
  const Mat a = head_average(h.attention, layer, n_heads);
  const Index n_tgt = static_cast<Index>(h.tokens.size());
  const Index n_src = a.cols() - 1;  // without EOS
  std::ostringstream out;
  if (spec.kind == AlignmentSpec::Kind::kSoft) {
    out.setf(std::ios::fixed);
    out.precision(4);
    const Mat soft = soft_alignment(a, n_tgt, n_src);
    for (Index t = 0; t < n_tgt; ++t) {
      if (t) out << ' ';
      for (Index s = 0; s < n_src; ++s) out << (s ? "," : "") << soft(t, s);
    }
    return out.str();
  }
  const auto pairs = spec.kind == AlignmentSpec::Kind::kHard
                         ? hard_alignment(a, n_tgt, n_src)
                         : threshold_alignment(a, n_tgt, n_src, spec.threshold);
  for (size_t i = 0; i < pairs.size(); ++i) out << (i ? " " : "") << pairs[i].first << '-' << pairs[i].second;
  return out.str();
}

}  // namespace anuvad
