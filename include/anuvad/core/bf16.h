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
#include <string>
#include <vector>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Precision in which translation reads its weight matrices (CTranslate2's compute_type);
/// kAuto picks one per model (auto_compute_type). Training always runs in float32.
enum class ComputeType { kFloat32, kBfloat16, kAuto };

/// "float32", "bfloat16" or "auto" → that ComputeType. Throws ConfigError naming the value
/// otherwise.
ComputeType parse_compute_type(const std::string& name);
/// The name parse_compute_type accepts: "float32", "bfloat16" or "auto".
std::string compute_type_name(ComputeType type);

/// float32 bytes of weight matrices from which "auto" picks bfloat16: about what the two cores'
/// L2 caches hold. Measured (README "Speed"): models of 26 MB and more translate 1.5-2.3x
/// faster in bfloat16; a 1.2 MB one (d_model 64) decodes batches slower (112k vs 139k tok/s)
/// and the 4 MB default preset equally fast, so those stay float32.
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
uint16_t float_to_bf16(float x);
/// The float32 with `h` as its upper 16 bits (exact: every bfloat16 is a float32).
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  static_assert(sizeof f == sizeof bits);
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
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
  bool empty() const { return data.empty(); }
  const uint16_t* row(Index r) const { return data.data() + r * cols; }
};

/// w [rows, cols] rounded element-wise with float_to_bf16. Never throws (but bad_alloc).
Bf16Matrix to_bf16(const Eigen::Ref<const Mat>& w);
/// The float32 values of w [rows, cols] (exact widening).
Mat from_bf16(const Bf16Matrix& w);

/// The code paths of bf16_affine: kAuto picks the last one compiled (AVX-512 BF16 dot products,
/// then AVX-512F, then AVX2 with FMA, then scalar C++); the others are for tests and
/// benchmarks. kAvx512Bf16 rounds the activations to bfloat16 (the others keep them float32).
enum class Bf16Kernel { kAuto, kScalar, kAvx2, kAvx512, kAvx512Bf16 };
/// The paths compiled into this build (kScalar always; kAvx2 under __AVX2__ and __FMA__;
/// kAvx512 under __AVX512F__; kAvx512Bf16 under __AVX512BF16__), narrowest first.
std::vector<Bf16Kernel> bf16_kernels_compiled();
/// "avx512bf16", "avx512", "avx2" or "scalar"; kAuto names the path it picks.
std::string bf16_kernel_name(Bf16Kernel kernel);
/// The path named `name` (a bf16_kernel_name, or "auto"). Throws ConfigError naming `name` when
/// it is unknown or not compiled into this build.
Bf16Kernel parse_bf16_kernel(const std::string& name);
/// Makes kAuto stand for `kernel` in this process (kAuto: the widest again), for benchmarks that
/// compare the paths inside the same program (anuvad_bench --bf16-kernel). Throws ConfigError
/// when `kernel` is not compiled into this build.
void set_bf16_auto_kernel(Bf16Kernel kernel);

/// Multiply-adds (m·n·k) from which bf16_affine, called outside a parallel region, splits its
/// output columns across the OpenMP threads (a fork/join costs a few µs; one decoder
/// projection of d_model 256 at one row is 65,536).
inline constexpr double kBf16SplitMinMultiplyAdds = 32768.0;

/// Rows bf16_affine multiplies per pass: it keeps an interleaved float32 copy of that many rows
/// of x per calling thread (at k = d_ff 2048: 2 MiB), whatever m is (scoring a long batch).
inline constexpr Index kBf16MaxRowsPerCall = 256;

/// y = x·Wᵀ + b with bfloat16 weights: x [m, k] float32 activations, w [n, k] (a Linear weight
/// [out, in]), bias [1, n] (or empty: no bias), y [m, n] overwritten; x and y row-major blocks
/// with unit inner stride (rows of larger matrices are fine). Each output is a float32 sum over
/// k of x·widen(w) (kAvx512Bf16: bf16(x)·widen(w)), in the same order for every m and thread
/// count (AVX-512 paths: 16 partial sums; AVX2: 8; scalar: 1), so a row's result does not
/// depend on the other rows. Called outside a parallel region with at least
/// kBf16SplitMinMultiplyAdds multiply-adds, the output columns are split across
/// omp_get_max_threads() threads (one fork/join: core/gemm.h's one-pool scheme); inside one of
/// anuvad's parallel regions it runs on the calling thread. Used for every row count (so a
/// row's result never depends on its batch): on the base decoder's products, one thread, it
/// made 16 GMAC/s at 1 row (float32 Eigen GEMV: 7.4), 21 at 4 rows, and 50 at 32 rows (a
/// thread's share of batch 64), against 43 for float32 OpenBLAS and 29 for widening 128-column
/// blocks of W to float32 for OpenBLAS (tests/bench/README.md, "bfloat16 weights"). Throws
/// ShapeError on a size mismatch, ConfigError for a kernel not compiled into this build.
void bf16_affine(const Eigen::Ref<const Mat>& x, const Bf16Matrix& w, const Mat& bias,
                 Eigen::Ref<Mat> y, Bf16Kernel kernel = Bf16Kernel::kAuto);

}  // namespace anuvad
