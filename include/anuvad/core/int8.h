// int8 weight storage and the product that reads it (issue #15, `--compute-type int8`): a
// decoding step of one sentence reads every decoder and output-projection weight once and is
// bound by memory bandwidth; int8 weights are half the bytes of bfloat16 ones (base: 26 MB per
// step instead of 52 MB). The scheme is CTranslate2's and oneDNN's "u8s8" one:
//   - each weight row w_c (a Linear weight [out, in]: one output feature) is quantized
//     symmetrically, q_c = round(w_c / s_c) in [-127, 127] with s_c = max|w_c| / 127;
//   - each activation row x_r is quantized when the product runs, the same way (s_r = max|x_r| /
//     127), then shifted by +128 to an unsigned byte u_r = round(x_r / s_r) + 128 in [1, 255],
//     which the AVX-512 VNNI instruction VPDPBUSD multiplies by the signed weights, 64
//     multiply-adds per instruction, summing in int32;
//   - y[r, c] = s_r·s_c·(Σ_i u_r[i]·q_c[i] − 128·Σ_i q_c[i]) + b[c].
// The integer sums are exact, so every path (VNNI and scalar) gives the same bits, whatever the
// thread count or the other rows of the product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Columns of an Int8Matrix row are stored padded with zeros to a multiple of this (one 512-bit
/// load of 64 bytes).
inline constexpr Index kInt8Block = 64;

/// A [rows, cols] matrix quantized per row to int8 (Linear weights [out, in]).
struct Int8Matrix {
  Index rows = 0;
  Index cols = 0;
  /// Bytes from one row to the next: cols rounded up to kInt8Block (the padding is zero).
  Index stride = 0;
  /// rows·stride quantized values q, row r at r·stride, in [-127, 127].
  std::vector<int8_t, Eigen::aligned_allocator<int8_t>> data;
  /// [rows] scale s_r of each row: its values are q·s_r (max|w_r| / 127; 1 for an all-zero row).
  std::vector<float> scale;
  /// [rows] Σ_i q[r, i], for the +128 shift of the activations.
  std::vector<int32_t> row_sum;
  /// No matrix (rows or cols 0).
  bool empty() const { return rows == 0 || cols == 0; }
  /// The quantized values of row r (stride values, the last stride − cols zero).
  const int8_t* row(Index r) const { return data.data() + r * stride; }
};

/// w [rows, cols] quantized row by row as above (round half away from zero). Throws ShapeError
/// when w holds a NaN or an infinity (its row's scale would be meaningless), naming the row.
Int8Matrix to_int8(const Eigen::Ref<const Mat>& w);
/// The float32 values q·s of w [rows, cols] (what the int8 weights stand for).
Mat from_int8(const Int8Matrix& w);

/// The code paths of int8_affine: kAuto is the widest compiled; kScalar is plain C++ (any
/// build); kAvx512Vnni needs a build with AVX-512 VNNI (-march=native on such a CPU: Intel
/// Cascade Lake and later, AMD Zen 4 and later). All give identical results.
enum class Int8Kernel { kAuto, kScalar, kAvx512Vnni };
/// The paths compiled into this build, narrowest first (kScalar always).
std::vector<Int8Kernel> int8_kernels_compiled();
/// "scalar" or "avx512vnni"; kAuto names the path it stands for.
std::string int8_kernel_name(Int8Kernel kernel);

/// Multiply-adds (m·n·k) from which int8_affine, called outside a parallel region, splits its
/// output columns across the OpenMP threads (as bf16_affine, core/bf16.h).
inline constexpr double kInt8SplitMinMultiplyAdds = 32768.0;

/// y = x·Wᵀ + b with int8 weights and activations quantized per row (see the top of this file):
/// x [m, k] activations, w [n, k] (a Linear weight [out, in]), bias [1, n] (or empty: no bias),
/// y [m, n] overwritten; x and y row-major blocks with unit inner stride. A row of x whose
/// largest magnitude is 0 gives the bias. Each row's result depends only on that row (exact
/// integer sums), on every path and thread count. Called outside a parallel region with at least
/// kInt8SplitMinMultiplyAdds multiply-adds, the output columns are split across
/// omp_get_max_threads() threads; inside one it runs on the calling thread. Throws ShapeError on
/// a size mismatch, ConfigError for a kernel not compiled into this build.
void int8_affine(const Eigen::Ref<const Mat>& x, const Int8Matrix& w, const Mat& bias,
                 Eigen::Ref<Mat> y, Int8Kernel kernel = Int8Kernel::kAuto);

}  // namespace anuvad
