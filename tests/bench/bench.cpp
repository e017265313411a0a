// anuvad_bench: the workloads of ../shared/bench/torch_ref.py (the PyTorch CPU reference) run on
// anuvad's Transformer, printing one JSON line per measurement with the fields that
// ../shared/bench/BASELINE.md asks for (config, mode, tgt_tokens_per_s / tokens_per_s as
// {median,min,max}, ms_per_step, peak_rss_mib, ...). Not a test: not registered with ctest.
//
//   anuvad_bench --config tiny|small|base --mode MODE [--threads 2] [--repeats 3]
//                [--steps N] [--warmup N] [--bs1-sentences N] [--seed 1234] [--norm post|pre]
//                [--length L] [--batch-sentences N] [--lengths 20,40,80,100] [--clip-norm X]
//                [--thread-shards N]
//                [--check 0|1] [--ceiling FILE] [--min-time S] [--compute-type float32|bfloat16|int8|auto]
//                [--bf16-kernel auto|onednn|openblas|avx2gemm|avx512bf16|avx512|avx2|scalar]
//
// Modes (run each in its own process so that peak RSS, VmHWM of /proc/self/status, is its own):
//   train                 forward + backward + Adam on batches of 32 random sentence pairs,
//                         source and target lengths uniform in [5, 20] tokens (EOS included),
//                         label smoothing 0.1, inverse-sqrt warm-up (4000), no clipping (as
//                         torch_ref; --clip-norm to add the clipping that fit() does); each
//                         batch cut into --thread-shards shards computed side by side, one per
//                         thread, as anuvad train does (train/thread_shards.h; default:
//                         default_thread_shards, the threads for tiny, small and base;
//                         1 = the whole batch, every product split across the threads)
//   decode_naive_b1|b64   greedy, 20 tokens per sentence, re-running Transformer::decode
//                         (teacher forced) on the whole prefix each step, last position's logits
//   decode_cached_b1|b64  greedy, 20 tokens, begin_decoding + decode_step (key/value cache),
//                         argmax driven here (EOS does not stop decoding); phase_ms: a
//                         repeat's ms in the encoder, begin_decoding and the steps
//   greedy_api_b1|b64     greedy through anuvad::Translator (beam_search in mini-batches of
//                         1 or 64; beam_size 1, max_length 20), EOS logit suppressed
//                         (output_projection.bias[EOS] = -1e9)
//   beam4_cached_b1|b64   beam search through anuvad::Translator (beam_size 4, max_length 20),
//                         EOS suppressed so that every hypothesis has exactly 20 tokens
//   decode_length         cached greedy at batch 1 for --lengths output tokens (default
//                         20,40,80,100; max_positions raised): ms per token, one line per length
//   scale_train           one training step on --batch-sentences (default 1) pairs whose source and
//                         target have exactly --length tokens (EOS included); max_positions 1100
//   scale_decode          cached greedy translation at batch 1 of a --length-token source into
//                         --length output tokens; max_positions 1100
//   ceiling               no model: the FMA peak at --threads and the best GEMM rate on the
//                         products of train, decode *_b1 and *_b64 (ceiling.h; --min-time S per
//                         timing sample, default 0.02, --repeats samples); JSON lines for --ceiling
// train and the greedy modes report useful GFLOP/s (real tokens, real attention lengths, no
// recomputed prefix: workload.h) and, given --ceiling FILE (the output of a ceiling run at the
// same --threads), that rate as a fraction of the FMA peak and of the best GEMM rate.
// Greedy decoding modes finally decode the first 8 sentences again with naive batch-1 decoding
// (untimed, after peak RSS is read) and report the token agreement; --check 0 skips that (for
// profiling). Decoding modes: 64 random sources of 10–14 tokens (EOS included); batch 1 decodes the first
// --bs1-sentences of them (tiny/small 64, base 16, as torch_ref). tokens/s = generated tokens /
// wall time, encoder included. --compute-type bfloat16 (decoding modes): every weight matrix
// rounded to bfloat16 after initialisation, as `anuvad translate --compute-type bfloat16`
// (Transformer::set_compute_type); --bf16-kernel picks the product's path (default auto: oneDNN
// from 4 rows where available, the widest own path below; env.bf16_kernel in the output). Model: post-norm, dropout 0.1 on embeddings, residual branches,
// attention weights and the FFN hidden layer (as nn.Transformer*Layer), untied generator.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "anuvad/core/bf16.h"
#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/gemm_stats.h"
#include "anuvad/core/runtime.h"
#include "anuvad/decode/translator.h"
#include "anuvad/nn/batch.h"
#include "anuvad/nn/config.h"
#include "anuvad/nn/loss.h"
#include "anuvad/nn/transformer.h"
#include "anuvad/train/adam.h"
#include "anuvad/train/thread_shards.h"
#include "args.h"
#include "ceiling.h"
#include "workload.h"

using namespace anuvad;
using json = nlohmann::json;
using namespace bench;

namespace {

constexpr int kWarmupSchedule = 4000;

/// VmHWM (peak resident set) or VmRSS of this process, MiB.
double proc_status_mib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0) return std::stod(line.substr(key.size())) / 1024.0;
  return -1;
}
double peak_rss_mib() { return std::round(proc_status_mib("VmHWM") * 10) / 10; }

ModelConfig model_config(const BenchConfig& c, const Args& a, int max_positions) {
  ModelConfig m;
  m.src_vocab_size = c.src_vocab;
  m.tgt_vocab_size = c.tgt_vocab;
  m.d_model = c.d_model;
  m.n_heads = c.n_heads;
  m.d_ff = c.d_ff;
  m.encoder_layers = c.enc_layers;
  m.decoder_layers = c.dec_layers;
  // nn.TransformerEncoderLayer / DecoderLayer(dropout=0.1): dropout on residual branches, on
  // the attention weights (MultiheadAttention's dropout) and after the FFN activation; plus the
  // embedding dropout of torch_ref's embed_src / embed_tgt.
  m.dropout = 0.1;
  m.attention_dropout = 0.1;
  m.ffn_dropout = 0.1;
  m.norm = a.norm;
  m.tie_output = false;
  m.max_positions = max_positions;  // torch_ref's PositionalEncoding has 512
  m.validate();
  return m;
}

json param_counts(const Transformer& model) {
  int64_t emb = 0, enc = 0, dec = 0, gen = 0;
  for (const Param& p : model.params().params()) {
    const int64_t n = p.rows() * p.cols();
    if (p.name.find("embed_tokens") != std::string::npos) emb += n;
    else if (p.name.rfind("encoder.", 0) == 0) enc += n;
    else if (p.name.rfind("decoder.", 0) == 0) dec += n;
    else gen += n;
  }
  return {{"embeddings", emb}, {"encoder", enc}, {"decoder", dec}, {"generator", gen},
          {"total", emb + enc + dec + gen}, {"non_embedding", enc + dec + gen}};
}

json env_info(const Args& a) {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return {{"omp_max_threads", omp_get_max_threads()}, {"requested_threads", a.threads},
          {"eigen_threads", Eigen::nbThreads()},
          {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
                        "." + std::to_string(EIGEN_MINOR_VERSION)},
          {"eigen_simd", Eigen::SimdInstructionSetsInUse()},
          {"gemm_backend", gemm_backend()}, {"blas_core", blas_core()},
          {"bf16_kernel", bf16_kernel_name(Bf16Kernel::kAuto)},
          {"openblas_coretype_env", coretype ? json(coretype) : json()},  // forces a kernel
#ifdef __VERSION__
          {"compiler", __VERSION__},
#endif
          {"scalar", sizeof(Scalar) == 4 ? "float32" : "float64"}};
}

void emit(const Args& a, json line) {
  json out = {{"config", a.config}, {"norm", a.norm}, {"impl", "anuvad"}};
  for (auto& [k, v] : line.items()) out[k] = v;
  out["env"] = env_info(a);
  std::cout << out.dump() << std::endl;
}

/// Useful GFLOP/s of each repeat ({median, min, max}) and, when --ceiling names a ceiling run,
/// the median as a fraction of the FMA peak and of the best GEMM rate on the mode's products.
json useful_rate(const Args& a, double useful_flops, const std::vector<double>& times) {
  std::vector<double> gf;
  for (double t : times) gf.push_back(useful_flops / t / 1e9);
  json out = {{"useful_gflops", summarize(gf)}, {"fraction_of_fma_peak", nullptr},
              {"fraction_of_best_gemm", nullptr}};
  const std::string workload = ceiling_workload(a.mode);
  if (a.ceiling.empty() || workload.empty()) return out;
  const Ceiling c = read_ceiling(a.ceiling, a.config, workload, a.threads);
  const double g = median(gf);
  auto frac = [&](double peak) -> json {
    if (peak <= 0) return nullptr;
    return std::round(g / peak * 10000) / 10000;
  };
  out["fma_peak_gflops"] = c.fma_peak;
  out["best_gemm_gflops"] = c.best_gemm;
  out["fraction_of_fma_peak"] = frac(c.fma_peak);
  out["fraction_of_best_gemm"] = frac(c.best_gemm);
  return out;
}

// ---------------------------------------------------------------------------------------------
// training

struct Trainer {
  Transformer& model;
  const BenchConfig& c;
  double clip_norm;
  uint64_t dropout_seed;
  Adam adam;
  ShardedStep sharded;  ///< forward, loss and backward as anuvad train runs them
  int64_t step_no = 0;
  bool huge_pages = true;  ///< back_heap_with_huge_pages after the first step (--huge-pages)
  double huge_pages_mib = 0, huge_pages_seconds = 0;  ///< what it advised, and its one-off time
  Trainer(Transformer& m, const BenchConfig& cfg, double clip, uint64_t seed, int thread_shards)
      : model(m), c(cfg), clip_norm(clip), dropout_seed(seed), adam(m.params()), sharded(thread_shards) {}

  double optimizer_seconds = 0;  ///< gradient norm + Adam, summed over the steps

  double step(const Batch& b) {
    ++step_no;
    const LossStats ls = sharded.run(model, b, DropoutContext::training(dropout_seed, step_no), {0.1},
                                     static_cast<double>(b.n_tgt_tokens()));
    const auto t0 = Clock::now();
    // as anuvad train does (train/trainer.cpp): the norm in one pass, the factor inside Adam's
    const Scalar clip = clip_norm > 0 ? clip_coefficient(gradient_norm(model.params()), clip_norm) : Scalar(1);
    // torch_ref: lr = d^-0.5 · min(s^-0.5, s · w^-1.5) = peak · min(s / w, √(w / s)), peak = (d·w)^-0.5
    const double peak = 1.0 / std::sqrt(double(c.d_model) * kWarmupSchedule);
    adam.step(model.params(), inverse_sqrt_lr(peak, step_no, kWarmupSchedule), step_no, clip);
    optimizer_seconds += seconds(t0, Clock::now());
    if (step_no == 1 && huge_pages) {  // as anuvad train does after its first update
      const auto h0 = Clock::now();
      huge_pages_mib = double(back_heap_with_huge_pages()) / double(1 << 20);
      huge_pages_seconds = seconds(h0, Clock::now());
    }
    return ls.loss_sum / static_cast<double>(ls.n_tokens);
  }
};

void bench_train(const Args& a, const BenchConfig& c) {
  Transformer model(model_config(c, a, 512));
  model.init_parameters(a.seed);
  const int steps = a.steps > 0 ? a.steps : c.train_steps;
  const int n_warm = a.warmup >= 0 ? a.warmup : c.train_warmup;
  const TrainData data = train_data(c, a.seed, n_warm, steps);
  const std::vector<TrainBatch>& warm = data.warm;
  const std::vector<TrainBatch>& batches = data.timed;
  Trainer tr(model, c, a.clip_norm, a.seed + 1, a.thread_shards > 0 ? a.thread_shards : default_thread_shards(model.config(), a.threads));
  tr.huge_pages = a.huge_pages;
  const double rss_before = peak_rss_mib();
  for (const auto& b : warm) tr.step(b.batch);
  // useful: real tokens and real attention lengths; padded: every sentence at the batch's
  // longest, [B·T_max] (what torch_ref executes; what anuvad executed before packing tokens)
  double tgt_tokens = 0, src_tokens = 0, padded_tgt = 0, useful = 0, padded = 0;
  for (const auto& b : batches) {
    tgt_tokens += static_cast<double>(b.batch.n_tgt_tokens());
    for (int l : b.src_lens) src_tokens += l;
    padded_tgt += double(b.batch.batch_size) * b.batch.tgt_len;
    useful += 3 * forward_flops(c, b.src_lens, b.tgt_lens);
    padded += 3 * forward_flops(c, b.src_lens, b.tgt_lens, b.batch.src_len, b.batch.tgt_len);
  }
  std::vector<double> times;
  double loss = 0;
  start_gemm_stats();
  tr.optimizer_seconds = 0;
  for (int r = 0; r < a.repeats; ++r) {
    const auto t0 = Clock::now();
    for (const auto& b : batches) loss = tr.step(b.batch);
    times.push_back(seconds(t0, Clock::now()));
  }
  const GemmStats gs = gemm_stats();
  double total = 0;
  for (double t : times) total += t;
  std::vector<double> tps, ms, gf;
  for (double t : times) {
    tps.push_back(tgt_tokens / t);
    ms.push_back(1000 * t / steps);
    gf.push_back(padded / t / 1e9);
  }
  json line = {{"mode", "train"}, {"batch_sentences", kTrainBatch}, {"steps_per_repeat", steps},
           {"warmup_steps", n_warm}, {"repeats", a.repeats}, {"clip_norm", a.clip_norm}, {"huge_pages", a.huge_pages}, {"huge_pages_mib", std::round(tr.huge_pages_mib)}, {"huge_pages_seconds", tr.huge_pages_seconds}, {"thread_shards", tr.sharded.last_shards()},
           {"tgt_tokens_per_s", summarize(tps)}, {"ms_per_step", summarize(ms)},
           {"tgt_tokens_per_step", tgt_tokens / steps}, {"src_tokens_per_step", src_tokens / steps},
           {"padded_tgt_tokens_per_step", padded_tgt / steps},
           {"flops_per_tgt_token_useful", useful / tgt_tokens},
           {"flops_per_step_useful", useful / steps}, {"flops_per_step_padded", padded / steps},
           {"achieved_gflops_padded", summarize(gf)}, {"params", param_counts(model)},
           {"final_loss", loss}, {"peak_rss_mib", peak_rss_mib()},
           {"rss_before_training_mib", rss_before},
           // the matrix products (core/gemm_stats.h): their share of the time, their rate in
           // place (to set against the ceiling's best_gemm_gflops), and the rest per step
           {"gemm_time_fraction", std::round(gs.seconds / total * 1000) / 1000},
           {"gemm_gflops_in_place", std::round(gs.flops / gs.seconds / 1e9 * 10) / 10},
           {"gemm_split_idle_fraction", std::round(gs.split_idle_seconds / gs.seconds * 1000) / 1000},
           // the training shards' threads waiting for the slowest shard (train/thread_shards.h)
           {"shard_idle_fraction", tr.sharded.region_seconds() > 0 ? std::round(tr.sharded.idle_seconds() / tr.sharded.region_seconds() * 1000) / 1000 : 0.0},
           {"outside_gemm_ms_per_step", std::round((total - gs.seconds) / (double(a.repeats) * steps) * 1e4) / 10},
           // of which the optimizer: memory-bound passes over every parameter, whatever the batch
           {"optimizer_ms_per_step", std::round(tr.optimizer_seconds / (double(a.repeats) * steps) * 1e4) / 10}};
  line.update(useful_rate(a, useful, times));  // useful = FLOPs of one repeat
  emit(a, std::move(line));
}

// ---------------------------------------------------------------------------------------------
// decoding

using Outputs = std::vector<std::vector<int32_t>>;

Batch source_batch(const Sources& srcs) {
  std::vector<Example> ex;
  for (const auto& s : srcs) ex.push_back({s, {}});
  std::vector<const Example*> ptrs;
  for (const auto& e : ex) ptrs.push_back(&e);
  return make_batch(ptrs);
}

/// The first index of row r's largest value (as maxCoeff(&index)), in two vectorised passes:
/// Eigen's maxCoeff with an index runs one scalar comparison per value (6.1 µs for 8,000
/// values here, against 0.27 µs), which PyTorch's argmax does not.
int argmax_row(const Mat& m, Index r) {
  const auto row = m.row(r);
  const Scalar top = row.maxCoeff();
  Index best = 0;
  while (best + 1 < row.size() && !(row[best] == top)) ++best;
  return static_cast<int>(best);
}

/// Seconds a cached greedy run spent in its three phases, summed over its batches: the encoder,
/// begin_decoding (the cross-attention keys and values of the memory, once per sentence) and
/// the decoding steps (decode_step and the argmax).
struct DecodePhases {
  double encode = 0, begin_decoding = 0, steps = 0;
};

/// Greedy with the key/value cache: exactly n_tokens per sentence. Optional per-step timing
/// (step_seconds[t] += step t's seconds) and phase timing (phases += this batch's seconds).
Outputs greedy_cached(const Transformer& model, const Sources& srcs, int n_tokens,
                      std::vector<double>* step_seconds = nullptr, DecodePhases* phases = nullptr) {
  const Batch b = source_batch(srcs);
  ForwardCache cache;
  cache.inference = true;  // as beam_search (anuvad translate) runs the encoder
  const auto t_encode = Clock::now();
  model.encode(b.src, b.src_rows, DropoutContext{}, cache);
  const auto t_begin = Clock::now();
  DecoderState st = model.begin_decoding(cache.memory, b.src_rows, n_tokens);
  const auto t_steps = Clock::now();
  std::vector<int32_t> tokens(static_cast<size_t>(b.batch_size), kBosId);
  Outputs out(static_cast<size_t>(b.batch_size));
  Mat logits;
  for (int t = 0; t < n_tokens; ++t) {
    const auto t0 = Clock::now();
    model.decode_step(tokens, st, logits);
    // Rows split across the threads as the library's greedy and beam search split theirs
    // (decode.cpp top_proposals) and as torch.argmax runs on its intra-op threads.
#pragma omp parallel for schedule(static) if (double(logits.size()) >= 65536.0)
    for (int i = 0; i < b.batch_size; ++i) tokens[i] = argmax_row(logits, i);
    for (int i = 0; i < b.batch_size; ++i) out[i].push_back(tokens[i]);
    if (step_seconds) (*step_seconds)[t] += seconds(t0, Clock::now());
  }
  if (phases) {
    phases->encode += seconds(t_encode, t_begin);
    phases->begin_decoding += seconds(t_begin, t_steps);
    phases->steps += seconds(t_steps, Clock::now());
  }
  return out;
}

/// Greedy re-running the teacher-forced decoder on the whole prefix at every step.
Outputs greedy_naive(const Transformer& model, const Sources& srcs, int n_tokens) {
  const Batch b = source_batch(srcs);
  ForwardCache cache;
  model.encode(b.src, b.src_rows, DropoutContext{}, cache);
  Outputs out(static_cast<size_t>(b.batch_size));
  Mat logits;
  TokenIds tgt_in;
  for (int t = 0; t < n_tokens; ++t) {
    const int T = t + 1;
    tgt_in.assign(size_t(b.batch_size) * T, kBosId);
    for (int i = 0; i < b.batch_size; ++i)
      std::copy(out[i].begin(), out[i].end(), tgt_in.begin() + size_t(i) * T + 1);
    const Packing tgt_rows = Packing::of(std::vector<int>(static_cast<size_t>(b.batch_size), T));
    model.decoder_forward(tgt_in, tgt_rows, b.src_rows, DropoutContext{}, cache, logits);
    for (int i = 0; i < b.batch_size; ++i) out[i].push_back(argmax_row(logits, Index(i) * T + T - 1));
  }
  return out;
}

/// Through the Translator (beam_search in mini-batches of `batch` sentences, as `translate`).
Outputs via_translator(const Transformer& model, const Sources& srcs, int beam, int n_tokens,
                       int batch) {
  DecodeOptions o;
  o.beam_size = beam;
  o.n_best = 1;
  o.max_length = n_tokens;
  Outputs out;
  for (auto& nb : Translator(model, o, batch).translate(srcs)) {
    if (static_cast<int>(nb.front().tokens.size()) != n_tokens) {
      std::cerr << "anuvad_bench: a hypothesis has " << nb.front().tokens.size()
                << " tokens, expected " << n_tokens << "\n";
      std::exit(1);
    }
    out.push_back(nb.front().tokens);
  }
  return out;
}

void suppress_eos(Transformer& model) {
  Param* bias = model.params().find("output_projection.bias");
  if (!bias) {
    std::cerr << "anuvad_bench: no output_projection.bias\n";
    std::exit(1);
  }
  bias->value(0, kEosId) = Scalar(-1e9);
}

void bench_decode(const Args& a, const BenchConfig& c) {
  const std::string& mode = a.mode;
  const bool b64 = mode.size() > 4 && mode.compare(mode.size() - 4, 4, "_b64") == 0;
  const int batch = b64 ? 64 : 1;
  std::string kind;
  if (mode.rfind("decode_naive_", 0) == 0) kind = "naive";
  else if (mode.rfind("decode_cached_", 0) == 0) kind = "cached";
  else if (mode.rfind("greedy_api_", 0) == 0) kind = "greedy_api";
  else if (mode.rfind("beam4_cached_", 0) == 0) kind = "beam4";
  else usage("unknown mode " + mode);

  std::mt19937_64 rng(a.seed);
  Transformer model(model_config(c, a, 512));
  model.init_parameters(a.seed);
  const bool eos_suppressed = kind == "greedy_api" || kind == "beam4";
  if (eos_suppressed) suppress_eos(model);
  model.set_compute_type(a.compute_type);
  const Sources sents = decode_sources(c, rng);
  const int n_sent = batch == 1 ? (a.bs1_sentences > 0 ? a.bs1_sentences : c.bs1_sentences)
                                : kDecodeSentences;
  std::vector<Sources> batches;
  for (int i = 0; i < n_sent; i += batch)
    batches.emplace_back(sents.begin() + i, sents.begin() + std::min(i + batch, n_sent));

  const bool api = kind == "greedy_api" || kind == "beam4";
  DecodePhases phases;  // the current repeat's, cached mode only
  auto run = [&](const Sources& srcs, int n_tok) -> Outputs {
    if (kind == "naive") return greedy_naive(model, srcs, n_tok);
    if (kind == "cached") return greedy_cached(model, srcs, n_tok, nullptr, &phases);
    return via_translator(model, srcs, kind == "beam4" ? 4 : 1, n_tok, batch);
  };
  const double rss_before = peak_rss_mib();
  run(Sources(sents.begin(), sents.begin() + 1), 3);  // warm-up, as torch_ref
  std::vector<double> times, encode_ms, begin_ms, steps_ms;
  Outputs outputs;
  for (int r = 0; r < a.repeats; ++r) {
    outputs.clear();
    phases = DecodePhases{};
    const auto t0 = Clock::now();
    if (api) {  // the Translator cuts the batches itself (by length: the same batches here)
      outputs = run(Sources(sents.begin(), sents.begin() + n_sent), kDecodeLen);
    } else {
      for (const auto& bt : batches)
        for (auto& o : run(bt, kDecodeLen)) outputs.push_back(std::move(o));
    }
    times.push_back(seconds(t0, Clock::now()));
    encode_ms.push_back(1000 * phases.encode);
    begin_ms.push_back(1000 * phases.begin_decoding);
    steps_ms.push_back(1000 * phases.steps);
  }
  const double peak = peak_rss_mib();
  // Agreement with naive decoding at batch 1 on the first sentences (greedy modes only):
  // checks cached = naive and batch 64 = batch 1 at once.
  json agree = nullptr;
  if (a.check && (kind == "naive" || kind == "cached" || kind == "greedy_api")) {
    const int n_check = std::min(n_sent, 8);
    double same = 0, total = 0;
    for (int i = 0; i < n_check; ++i) {
      // greedy_api never emits EOS/PAD/BOS/UNK; the reference argmax does not exclude them, but
      // with random weights those rarely win, so the comparison stays meaningful.
      const Outputs ref = greedy_naive(model, Sources{sents[i]}, kDecodeLen);
      for (int t = 0; t < kDecodeLen; ++t) {
        same += ref[0][t] == outputs[i][t];
        total += 1;
      }
    }
    agree = same / total;
  }
  const double n_tok = double(n_sent) * kDecodeLen;
  std::vector<double> tps, ms;
  for (double t : times) {
    tps.push_back(n_tok / t);
    ms.push_back(1000 * t / n_sent);
  }
  json line = {{"mode", mode}, {"batch_size", batch}, {"sentences", n_sent},
               {"tokens_per_sentence", kDecodeLen}, {"repeats", a.repeats},
               {"beam_size", kind == "beam4" ? 4 : 1}, {"eos_suppressed", eos_suppressed},
               {"tokens_per_s", summarize(tps)}, {"ms_per_sentence", summarize(ms)},
               {"token_agreement_with_naive_b1", agree}, {"params", param_counts(model)},
               {"peak_rss_mib", peak}, {"rss_before_decoding_mib", rss_before},
               {"compute_type", compute_type_name(model.compute_type())}};
  if (kind == "cached")  // where a repeat's time went (all its batches)
    line["phase_ms"] = {{"encode", summarize(encode_ms)}, {"begin_decoding", summarize(begin_ms)},
                        {"steps", summarize(steps_ms)}};
  if (kind != "beam4") {  // useful work of greedy decoding: the cached minimum, real lengths
    double useful = 0;
    for (int i = 0; i < n_sent; ++i) useful += decode_flops(c, int(sents[i].size()) + 1, kDecodeLen);
    line["flops_per_token_useful"] = useful / n_tok;
    line.update(useful_rate(a, useful, times));
  }
  emit(a, std::move(line));
}

/// Cached greedy at batch 1 for several output lengths: per-token time and its growth.
void bench_decode_length(const Args& a, const BenchConfig& c) {
  const int max_len = *std::max_element(a.lengths.begin(), a.lengths.end());
  std::mt19937_64 rng(a.seed);
  Transformer model(model_config(c, a, std::max(512, max_len + 1)));
  model.init_parameters(a.seed);
  model.set_compute_type(a.compute_type);
  const Sources sents = decode_sources(c, rng);
  const int n_sent = a.bs1_sentences > 0 ? a.bs1_sentences : 16;
  greedy_cached(model, Sources{sents[0]}, 3);  // warm-up
  for (int n_tok : a.lengths) {
    std::vector<double> times;
    std::vector<double> per_step(static_cast<size_t>(n_tok), 0.0);
    for (int r = 0; r < a.repeats; ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < n_sent; ++i) greedy_cached(model, Sources{sents[i]}, n_tok, &per_step);
      times.push_back(seconds(t0, Clock::now()));
    }
    std::vector<double> ms_tok, tps;
    for (double t : times) {
      ms_tok.push_back(1000 * t / (double(n_sent) * n_tok));
      tps.push_back(double(n_sent) * n_tok / t);
    }
    const double denom = double(n_sent) * a.repeats;
    auto mean_ms = [&](int from, int to) {  // mean decode_step time of steps [from, to)
      double s = 0;
      for (int t = from; t < to; ++t) s += per_step[t];
      return std::round(1e6 * s / denom / (to - from)) / 1000;
    };
    emit(a, {{"mode", "decode_length"}, {"batch_size", 1}, {"sentences", n_sent},
             {"compute_type", compute_type_name(model.compute_type())},
             {"tokens_per_sentence", n_tok}, {"repeats", a.repeats},
             {"tokens_per_s", summarize(tps)}, {"ms_per_token", summarize(ms_tok)},
             {"step_ms_first10", mean_ms(0, std::min(10, n_tok))},
             {"step_ms_last10", mean_ms(std::max(0, n_tok - 10), n_tok)},
             {"peak_rss_mib", peak_rss_mib()}});
  }
}

/// Training step and translation at one long sentence length (per process: peak RSS per length).
void bench_scale(const Args& a, const BenchConfig& c) {
  const int L = a.length;
  std::mt19937_64 rng(a.seed);
  Transformer model(model_config(c, a, 1100));
  model.init_parameters(a.seed);
  const double rss_before = peak_rss_mib();
  if (a.mode == "scale_train") {
    const TrainBatch tb = make_train_batch(c, rng, a.batch_sentences, L, L);
    Trainer tr(model, c, a.clip_norm, a.seed + 1, a.thread_shards > 0 ? a.thread_shards : default_thread_shards(model.config(), a.threads));
    tr.step(tb.batch);  // warm-up (allocates Adam moments and caches)
    std::vector<double> ms, tps;
    for (int r = 0; r < a.repeats; ++r) {
      const auto t0 = Clock::now();
      tr.step(tb.batch);
      const double t = seconds(t0, Clock::now());
      ms.push_back(1000 * t);
      tps.push_back(static_cast<double>(tb.batch.n_tgt_tokens()) / t);
    }
    emit(a, {{"mode", "scale_train"}, {"length", L}, {"batch_sentences", a.batch_sentences},
             {"repeats", a.repeats}, {"ms_per_step", summarize(ms)},
             {"tgt_tokens_per_s", summarize(tps)},
             {"flops_per_step", 3 * forward_flops(c, tb.src_lens, tb.tgt_lens)},
             {"peak_rss_mib", peak_rss_mib()}, {"rss_before_mib", rss_before}});
  } else {
    const Sources src{random_sentence(L, c.src_vocab, rng)};
    greedy_cached(model, src, std::min(L, 3));  // warm-up
    std::vector<double> ms, tps;
    for (int r = 0; r < a.repeats; ++r) {
      const auto t0 = Clock::now();
      greedy_cached(model, src, L);
      const double t = seconds(t0, Clock::now());
      ms.push_back(1000 * t);
      tps.push_back(L / t);
    }
    emit(a, {{"mode", "scale_decode"}, {"length", L}, {"batch_size", 1}, {"repeats", a.repeats},
             {"source_tokens", L}, {"output_tokens", L}, {"ms_per_sentence", summarize(ms)},
             {"tokens_per_s", summarize(tps)}, {"peak_rss_mib", peak_rss_mib()},
             {"rss_before_mib", rss_before}});
  }
}

/// --mode ceiling: the FMA peak and the best GEMM rates of the config's workloads (ceiling.h).
void bench_ceiling(const Args& a) {
  const CeilingRequest r{a.config, a.threads,     a.seed,     a.warmup,
                         a.steps,  a.bs1_sentences, a.min_time, a.repeats};
  for (json& line : run_ceiling(r)) emit(a, std::move(line));
}

}  // namespace

int main(int argc, char** argv) {
  anuvad::configure_allocator();  // as the anuvad program does at start-up
  const Args a = parse(argc, argv);
  anuvad::configure_threads(a.threads);  // as the anuvad program does (--cpu-threads)
  const BenchConfig& c = kConfigs.at(a.config);
  try {
    if (a.mode == "train") bench_train(a, c);
    else if (a.mode == "decode_length") bench_decode_length(a, c);
    else if (a.mode == "scale_train" || a.mode == "scale_decode") bench_scale(a, c);
    else if (a.mode == "ceiling") bench_ceiling(a);
    else bench_decode(a, c);
  } catch (const std::exception& e) {
    std::cerr << "anuvad_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
