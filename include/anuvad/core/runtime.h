// Process-wide settings shared by the `anuvad` program and the benchmark, so that both measure
// and run the same configuration.
#pragma once

#include <cstddef>

namespace anuvad {

/// Tunes glibc malloc for a process that reallocates the same large activation buffers on every
/// batch and every decoding call: blocks up to 256 MiB come from the heap instead of fresh
/// mmap()s (M_MMAP_THRESHOLD) and the heap is given back to the kernel only past 512 MiB free
/// (M_TRIM_THRESHOLD). Freed buffers are then reused instead of being page-faulted in again:
/// page faults were 30 % of the samples of batched decoding on this VM, and the setting made
/// cached greedy decoding at batch 64 2.3–3.5x faster (tests/bench/README.md). Call once at
/// start-up, before any threads start. Never throws.
void configure_allocator();

/// Asks the kernel to back the heap (glibc's main arena, where the model's parameters, their
/// gradients and Adam's moments live) with 2 MiB transparent huge pages: madvise(MADV_HUGEPAGE)
/// on the heap's whole 2 MiB-aligned span, then MADV_COLLAPSE (Linux >= 6.1) to move the pages
/// already there onto huge pages now rather than whenever khugepaged gets to them. Every update
/// streams each parameter, gradient and moment (Adam, the shards' gradient sum, OpenBLAS
/// packing the weights: about 1.3 GB for base) through 4 KiB pages otherwise. On the 2-core
/// test machine (2026-12-05, 6 alternated runs, tests/bench/README.md) it made a base training
/// step 7 % faster (median 484 → 449 ms) and small 5 % (78.9 → 75.3 ms); tiny unchanged. Call
/// once the long-lived training state is allocated (train/trainer.cpp: after the first update);
/// the collapse copies what it moves, once (base: 1,258 MiB in 1.5-2.1 s). Returns the bytes
/// advised: 0 off Linux or where the kernel was built without transparent huge pages (where
/// they are switched to `never`, the advice is accepted and changes nothing). Never throws.
std::size_t back_heap_with_huge_pages();

/// Uses `threads` OpenMP threads (0 = leave OpenMP's default, one per core) for the whole process:
/// the large products split their rows over it, one single-threaded OpenBLAS call per thread
/// (core/gemm.h), anuvad's own loops (attention per sentence and head, decoding row blocks) use the same pool,
/// and Eigen's internal GEMM threading is switched off (its products here are the small ones).
/// Never throws.
void configure_threads(int threads);

}  // namespace anuvad
