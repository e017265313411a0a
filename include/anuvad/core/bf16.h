// bfloat16 weight storage and the product that reads it (issue #15): a decoding step of one
// sentence reads every decoder and output-projection weight once and is bound by memory
// bandwidth, so storing those weights as bfloat16 (the upper 16 bits of a float32: sign, 8-bit
// exponent, 7 stored mantissa bits) halves the bytes a step reads. Sums stay float32. On a CPU
// with AVX-512 BF16 (a build with -march=native there) the activations of each product are
// rounded to bfloat16 too and multiplied by the VDPBF16PS dot-product instruction, 32
// multiply-adds per instruction, as oneDNN's and CTranslate2's bfloat16 GEMMs do; elsewhere each
// weight is widened exactly (shifted left by 16 bits) and multiplied-added with float32
// activations, and only the rounding of the weights changes results.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Precision in which translation reads its weight matrices (CTranslate2's compute_type);
/// kAuto picks one per model (auto_compute_type; never kInt8). kInt8 is core/int8.h's
/// per-row quantization. Training always runs in float32.
enum class ComputeType { kFloat32, kBfloat16, kAuto, kInt8 };

/// "float32", "bfloat16", "int8" or "auto" → that ComputeType. Throws ConfigError naming the
/// value otherwise.
ComputeType parse_compute_type(const std::string& name);
/// The name parse_compute_type accepts: "float32", "bfloat16", "int8" or "auto".
std::string compute_type_name(ComputeType type);

/// float32 bytes of weight matrices from which "auto" picks bfloat16: about what the two cores'
/// L2 caches hold. Measured when chosen (2026-12-01, Zen 4): models of 26 MB and more
/// translated 1.5-2.3x faster in bfloat16; a 1.2 MB one (d_model 64) decoded batches slower
/// (112k vs 139k tok/s) and the 4 MB default preset equally fast, so those stay float32. On a
/// Zen 5 with AVX-512 BF16 (2026-12-07, README "Speed", both parts of the run): 26 MB (the
/// bench's small) 1.8-2.4x, base 2.3-2.6x, the 1.2 MB tiny 0.82-1.26x.
inline constexpr int64_t kBf16AutoMinWeightBytes = int64_t(8) << 20;
/// What kAuto stands for for a model whose weight matrices (those set_compute_type converts)
/// take `weight_bytes` bytes in float32: kBfloat16 when bf16_affine has a vector path in this
/// build (AVX2, AVX-512 or AVX-512 BF16) and weight_bytes ≥ kBf16AutoMinWeightBytes,
/// kFloat32 otherwise (a portable build's scalar bfloat16 path is slower than float32).
ComputeType auto_compute_type(int64_t weight_bytes);

/// x rounded to bfloat16, round-to-nearest-even on the 16 dropped bits (as torch's and
/// CTranslate2's conversions): the upper 16 bits of the rounded float32. ±Inf stays ±Inf,
/// NaN stays NaN (quieted, sign kept), values from halfway between the largest
/// finite bfloat16 and the next power of two up round to ±Inf (as every rounding to nearest).
/// Inline: the loops that round rows of activations vectorise it.
inline uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN, quieted
  u += 0x7fffu + ((u >> 16) & 1u);  // round half to even on the dropped 16 bits
  return uint16_t(u >> 16);
}
/// out[r·k + i] = float_to_bf16(x[r·ldx + i]) for the rows r0 ≤ r < r1 of x [·, k] (row
/// stride ldx): the activations of the bfloat16 dot-product paths. out holds rows of k values.
inline void round_rows_to_bf16(const float* x, Index ldx, Index r0, Index r1, Index k, uint16_t* out) {
  for (Index r = r0; r < r1; ++r)
    for (Index i = 0; i < k; ++i) out[r * k + i] = float_to_bf16(x[r * ldx + i]);
}
/// The float32 with `h` as its upper 16 bits (exact: every bfloat16 is a float32).
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  static_assert(sizeof f == sizeof bits);
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

namespace detail {
struct OnednnWeights;  // core/bf16_onednn.h: oneDNN's packed copy of a Bf16Matrix, made on first use
}

/// A row-major [rows, cols] matrix of bfloat16 values (uint16 upper halves of float32):
/// Linear weights [out, in], as Mat holds them in float32.
struct Bf16Matrix {
  Index rows = 0;
  Index cols = 0;
  /// rows·cols values, row r at r·cols; aligned to EIGEN_MAX_ALIGN_BYTES (64 in an AVX-512
  /// build: a 512-bit load of a row whose length is a multiple of 32 never straddles two cache
  /// lines; the kernels load unaligned, so correctness never depends on it)
  std::vector<uint16_t, Eigen::aligned_allocator<uint16_t>> data;
  /// Set by to_bf16 where the oneDNN path is available (else null): the weights in the blocked
  /// layout oneDNN's matmul reads, packed by the first product of kOnednnMinRows or more rows
  /// (thread-safe), so a model that only ever decodes single sentences never holds the copy.
  /// Copies of the matrix share it; it is never written after packing.
  std::shared_ptr<detail::OnednnWeights> onednn;
  /// No matrix (rows or cols 0). `data` alone may be empty after pack_for_onednn_only.
  bool empty() const { return rows == 0 || cols == 0; }
  /// Row r of the row-major values; not for a matrix packed by pack_for_onednn_only.
  const uint16_t* row(Index r) const { return data.data() + r * cols; }
};

/// w [rows, cols] rounded element-wise with float_to_bf16. Never throws (but bad_alloc).
Bf16Matrix to_bf16(const Eigen::Ref<const Mat>& w);
/// The float32 values of w [rows, cols] (exact widening; from oneDNN's copy when packed only).
Mat from_bf16(const Bf16Matrix& w);
/// For weights multiplied once per sentence (the encoder's, the cross-attention K/V
/// projections: on the sentence's source rows, where oneDNN's per-call cost does not matter):
/// when bf16_affine's kAuto uses oneDNN (available, and no set_bf16_auto_kernel choice), packs
/// w for oneDNN now and frees its row-major copy, so every product by it runs on oneDNN,
/// whatever its row count, and the model holds it once (base: 38 MB less than both copies).
/// A no-op otherwise. Never throws but bad_alloc (ConfigError if oneDNN fails).
void pack_for_onednn_only(Bf16Matrix& w);

/// The code paths of bf16_affine. kAuto picks, for products of kOnednnMinRows rows or more,
/// kOnednn where available; else, for products of kBf16BlasMinRows rows or more, kAvx2Gemm where
/// the widest own path is kAvx2, kBlas unless it is kAvx512Bf16; and otherwise the widest of anuvad's own paths compiled
/// (AVX-512 BF16 dot products, then AVX-512F, then AVX2 with FMA, then scalar C++); the others
/// are for tests and benchmarks. kAvx512Bf16 and kOnednn round the activations to bfloat16 (the
/// others keep them float32); kAvx512Bf16 multiplies one row (a batch-1 step) by 8 weight rows
/// at a time, prefetching the next 8, and more rows in tiles of 4 × 4, with the same bits per
/// row either way. kOnednn is oneDNN's matmul (its "brgemm" AVX-512 BF16 kernels) on
/// weights it packed itself (Bf16Matrix::onednn). kBlas widens the weights, a chunk of rows at a
/// time, to float32 (exactly) in a per-thread buffer of about kBf16BlasChunkBytes and multiplies
/// each chunk with OpenBLAS's float32 GEMM (core/gemm.h's library), as fast per row as a float32
/// product once the rows amortise the widening. kAvx2Gemm (the batched path of an AVX2-only CPU)
/// widens and transposes kBf16GemmPanel weight rows at a time into a float32 panel [k, 16] and
/// multiplies it by the rows of x in tiles of 6 rows × 16 columns of FMA accumulators, each sum
/// in the order of k: the same bits as kScalar, without OpenBLAS's second packing of the widened
/// weights and its packing of x per chunk.
enum class Bf16Kernel { kAuto, kScalar, kAvx2, kAvx512, kAvx512Bf16, kBlas, kOnednn, kAvx2Gemm };
/// The paths available in this build on this CPU, narrowest first: kScalar always; kAvx2 under
/// __AVX2__ and __FMA__ (kAvx2Gemm after it); kAvx512 under __AVX512F__; kAvx512Bf16 under __AVX512BF16__; kBlas
/// always; kOnednn last when the build links oneDNN (ANUVAD_ONEDNN) and oneDNN finds AVX-512
/// BF16 on this CPU.
std::vector<Bf16Kernel> bf16_kernels_compiled();
/// The widest of anuvad's own paths in bf16_kernels_compiled() (kAvx512Bf16, kAvx512, kAvx2 or
/// kScalar; the batched paths kBlas, kAvx2Gemm and kOnednn aside). With no set_bf16_auto_kernel
/// choice, kAuto runs it on products below kOnednnMinRows / kBf16BlasMinRows rows (kAvx512Bf16:
/// at every row count where oneDNN is absent), except for weights packed by
/// pack_for_onednn_only. Never throws (but bad_alloc, once).
Bf16Kernel bf16_widest_own_kernel();
/// Whether bf16_kernels_compiled() holds kOnednn.
bool bf16_onednn_available();
/// Rows from which kAuto hands a product to oneDNN (when available): below them anuvad's own
/// kernels were faster or equal on the small and base shapes (1 row: 34 vs 24 GFLOP/s at
/// 256×256; 4 rows: 61-157 vs 73-312), from them on oneDNN was 1.2-2.6x faster.
inline constexpr Index kOnednnMinRows = 4;
/// Rows from which kAuto runs a product on kAvx2Gemm or kBlas where oneDNN is not available and
/// the widest own path widens the weights (kAvx2, kAvx512, kScalar). On AMD EPYC family 25 (Zen 3, AVX2 only),
/// 2 threads, cached greedy decoding at batch 64 ran 1.5x slower in bfloat16 on the own AVX2
/// path than in float32 on OpenBLAS (base 1,043 against 1,513 tok/s); the crossover is that of
/// float32 products (kGemmBlasMinRows, core/gemm.h).
inline constexpr Index kBf16BlasMinRows = 16;
/// Bytes of the per-thread float32 buffer kBlas widens a chunk of weight rows into (a multiple of
/// 16 rows, at least 16 and at most 256): it stays in the core's L2 cache while OpenBLAS packs it.
inline constexpr Index kBf16BlasChunkBytes = Index(256) << 10;
/// Weight rows (output columns) kAvx2Gemm widens into one panel: two ymm vectors of 8 floats.
inline constexpr Index kBf16GemmPanel = 16;
/// "onednn", "openblas" (kBlas), "avx2gemm", "avx512bf16", "avx512", "avx2" or "scalar"; kAuto
/// names the paths it picks, e.g. "onednn+avx512bf16" (oneDNN from kOnednnMinRows rows, the own
/// path below), "avx2gemm+avx2" (kAvx2Gemm from kBf16BlasMinRows rows) or "openblas+avx512".
std::string bf16_kernel_name(Bf16Kernel kernel);
/// The path named `name` (a bf16_kernel_name, or "auto"). Throws ConfigError naming `name` when
/// it is unknown or not compiled into this build.
Bf16Kernel parse_bf16_kernel(const std::string& name);
/// Makes kAuto stand for `kernel` in this process (kAuto: the widest again), for benchmarks that
/// compare the paths inside the same program (anuvad_bench --bf16-kernel). Throws ConfigError
/// when `kernel` is not compiled into this build.
void set_bf16_auto_kernel(Bf16Kernel kernel);

/// Multiply-adds (m·n·k) from which bf16_affine, called outside a parallel region, splits its
/// output columns across the OpenMP threads. A fork/join costs about 6 µs on AMD EPYC family 26;
/// bfloat16 cached greedy decoding at batch 1 there, 2 threads, 3 alternated rounds, tok/s with
/// the split from 32,768 / 262,144 multiply-adds: tiny 10,971-31,550 / 16,948-36,827, small
/// 3,991-4,144 / 4,583-5,441, base 744-760 / 676-756 (131,072 and 1,048,576: no better).
inline constexpr double kBf16SplitMinMultiplyAdds = 262144.0;
/// The same on a StepTeam (core/step_team.h: a batch-1 decoding step), where handing a column
/// range to the other thread cost ~0.7 µs when measured (0.45-0.6 µs since the one-line
/// hand-off of 2026-12-07; 65,536 then still no better in 12 alternated rounds, within this
/// host's noise) rather than a fork/join: small's self-attention projections (196,608) split
/// too. Small, bfloat16 cached greedy at batch 1, 2 threads, 14 alternated rounds against
/// 262,144: faster in 10, median 6,273 against 6,107 tok/s in the last 8 (65,536: 5,052
/// against 4,931 in 6 rounds, behind 131,072's 5,978).
inline constexpr double kBf16TeamSplitMinMultiplyAdds = 131072.0;

/// Rows bf16_affine multiplies per pass: it keeps an interleaved float32 copy of that many rows
/// of x per calling thread (at k = d_ff 2048: 2 MiB), whatever m is (scoring a long batch).
inline constexpr Index kBf16MaxRowsPerCall = 256;

/// y = x·Wᵀ + b with bfloat16 weights: x [m, k] float32 activations, w [n, k] (a Linear weight
/// [out, in]), bias [1, n] (or empty: no bias), y [m, n] overwritten; x and y row-major blocks
/// with unit inner stride (rows of larger matrices are fine). Each output is a float32 sum over
/// k of x·widen(w) (kAvx512Bf16, kOnednn: bf16(x)·widen(w)). anuvad's own paths sum in the same
/// order for every m and thread count (AVX-512: 16 partial sums; AVX2: 8; scalar: 1), so on
/// them a row's result does not depend on the other rows; kAuto runs products of
/// kOnednnMinRows rows or more on oneDNN where available (elsewhere kBf16BlasMinRows rows or
/// more on kBlas; kAvx2Gemm sums as kScalar does, which kAvx2's 8 partial sums do not), so there
/// a sentence's numbers in a batch can differ in the last bits from the
/// same sentence alone (as float32 products of 16 rows or more run on OpenBLAS, core/gemm.h).
/// Called outside a parallel region with at least kBf16SplitMinMultiplyAdds multiply-adds, the
/// own paths, kAvx2Gemm and kBlas (OpenBLAS single-threaded per column range) split the output columns across
/// omp_get_max_threads() threads (one fork/join: core/gemm.h's one-pool scheme) and oneDNN
/// runs on as many (its OpenMP build shares the pool); on the caller's StepTeam the own paths
/// split from kBf16TeamSplitMinMultiplyAdds across the team; inside one of anuvad's parallel
/// regions either runs on the calling thread. On the base decoder's products, one thread, the own
/// AVX-512 BF16 path made (2026-12-01, before its one-row kernel) 16 GMAC/s at 1 row (float32
/// Eigen GEMV: 7.4), 21 at 4 rows, and 50 at 32 rows, against 43 for float32 OpenBLAS
/// (tests/bench/README.md, "bfloat16 weights"); oneDNN made 1.4-1.9x the own path's rate at
/// 4-256 rows (2 threads). Throws ShapeError on a size
/// mismatch, ConfigError for a kernel not available in this build.
void bf16_affine(const Eigen::Ref<const Mat>& x, const Bf16Matrix& w, const Mat& bias,
                 Eigen::Ref<Mat> y, Bf16Kernel kernel = Bf16Kernel::kAuto);

}  // namespace anuvad
