// The ceiling of this machine for the benchmark's workloads (issue #15, "The ceiling in the
// benchmark"): the FMA peak at the benchmark's thread count, and the best GEMM rate on the very
// products of a workload (OpenBLAS's cblas_sgemm and anuvad::gemm, 1 thread or the rows split
// across the threads as anuvad splits them; the best per product, weighted by its FLOPs).
// `anuvad_bench --mode ceiling` writes these as JSON lines; the timed modes read them back
// (`--ceiling FILE`) to report their useful GFLOP/s as a fraction of both.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workload.h"

namespace bench {

/// What a ceiling run measures, and how long it spends per measurement.
struct CeilingRequest {
  std::string config;
  int threads = 2;
  uint64_t seed = 1234;
  int train_warmup = -1, train_steps = -1;  // as `--mode train` (-1: the config's default)
  int bs1_sentences = -1;                   // as the decode modes at batch 1 (-1: default)
  double min_time = 0.02;                   // CPU seconds per timing sample
  int reps = 3;                             // samples per measurement (the best is kept)
};

/// The JSON lines of a ceiling run for one config: first
///   {"mode": "ceiling_fma", "threads", "fma_peak_gflops", "isa", "avx2_gflops", "avx512_gflops", "cpu"}
/// then one {"mode": "ceiling", "workload": "train" | "decode_b1" | "decode_b64", "threads",
/// "fma_peak_gflops", "best_gemm_gflops" (FLOP-weighted: total FLOPs / Σ FLOPs_i / best_i),
/// "rows" {...}, "products": [{name, op, m, k, n, count, best_gflops, best_by, candidates}]}
/// per workload. Rates are GFLOP/s, the best of `reps` samples, each FLOPs over the busiest
/// thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that other processes taking turns on the cores
/// do not lower the ceiling. Throws anuvad::Error subclasses
/// only through the library (none expected); exits never.
std::vector<nlohmann::json> run_ceiling(const CeilingRequest& r);

/// The OpenBLAS kernel ("core") this process runs, e.g. "Cooperlake" (openblas_get_corename).
std::string blas_core();

/// Ceiling figures for one timed mode, read from a ceiling run's JSON lines.
struct Ceiling {
  double fma_peak = 0;   // GFLOP/s at the thread count, 0 when absent
  double best_gemm = 0;  // GFLOP/s on the mode's products, 0 when absent
};

/// The "ceiling" line of `workload` for `config` at `threads` threads in the JSON-lines file
/// `path` (the last one wins). Exits with a message when the file cannot be read; missing
/// entries give zeros.
Ceiling read_ceiling(const std::string& path, const std::string& config,
                     const std::string& workload, int threads);

/// "train", "decode_b1" or "decode_b64" for a timed mode; "" when the mode has no ceiling
/// (beam search, the scaling modes).
std::string ceiling_workload(const std::string& mode);

}  // namespace bench
