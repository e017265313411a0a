// The one place where anuvad's large matrix products are made (issue #15): row-major
// C = α·op(A)·op(B) + β·C on Eigen blocks, routed per shape to the faster of two kernels measured
// on this machine (tests/bench/README.md, "GEMM per shape"):
//   - OpenBLAS's cblas_sgemm (Debian's OpenMP build, libopenblas0-openmp, whose DYNAMIC_ARCH
//     picks the CPU's best kernel at start-up, e.g. Cooperlake on AVX-512 BF16 CPUs) for products
//     of at least kGemmBlasMinRows output rows: 175-187 GFLOP/s per core on the training and
//     batched-decoding shapes, against 113-139 for Eigen 3.4's GEMM;
//   - Eigen's own product below that (a decoding step of one sentence or a small beam): Eigen's
//     GEMV reads the weights once at 20-40 GFLOP/s where OpenBLAS's GEMM at m = 1 reaches 2-7;
//     outside a parallel region its output columns are split across the threads (each thread
//     reads its own share of the weights).
// Threads: one OpenMP pool for the whole process, and OpenBLAS always single-threaded inside it.
// Called outside a parallel region, a large product's rows are split across omp_get_max_threads()
// threads (one fork/join per product; each block one OpenBLAS call, so results are deterministic
// for a thread count); inside one of anuvad's parallel regions (attention per sentence and head,
// decoding row blocks) it runs on the calling thread. OpenBLAS's own threading was measured 4x
// slower for training whenever another process shared the cores (its threads spin-wait for each
// other inside every product). Each Eigen call is single-threaded.
#pragma once

#include <string>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Output rows from which a product goes to OpenBLAS rather than Eigen (crossover measured at
/// 12-16 rows for d_model 256-512 on Zen 4; below it Eigen's product is as fast or faster).
inline constexpr Index kGemmBlasMinRows = 16;

/// Multiply-adds (m·n·k) from which an OpenBLAS product is split by rows across the threads
/// (about 10 µs of work; below it one fork/join costs more than it saves).
inline constexpr double kGemmSplitMinMultiplyAdds = 2097152.0;

/// Multiply-adds (m·n·k) from which a product below kGemmBlasMinRows rows, called outside a
/// parallel region, has C's columns split across the threads (Eigen on each block). One
/// fork/join costs about 6 µs on AMD EPYC family 26 (tests/bench/README.md, "int8 weights");
/// float32 cached greedy decoding at batch 1, 2 threads, 3 alternated rounds, tok/s with the
/// split from 32,768 / 262,144 multiply-adds: tiny 8,942-11,626 / 24,868-25,089, small
/// 2,464-2,670 / 3,154-3,472, base 306-386 / 346-399 (131,072 and 1,048,576: no better).
/// A decoder projection of d_model 256 at one row (65,536) stays on one thread.
inline constexpr double kGemmColumnSplitMinMultiplyAdds = 262144.0;

/// C = α·op(A)·op(B) + β·C, where op(X) = Xᵀ when the matching `trans_*` is true.
/// a: [m, k] (or [k, m] when trans_a), b: [k, n] (or [n, k] when trans_b), c: [m, n]; all
/// row-major blocks with unit inner stride (any outer stride: rows or columns of a larger matrix
/// are fine). β = 0 overwrites C without reading it (NaN in C does not propagate).
/// Throws ShapeError when the inner or outer dimensions do not match.
void gemm(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
          bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c);

/// The kernels gemm() runs, for logs, `--version` and benchmarks, e.g.
/// "OpenBLAS 0.3.21 (OpenMP, core Cooperlake) for >= 16 rows, Eigen 3.4.0 below"; the core is
/// followed by ", forced by OPENBLAS_CORETYPE" when gemm_forced_core() is not empty.
std::string gemm_backend();

/// The value of the OPENBLAS_CORETYPE environment variable when it is set (OpenBLAS then runs
/// that kernel, read once when the library loads, instead of its own choice for this CPU), else
/// "". On an AVX-512 CPU a forced Haswell kernel trains the default model ~1.5x slower.
std::string gemm_forced_core();

}  // namespace anuvad
