// Process-wide settings shared by the `anuvad` program and the benchmark, so that both measure
// and run the same configuration.
#pragma once

namespace anuvad {

/// Tunes glibc malloc for a process that reallocates the same large activation buffers on every
/// batch and every decoding call: blocks up to 256 MiB come from the heap instead of fresh
/// mmap()s (M_MMAP_THRESHOLD) and the heap is given back to the kernel only past 512 MiB free
/// (M_TRIM_THRESHOLD). Freed buffers are then reused instead of being page-faulted in again:
/// page faults were 30 % of the samples of batched decoding on this VM, and the setting made
/// cached greedy decoding at batch 64 2.3–3.5x faster (tests/bench/README.md). Call once at
/// start-up, before any threads start. Never throws.
void configure_allocator();

/// Uses `threads` OpenMP threads (0 = leave OpenMP's default, one per core) for the whole process:
/// the large products split their rows over it, one single-threaded OpenBLAS call per thread
/// (core/gemm.h), anuvad's own loops (attention per sentence and head, decoding row blocks) use the same pool,
/// and Eigen's internal GEMM threading is switched off (its products here are the small ones).
/// Never throws.
void configure_threads(int threads);

}  // namespace anuvad
