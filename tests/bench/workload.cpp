// The benchmark's workloads: data, FLOPs and matrix products (see workload.h).
#include "workload.h"

#include <algorithm>
#include <cmath>

namespace bench {

const std::map<std::string, BenchConfig> kConfigs = {
    {"tiny", {64, 4, 256, 2, 2, 1000, 1000, 5, 40, 64}},
    {"small", {256, 4, 1024, 3, 3, 4000, 4000, 3, 12, 64}},
    {"base", {512, 8, 2048, 6, 6, 8000, 8000, 2, 4, 16}},
};

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

nlohmann::json summarize(std::vector<double> xs) {
  auto r = [](double x) { return std::round(x * 1000) / 1000; };
  const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  return {{"median", r(median(xs))}, {"min", r(*lo)}, {"max", r(*hi)}};
}

std::vector<int32_t> random_sentence(int len, int vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> tok(kFirstRealToken, vocab - 1);
  std::vector<int32_t> s(static_cast<size_t>(len - 1));
  for (auto& t : s) t = tok(rng);
  return s;
}

int uniform_len(int lo, int hi, std::mt19937_64& rng) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

TrainBatch make_train_batch(const BenchConfig& c, std::mt19937_64& rng, int n, int lo, int hi) {
  std::vector<anuvad::Example> ex(static_cast<size_t>(n));
  // torch_ref draws all sources, then all targets
  for (auto& e : ex) e.src = random_sentence(uniform_len(lo, hi, rng), c.src_vocab, rng);
  for (auto& e : ex) e.tgt = random_sentence(uniform_len(lo, hi, rng), c.tgt_vocab, rng);
  std::vector<const anuvad::Example*> ptrs;
  for (const auto& e : ex) ptrs.push_back(&e);
  TrainBatch tb{anuvad::make_batch(ptrs), {}, {}};
  tb.src_lens = tb.batch.src_lengths;
  tb.tgt_lens = tb.batch.tgt_lengths;
  return tb;
}

TrainData train_data(const BenchConfig& c, uint64_t seed, int n_warm, int steps) {
  std::mt19937_64 rng(seed);
  TrainData d;
  for (int i = 0; i < n_warm; ++i)
    d.warm.push_back(make_train_batch(c, rng, kTrainBatch, kTrainLenLo, kTrainLenHi));
  for (int i = 0; i < steps; ++i)
    d.timed.push_back(make_train_batch(c, rng, kTrainBatch, kTrainLenLo, kTrainLenHi));
  return d;
}

Sources decode_sources(const BenchConfig& c, std::mt19937_64& rng) {
  Sources s;
  for (int i = 0; i < kDecodeSentences; ++i)
    s.push_back(random_sentence(uniform_len(kDecodeSrcLo, kDecodeSrcHi, rng), c.src_vocab, rng));
  return s;
}

double forward_flops(const BenchConfig& c, const std::vector<int>& src_lens,
                     const std::vector<int>& tgt_lens, int pad_s, int pad_t) {
  const double d = c.d_model, ff = c.d_ff, V = c.tgt_vocab;
  double total = 0;
  for (size_t i = 0; i < src_lens.size(); ++i) {
    const double s = pad_s ? pad_s : src_lens[i], t = pad_t ? pad_t : tgt_lens[i];
    const double enc = s * (8 * d * d + 4 * d * ff) + 4 * s * s * d;
    const double dec = t * (8 * d * d + 4 * d * d + 4 * d * ff) + 4 * s * d * d + 4 * t * t * d +
                       4 * t * s * d;
    total += c.enc_layers * enc + c.dec_layers * dec + 2 * t * d * V;
  }
  return total;
}

double decode_flops(const BenchConfig& c, int src_len, int n_tokens) {
  const double d = c.d_model, ff = c.d_ff, V = c.tgt_vocab, s = src_len;
  double total = c.enc_layers * (s * (8 * d * d + 4 * d * ff) + 4 * s * s * d) +
                 c.dec_layers * 4 * s * d * d;  // encoder, cross-attention K/V
  for (int t = 0; t < n_tokens; ++t)
    total += c.dec_layers * (12 * d * d + 4 * d * ff + 4 * (t + 1) * d + 4 * s * d) + 2 * d * V;
  return total;
}

namespace {

/// A Linear [out, in] applied to `rows` tokens, `count` times: its forward product, and with
/// `backward` the weight gradient (TN) and input gradient (NN).
void add_linear(std::vector<Product>& p, const std::string& name, int rows, int in, int out,
                double count, bool backward) {
  p.push_back({name + " fwd x·Wᵀ", "NT", rows, in, out, count});
  if (!backward) return;
  p.push_back({name + " dW = dYᵀ·X", "TN", out, rows, in, count});
  p.push_back({name + " dX = dY·W", "NN", rows, out, in, count});
}

/// Encoder layers on `src` rows, decoder layers on `tgt` rows (cross K/V on `src`), generator.
std::vector<Product> model_products(const BenchConfig& c, int src, int tgt, double enc_count,
                                    double dec_count, bool backward) {
  const int d = c.d_model, ff = c.d_ff;
  const double le = c.enc_layers * enc_count, ld = c.dec_layers * dec_count;
  std::vector<Product> p;
  add_linear(p, "enc self q,k,v", src, d, 3 * d, le, backward);
  add_linear(p, "enc self out", src, d, d, le, backward);
  add_linear(p, "enc ff1", src, d, ff, le, backward);
  add_linear(p, "enc ff2", src, ff, d, le, backward);
  add_linear(p, "dec cross k,v", src, d, 2 * d, c.dec_layers * enc_count, backward);
  add_linear(p, "dec self q,k,v", tgt, d, 3 * d, ld, backward);
  add_linear(p, "dec self out", tgt, d, d, ld, backward);
  add_linear(p, "dec cross q", tgt, d, d, ld, backward);
  add_linear(p, "dec cross out", tgt, d, d, ld, backward);
  add_linear(p, "dec ff1", tgt, d, ff, ld, backward);
  add_linear(p, "dec ff2", tgt, ff, d, ld, backward);
  add_linear(p, "generator", tgt, d, c.tgt_vocab, dec_count, backward);
  return p;
}

}  // namespace

std::vector<Product> train_products(const BenchConfig& c, int src_rows, int tgt_rows) {
  return model_products(c, src_rows, tgt_rows, 1, 1, true);
}

std::vector<Product> decode_products(const BenchConfig& c, int src_rows, int batch, int steps) {
  return model_products(c, src_rows, batch, 1, steps, false);
}

}  // namespace bench
