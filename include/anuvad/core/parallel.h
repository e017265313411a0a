// Element-wise passes over the rows (or columns) of an activation matrix, split across the
// OpenMP threads when the pass is large enough to pay for a parallel region (issue #15: in
// training, the layer norms, residual sums, ReLU, dropout and bias passes ran on one thread
// while the other waited, 17 % of a small-config step). Every split is into contiguous blocks
// and every element is computed by the same expression whatever the block, so the results do
// not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <utility>

#include "anuvad/core/step_team.h"
#include "anuvad/core/tensor.h"

namespace anuvad {

/// Elements (rows × columns touched) from which a pass is split across the threads: 32,768
/// floats is 128 KiB, ~10 µs of a memory-bound pass, against ~2-6 µs for a fork/join.
inline constexpr double kParallelMinElements = 32768.0;

/// Threads a split of work may use from here: the active StepTeam's size, else 1 inside a
/// parallel region (each thread's work stays whole), else omp_get_max_threads().
inline int split_threads() {
  if (const StepTeam* team = StepTeam::current()) return team->size();
  return omp_in_parallel() ? 1 : omp_get_max_threads();
}

/// Calls fn(t, nt) once for every thread t of nt ≤ `threads` and returns when all have
/// returned: on the calling thread's StepTeam when it runs one (no fork/join), else in a new
/// OpenMP parallel region. fn must not throw. `threads` comes from split_threads().
template <typename Fn>
void split_run(int threads, Fn&& fn) {
  if (StepTeam* team = StepTeam::current(); team && team->size() == threads) return team->split(fn);
#pragma omp parallel num_threads(threads)
  fn(omp_get_thread_num(), omp_get_num_threads());
}

/// How parallel_for hands out the indices: contiguous equal runs, or one at a time to whichever
/// thread is free (uneven work per index, e.g. attention over sentences of different lengths).
enum class Schedule { kStatic, kDynamic };

/// Calls fn(i) for every i in [0, n): across the OpenMP threads when `parallel`, n > 1 and the
/// caller is not inside a parallel region already (nested regions run on one thread anyway),
/// else in a plain loop on the calling thread. Not `#pragma omp parallel for if (parallel)`:
/// a region the condition turns off still enters the OpenMP runtime, which sets up a team of
/// one: 1.3 µs per call outside a region and 2.5 µs inside one on the 2-core Zen 5 host
/// (libgomp 12), where a batch-1 decoding step of the small model made six such calls.
/// `fn` must not throw (an exception cannot leave a parallel region).
template <Schedule kSchedule = Schedule::kStatic, typename I, typename Fn>
void parallel_for(I n, bool parallel, Fn&& fn) {
  if (!parallel || n < 2 || omp_in_parallel()) {
    for (I i = 0; i < n; ++i) fn(i);
  } else if constexpr (kSchedule == Schedule::kDynamic) {
#pragma omp parallel for schedule(dynamic)
    for (I i = 0; i < n; ++i) fn(i);
  } else {
#pragma omp parallel for schedule(static)
    for (I i = 0; i < n; ++i) fn(i);
  }
}

/// Calls fn(first, last) on contiguous blocks covering [0, n): one block per OpenMP thread
/// when `elements` (the pass's size, in matrix elements) reaches kParallelMinElements and the
/// caller is not already inside a parallel region (a StepTeam's body counts as outside: the pass
/// runs on the team), otherwise fn(0, n) on the calling thread.
/// `fn` must not throw (an exception cannot leave a parallel region).
template <typename Fn>
void parallel_blocks(Index n, double elements, Fn&& fn) {
  const int threads = split_threads();
  if (threads < 2 || n < 2 || elements < kParallelMinElements) {
    if (n > 0) fn(Index(0), n);
    return;
  }
  split_run(threads, [&](Index t, Index nt) {
    const Index first = n * t / nt, last = n * (t + 1) / nt;
    if (last > first) fn(first, last);
  });
}

/// Thread t's share [first, last) of `size` values split among nt threads in whole 16-value
/// lines (the last line may be partial): a block starts as aligned as the data itself, so a
/// value takes the vector or the scalar path of an Eigen expression whatever the thread count.
inline std::pair<Index, Index> line_block(Index size, Index t, Index nt) {
  const Index lines = (size + 15) / 16;
  return {std::min(size, lines * t / nt * 16), std::min(size, lines * (t + 1) / nt * 16)};
}

/// out[0, c] (+)= Σ_r x(r, c) for every column c of x [rows, cols] (row-major): the bias
/// gradient of an affine map, the β gradient of a layer norm. Each column is summed in row
/// order from zero, then added to (or stored in) out, whatever the thread count: the columns
/// are split across the threads, not the rows. out: [1, cols]; rows = 0 gives zeros.
template <typename X>
void column_sums(const X& x, Eigen::Ref<Mat> out, bool accumulate) {
  const Index rows = x.rows(), cols = x.cols();
  RowVec sum = RowVec::Zero(cols);  // allocated here: nothing inside the region may throw
  // Blocks of 16 columns (one 64-byte line of a row when the data is 64-byte aligned, as
  // Eigen's allocations are in AVX-512 builds).
  const Index lines = (cols + 15) / 16;
  parallel_blocks(lines, double(rows) * double(cols), [&](Index l0, Index l1) {
    const Index c0 = l0 * 16, width = std::min(cols, l1 * 16) - c0;
    auto s = sum.segment(c0, width);
    for (Index r = 0; r < rows; ++r) s += x.row(r).segment(c0, width);
    if (accumulate) out.row(0).segment(c0, width) += s;
    else out.row(0).segment(c0, width) = s;
  });
}

}  // namespace anuvad
