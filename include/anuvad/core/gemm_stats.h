// Time spent inside gemm(), for benchmarks (issue #15's training-efficiency analysis: what share
// of a training step the matrix products take, and at what rate they run in place, against the
// rate each product reaches alone, tests/bench/ceiling.cpp). Every call of every thread counts,
// once start_gemm_stats() has been called (before, gemm() reads no clock: a decoding step makes
// tens of calls); a call made inside a parallel region (a training shard of
// train/thread_shards.h, a row block of a batched decoding step) counts its wall time divided by
// the team's threads, so that `seconds` stays a share of the wall time when the threads run
// products side by side.
#pragma once

#include <cstdint>

namespace anuvad {

/// The totals since start_gemm_stats(), over all threads.
struct GemmStats {
  int64_t calls = 0;   ///< gemm() calls
  double seconds = 0;  ///< wall-clock seconds inside them (÷ the team's threads in a parallel region)
  double flops = 0;    ///< 2·m·n·k summed over them
  /// Of `seconds`, the time the threads of the products split by rows spent outside their own
  /// block (waiting for the slowest block, forking and joining): per such product its wall time
  /// minus the mean of the threads' wall times inside their OpenBLAS call. The ceiling
  /// (tests/bench/ceiling.cpp) leaves this out, as it times the busiest thread's CPU time.
  double split_idle_seconds = 0;
};

/// The totals so far (thread-safe).
GemmStats gemm_stats();
/// Sets the totals to zero and starts counting every thread's calls (thread-safe).
void start_gemm_stats();

}  // namespace anuvad
