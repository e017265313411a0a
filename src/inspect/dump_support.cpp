// Helpers shared by the attention dump and the beam trace (dump_support.h).
#include "dump_support.h"

#include <utf8.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "anuvad/core/error.h"

namespace anuvad::inspect_detail {

/// x rounded to `digits` significant digits, as the double nearest to that short decimal (so
/// nlohmann's shortest round-trip output prints at most `digits` digits). Non-finite → null.
nlohmann::json round_sig(double x, int digits) {
  if (!std::isfinite(x)) return nullptr;
  if (x == 0) return 0.0;
  static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const int e = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  const int k = digits - 1 - e;  // decimal places to keep
  // n and 10^|k| are exact doubles, so one division or multiplication rounds correctly.
  if (k >= 0 && k <= 22) return std::round(x * kPow10[k]) / kPow10[k];
  if (k < 0 && -k <= 22) return std::round(x / kPow10[-k]) * kPow10[-k];
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return std::strtod(buf, nullptr);
}

/// `s` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(const std::string& s) {
  if (utf8::is_valid(s.begin(), s.end())) return s;
  std::string out;
  utf8::replace_invalid(s.begin(), s.end(), std::back_inserter(out));
  return out;
}

nlohmann::json decoding_json(const DecodeOptions& opts) {
  return {{"beam_size", opts.beam_size},
          {"n_best", opts.n_best},
          {"normalize", opts.normalize},
          {"word_penalty", opts.word_penalty},
          {"max_length_factor", opts.max_length_factor},
          {"max_length", opts.max_length},
          {"allow_unk", opts.allow_unk}};
}

}  // namespace anuvad::inspect_detail
