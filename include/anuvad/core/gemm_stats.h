// Time spent inside gemm(), for benchmarks (issue #15's training-efficiency analysis: what share
// of a training step the matrix products take, and at what rate they run in place, against the
// rate each product reaches alone, tests/bench/ceiling.cpp). Only calls made outside a parallel
// region are counted (all of training's and encoding's products; the row blocks of a batched
// decoding step call gemm() inside one and are not), per calling thread, and only after
// start_gemm_stats(): otherwise gemm() reads no clock (a decoding step makes tens of calls).
#pragma once

#include <cstdint>

namespace anuvad {

/// The calling thread's totals since its start_gemm_stats().
struct GemmStats {
  int64_t calls = 0;   ///< gemm() calls
  double seconds = 0;  ///< wall-clock seconds inside them
  double flops = 0;    ///< 2·m·n·k summed over them
  /// Of `seconds`, the time the threads of the products split by rows spent outside their own
  /// block (waiting for the slowest block, forking and joining): per such product its wall time
  /// minus the mean of the threads' wall times inside their OpenBLAS call. The ceiling
  /// (tests/bench/ceiling.cpp) leaves this out, as it times the busiest thread's CPU time.
  double split_idle_seconds = 0;
};

/// The calling thread's totals so far.
GemmStats gemm_stats();
/// Sets the calling thread's totals to zero and starts counting its calls.
void start_gemm_stats();

}  // namespace anuvad
