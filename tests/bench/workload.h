// The workloads of anuvad_bench (those of ../shared/bench/torch_ref.py): model sizes, the random
// data of every mode, and the FLOPs and matrix products that data takes. Shared by bench.cpp
// (the timed modes) and ceiling.cpp (the FMA peak and the best GEMM rate on the same products).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "anuvad/nn/batch.h"

namespace bench {

/// Model sizes and per-config step counts, as torch_ref.CONFIGS.
struct BenchConfig {
  int d_model, n_heads, d_ff, enc_layers, dec_layers, src_vocab, tgt_vocab;
  int train_warmup, train_steps, bs1_sentences;
};

/// tiny, small, base.
extern const std::map<std::string, BenchConfig> kConfigs;

inline constexpr int kTrainBatch = 32;
inline constexpr int kTrainLenLo = 5, kTrainLenHi = 20;  // tokens incl. EOS
inline constexpr int kDecodeSentences = 64;
inline constexpr int kDecodeSrcLo = 10, kDecodeSrcHi = 14;  // tokens incl. EOS
inline constexpr int kDecodeLen = 20;
inline constexpr int kFirstRealToken = 4;  // PAD 0, UNK 1, BOS 2, EOS 3

using Clock = std::chrono::steady_clock;

/// Seconds from a to b.
double seconds(Clock::time_point a, Clock::time_point b);

/// {"median", "min", "max"} of xs (rounded to 3 decimals). xs must not be empty.
nlohmann::json summarize(std::vector<double> xs);

/// Median of xs (not empty).
double median(std::vector<double> xs);

/// A sentence of `len` tokens including the EOS that make_batch appends: len − 1 random ids.
std::vector<int32_t> random_sentence(int len, int vocab, std::mt19937_64& rng);

/// Uniform integer in [lo, hi].
int uniform_len(int lo, int hi, std::mt19937_64& rng);

/// One training batch and its real (unpadded, EOS included) lengths.
struct TrainBatch {
  anuvad::Batch batch;
  std::vector<int> src_lens, tgt_lens;
};

/// n random pairs with lengths uniform in [lo, hi] (EOS included), padded to the longest.
TrainBatch make_train_batch(const BenchConfig& c, std::mt19937_64& rng, int n, int lo, int hi);

/// The batches of `train` mode: n_warm warm-up batches, then `steps` timed ones, drawn in that
/// order from one stream seeded `seed` (so the ceiling run sees the timed batches' lengths).
struct TrainData {
  std::vector<TrainBatch> warm, timed;
};
TrainData train_data(const BenchConfig& c, uint64_t seed, int n_warm, int steps);

using Sources = std::vector<std::vector<int32_t>>;  // without EOS

/// The 64 decoding sources (10–14 tokens incl. EOS), drawn from rng.
Sources decode_sources(const BenchConfig& c, std::mt19937_64& rng);

/// Forward matmul FLOPs (2 per multiply-add) of one teacher-forced batch, as
/// torch_ref.forward_flops: per layer and token 8d² + 4·d·d_ff (encoder), 12d² + 4·d·d_ff
/// (decoder) + 4d² per source token (cross-attention K/V), attention 4·n_q·n_k·d per sentence,
/// generator 2·d·V per target token. Real lengths, or every sentence at pad_s / pad_t when > 0
/// (what a padded [B·T_max, D] implementation executes). Training = 3 × this.
double forward_flops(const BenchConfig& c, const std::vector<int>& src_lens,
                     const std::vector<int>& tgt_lens, int pad_s = 0, int pad_t = 0);

/// Useful FLOPs of greedy decoding one sentence of src_len real tokens (EOS included) into
/// n_tokens outputs with a key/value cache: the encoder and cross-attention K/V once, then per
/// step one token through the decoder (self-attention over the t + 1 tokens so far, cross-
/// attention over src_len) and the generator. No padding, no recomputed prefix.
double decode_flops(const BenchConfig& c, int src_len, int n_tokens);

/// One matrix product of a workload, C[m, n] = op(A)·op(B) with row-major operands:
/// "NT" x[m,k]·W[n,k]ᵀ (Linear forward), "TN" dY[k,m]ᵀ·X[k,n] (weight gradient, m = out
/// features), "NN" dY[m,k]·W[k,n] (input gradient). `count` = how often it runs per workload.
struct Product {
  std::string name, op;
  int m, k, n;
  double count;
  double flops() const { return 2.0 * m * k * n * count; }
};

/// The linear-layer products of one training step whose encoder sees `src_rows` real tokens and
/// decoder `tgt_rows` (packed real tokens, no padding): forward NT, backward TN and NN of every
/// projection, with self-attention Q/K/V as one [3d, d] product and cross-attention K/V as one
/// [2d, d] (as PyTorch's MultiheadAttention); attention itself (< 1 % here) is not included.
std::vector<Product> train_products(const BenchConfig& c, int src_rows, int tgt_rows);

/// The linear-layer products of greedy decoding of one batch: the encoder and cross-attention
/// K/V on `src_rows` real source tokens once, then `steps` decoder steps of `batch` rows (one
/// token per sentence) and the generator. Multiply `count` by the number of batches.
std::vector<Product> decode_products(const BenchConfig& c, int src_rows, int batch, int steps);

}  // namespace bench
