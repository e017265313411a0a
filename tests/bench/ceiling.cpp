// FMA peak and best GEMM rate on a workload's products (see ceiling.h).
#include "ceiling.h"

#include <cblas.h>
#include <time.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <tuple>
#include <type_traits>

#include "anuvad/core/gemm.h"
#include "anuvad/core/step_team.h"

// OpenBLAS extension (declared in its cblas.h; restated so that another CBLAS header compiles).
extern "C" char* openblas_get_corename(void);

namespace bench {

using json = nlohmann::json;
using anuvad::Mat;
static_assert(std::is_same_v<anuvad::Scalar, float>, "the ceiling measures float32 products");

std::string blas_core() { return openblas_get_corename(); }

namespace {

volatile float g_sink;

// 12 independent FMA chains per thread (enough to cover a 4–5 cycle FMA latency on 2 pipes);
// distinct start values so that the compiler cannot merge them. One function per vector width,
// compiled for that ISA whatever the build flags, chosen at run time by what the CPU supports.
#define BENCH_FMA_KERNEL(NAME, TARGET, V, SET1, FMA, ADD, LANES)                              \
  __attribute__((target(TARGET))) double NAME(long iters) {                                   \
    V a[12];                                                                                  \
    for (int j = 0; j < 12; ++j) a[j] = SET1(1.0f + 0.01f * j);                               \
    const V m = SET1(0.9999999f), c = SET1(1e-7f);                                            \
    for (long i = 0; i < iters; ++i) {                                                        \
      a[0] = FMA(a[0], m, c); a[1] = FMA(a[1], m, c); a[2] = FMA(a[2], m, c);                 \
      a[3] = FMA(a[3], m, c); a[4] = FMA(a[4], m, c); a[5] = FMA(a[5], m, c);                 \
      a[6] = FMA(a[6], m, c); a[7] = FMA(a[7], m, c); a[8] = FMA(a[8], m, c);                 \
      a[9] = FMA(a[9], m, c); a[10] = FMA(a[10], m, c); a[11] = FMA(a[11], m, c);             \
    }                                                                                         \
    V s = a[0];                                                                               \
    for (int j = 1; j < 12; ++j) s = ADD(s, a[j]);                                            \
    float out[LANES];                                                                         \
    std::memcpy(out, &s, sizeof(V));                                                          \
    g_sink = out[0];                                                                          \
    return 12.0 * LANES * 2.0 * double(iters);                                                \
  }
BENCH_FMA_KERNEL(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
BENCH_FMA_KERNEL(fma_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
#undef BENCH_FMA_KERNEL

/// CPU time this thread has run, seconds (CLOCK_THREAD_CPUTIME_ID): time on a core, whatever
/// other processes share the cores.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Runs `calls` calls of body(t, nt) on nt threads, one parallel region per call (as anuvad
/// splits a product); returns the largest CPU time one thread spent inside body, seconds.
double busy_seconds(int nt, long calls, const std::function<void(int, int)>& body) {
  std::vector<double> busy(static_cast<size_t>(nt), 0.0);
  for (long i = 0; i < calls; ++i) {
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      const int t = omp_get_thread_num();
      const double t0 = thread_cpu_seconds();
      body(t, omp_get_num_threads());
      busy[size_t(t)] += thread_cpu_seconds() - t0;
    }
  }
  return *std::max_element(busy.begin(), busy.end());
}

/// The best of `reps` samples of body on nt threads, GFLOP/s: `flops` per call × calls / the
/// busiest thread's CPU time, the number of calls calibrated first (also a warm-up) so that a
/// sample keeps a thread busy for at least min_time. CPU time rather than wall time: a ceiling
/// is what the cores do while they run this code, so it does not fall when other processes take
/// turns on them (the fork/join of a split is left out; it is microseconds on idle cores).
double best_rate(int nt, const std::function<void(int, int)>& body, double flops, double min_time,
                 int reps) {
  long calls = 1;
  for (;;) {
    const double dt = busy_seconds(nt, calls, body);
    if (dt >= min_time / 4 || calls > (1L << 30)) {
      calls = std::max(1L, long(double(calls) * min_time / std::max(dt, 1e-9)));
      break;
    }
    calls *= 4;
  }
  double best = 0;
  for (int r = 0; r < reps; ++r)
    best = std::max(best, flops * double(calls) / busy_seconds(nt, calls, body) / 1e9);
  return best;
}

/// Best FMA rate of `kernel` on `threads` threads together, GFLOP/s. At least 0.1 s per sample
/// and 3 samples whatever the request: a short sample is all noise.
double fma_rate(double (*kernel)(long), int threads, double min_time, int reps) {
  const long chunk = 1L << 16;  // loop iterations per call; best_rate() calibrates the calls
  const double flops = kernel(chunk) * threads;
  return best_rate(threads, [&](int, int) { kernel(chunk); }, flops, std::max(min_time, 0.1),
                   std::max(reps, 3));
}

/// First value of `key` in /proc/cpuinfo ("" when absent).
std::string cpuinfo(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? "" : line.substr(p + 2);
    }
  return "";
}

/// Round trip of an empty StepTeam split on `threads` threads, µs: the median over 5 batches of
/// 20,000 splits of each batch's mean (0 without a team of ≥ 2 threads). ~0.5-1 µs when the
/// threads run on separate cores of the 2-vCPU Zen 5 hosts measured, 0.06-0.08 µs when the
/// hypervisor had put both vCPUs on one core (tests/bench/README.md, "Unequal vCPUs").
double team_split_us(int threads) {
  std::vector<double> means;
  anuvad::StepTeam::run(threads, [&] {
    anuvad::StepTeam* team = anuvad::StepTeam::current();
    if (team == nullptr) return;
    constexpr int kSplits = 20000;
    for (int batch = 0; batch < 5; ++batch) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kSplits; ++i) team->split([](int, int) {});
      means.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                      kSplits);
    }
  });
  if (means.empty()) return 0;
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

json fma_line(int threads, double min_time, int reps) {
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  const double avx2 = has_avx2 ? fma_rate(fma_avx2, threads, min_time, reps) : 0;
  const double avx512 = has_avx512 ? fma_rate(fma_avx512, threads, min_time, reps) : 0;
  const double peak = std::max(avx2, avx512);
  auto r2 = [](double x) { return std::round(x * 100) / 100; };
  const std::string flags = " " + cpuinfo("flags") + " ";
  auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  return {{"mode", "ceiling_fma"}, {"threads", threads}, {"fma_peak_gflops", r2(peak)},
          {"isa", avx512 > avx2 ? "avx512" : "avx2"}, {"avx2_gflops", r2(avx2)},
          {"avx512_gflops", r2(avx512)}, {"team_split_us", std::round(team_split_us(threads) * 1000) / 1000},
          {"cpu", {{"model", cpuinfo("model name")}, {"avx512f", has("avx512f")},
                   {"avx512_bf16", has("avx512_bf16")}, {"avx2", has("avx2")}}}};
}

/// [lo, hi) of n rows for thread t of nt (as anuvad's row split).
std::pair<int, int> share(int n, int t, int nt) { return {n * t / nt, n * (t + 1) / nt}; }

/// One product's operands, stored as its op expects (no transposed copy inside the timed call).
struct Operands {
  Mat a, b, c;
  std::vector<Mat> c_parts;  ///< TN: one C per thread of a split of k (split_k)
  Operands(const Product& p, int threads)
      : a(p.op == "TN" ? Mat::Random(p.k, p.m) : Mat::Random(p.m, p.k)),
        b(p.op == "NT" ? Mat::Random(p.n, p.k) : Mat::Random(p.k, p.n)),
        c(Mat::Zero(p.m, p.n)),
        c_parts(p.op == "TN" ? size_t(threads) : 0, Mat::Zero(p.m, p.n)) {}
};

/// Rows [r0, r1) of C = op(A)·op(B) with cblas_sgemm, single-threaded.
void blas_rows(const Product& p, Operands& o, int r0, int r1) {
  const bool ta = p.op == "TN", tb = p.op == "NT";
  const float* a = ta ? o.a.data() + r0 : o.a.data() + std::ptrdiff_t(r0) * p.k;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              r1 - r0, p.n, p.k, 1.0f, a, int(o.a.cols()), o.b.data(), int(o.b.cols()), 0.0f,
              o.c.data() + std::ptrdiff_t(r0) * p.n, p.n);
}

/// A weight gradient (TN: k = the tokens) over tokens [k0, k1) into thread t's own C, as a
/// training shard of train/thread_shards.h computes it (the shards' Cs are summed later, in a
/// pass over the parameters that is not a product).
void blas_split_k(const Product& p, Operands& o, int t, int k0, int k1) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.m, p.n, k1 - k0, 1.0f,
              o.a.data() + std::ptrdiff_t(k0) * p.m, p.m, o.b.data() + std::ptrdiff_t(k0) * p.n,
              p.n, 0.0f, o.c_parts[size_t(t)].data(), p.n);
}

/// Rows [r0, r1) of C with anuvad::gemm (its own per-shape routing).
void anuvad_rows(const Product& p, Operands& o, int r0, int r1) {
  const bool ta = p.op == "TN", tb = p.op == "NT";
  auto c = o.c.middleRows(r0, r1 - r0);
  if (ta) anuvad::gemm(o.a.middleCols(r0, r1 - r0), true, o.b, tb, 1.0f, 0.0f, c);
  else anuvad::gemm(o.a.middleRows(r0, r1 - r0), false, o.b, tb, 1.0f, 0.0f, c);
}

/// The candidates for one product: each kernel on 1 thread and with the rows split across
/// `threads` threads (each thread one single-threaded call on its block, as anuvad splits);
/// for a weight gradient (TN), also the tokens (k) split across the threads, each into its own
/// C ("openblas_<n>t_split_k", as the training shards of train/thread_shards.h compute it).
json measure_product(const Product& p, int threads, double min_time, int reps) {
  Operands o(p, threads);
  using RowsFn = void (*)(const Product&, Operands&, int, int);
  const std::pair<const char*, RowsFn> kernels[] = {{"openblas", blas_rows}, {"anuvad_gemm", anuvad_rows}};
  json cand = json::object();
  double best = 0;
  std::string best_by;
  for (const auto& [name, fn] : kernels) {
    std::vector<int> thread_counts{1};
    if (std::min(threads, p.m) > 1) thread_counts.push_back(std::min(threads, p.m));
    for (int nt : thread_counts) {
      auto rows = [&, fn = fn](int t, int n_threads) {
        const auto [r0, r1] = share(p.m, t, n_threads);
        if (r1 > r0) fn(p, o, r0, r1);
      };
      const double rate = best_rate(nt, rows, 2.0 * p.m * p.k * p.n, min_time, reps);
      const std::string key = std::string(name) + "_" + std::to_string(nt) + "t";
      cand[key] = std::round(rate * 100) / 100;
      if (rate > best) best = rate, best_by = key;
    }
  }
  const int nt = std::min(threads, p.k);
  if (p.op == "TN" && nt > 1) {
    auto split_k = [&](int t, int n_threads) {
      const auto [k0, k1] = share(p.k, t, n_threads);
      if (k1 > k0) blas_split_k(p, o, t, k0, k1);
    };
    const double rate = best_rate(nt, split_k, 2.0 * p.m * p.k * p.n, min_time, reps);
    const std::string key = "openblas_" + std::to_string(nt) + "t_split_k";
    cand[key] = std::round(rate * 100) / 100;
    if (rate > best) best = rate, best_by = key;
  }
  return {{"name", p.name}, {"op", p.op}, {"m", p.m}, {"k", p.k}, {"n", p.n}, {"count", p.count},
          {"best_gflops", std::round(best * 100) / 100}, {"best_by", best_by}, {"candidates", cand}};
}

/// Merges products of the same op and shape (their counts add up), keeping the first name.
std::vector<Product> merge(const std::vector<Product>& ps) {
  std::vector<Product> out;
  std::map<std::tuple<std::string, int, int, int>, size_t> at;
  for (const Product& p : ps) {
    const auto key = std::make_tuple(p.op, p.m, p.k, p.n);
    if (auto it = at.find(key); it != at.end()) {
      out[it->second].count += p.count;
      out[it->second].name += ", " + p.name;
    } else {
      at[key] = out.size();
      out.push_back(p);
    }
  }
  return out;
}

json workload_line(const std::string& workload, const std::vector<Product>& products,
                   json rows, double fma_peak, const CeilingRequest& r) {
  json measured = json::array();
  double flops = 0, time = 0;  // time = Σ FLOPs_i / best_i, in GFLOP / (GFLOP/s)
  for (const Product& p : merge(products)) {
    json m = measure_product(p, r.threads, r.min_time, r.reps);
    flops += p.flops();
    time += p.flops() / m["best_gflops"].get<double>();
    measured.push_back(std::move(m));
  }
  return {{"mode", "ceiling"}, {"workload", workload}, {"threads", r.threads},
          {"fma_peak_gflops", fma_peak}, {"best_gemm_gflops", std::round(flops / time * 100) / 100},
          {"rows", std::move(rows)}, {"products", std::move(measured)}};
}

}  // namespace

std::vector<json> run_ceiling(const CeilingRequest& r) {
  const BenchConfig& c = kConfigs.at(r.config);
  std::vector<json> lines{fma_line(r.threads, r.min_time, r.reps)};
  const double fma_peak = lines[0]["fma_peak_gflops"].get<double>();

  const TrainData td = train_data(c, r.seed, r.train_warmup >= 0 ? r.train_warmup : c.train_warmup,
                                  r.train_steps > 0 ? r.train_steps : c.train_steps);
  double src = 0, tgt = 0;
  for (const TrainBatch& b : td.timed) {
    for (int l : b.src_lens) src += l;
    for (int l : b.tgt_lens) tgt += l;
  }
  const int ms = int(std::lround(src / double(td.timed.size())));
  const int mt = int(std::lround(tgt / double(td.timed.size())));
  lines.push_back(workload_line("train", train_products(c, ms, mt),
                                {{"src", ms}, {"tgt", mt}}, fma_peak, r));

  std::mt19937_64 rng(r.seed);  // as the decode modes draw their sources
  const Sources sents = decode_sources(c, rng);
  const int n1 = r.bs1_sentences > 0 ? r.bs1_sentences : c.bs1_sentences;
  double src1 = 0, src64 = 0;  // real tokens incl. EOS
  for (int i = 0; i < kDecodeSentences; ++i) {
    src64 += double(sents[i].size() + 1);
    if (i < n1) src1 += double(sents[i].size() + 1);
  }
  const int m1 = int(std::lround(src1 / n1));
  lines.push_back(workload_line("decode_b1", decode_products(c, m1, 1, kDecodeLen),
                                {{"src", m1}, {"tgt", 1}}, fma_peak, r));
  lines.push_back(workload_line("decode_b64",
                                decode_products(c, int(src64), kDecodeSentences, kDecodeLen),
                                {{"src", int(src64)}, {"tgt", kDecodeSentences}}, fma_peak, r));
  return lines;
}

Ceiling read_ceiling(const std::string& path, const std::string& config,
                     const std::string& workload, int threads) {
  std::ifstream f(path);
  if (!f) {
    std::cerr << "anuvad_bench: cannot read the ceiling file " << path << "\n";
    std::exit(2);
  }
  Ceiling out;
  std::string line;
  while (std::getline(f, line)) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("mode", "") != "ceiling") continue;
    if (j.value("config", "") != config || j.value("workload", "") != workload ||
        j.value("threads", 0) != threads)
      continue;
    out.fma_peak = j.value("fma_peak_gflops", 0.0);
    out.best_gemm = j.value("best_gemm_gflops", 0.0);
  }
  return out;
}

std::string ceiling_workload(const std::string& mode) {
  const bool greedy = mode.rfind("decode_naive_", 0) == 0 || mode.rfind("decode_cached_", 0) == 0 ||
                      mode.rfind("greedy_api_", 0) == 0;
  if (mode == "train") return "train";
  if (!greedy) return "";
  return mode.size() > 4 && mode.compare(mode.size() - 4, 4, "_b64") == 0 ? "decode_b64" : "decode_b1";
}

}  // namespace bench
