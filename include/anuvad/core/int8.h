// int8 weight storage and the product that reads it (issue #15, `--compute-type int8`): a
// decoding step of one sentence reads every decoder and output-projection weight once and is
// bound by memory bandwidth; int8 weights are half the bytes of bfloat16 ones (base: 26 MB per
// step instead of 52 MB). The scheme is CTranslate2's and oneDNN's "u8s8" one:
//   - each weight row w_c (a Linear weight [out, in]: one output feature) is quantized
//     symmetrically, q_c = round(w_c / s_c) in [-127, 127] with s_c = max|w_c| / 127;
//   - each activation row x_r is quantized when the product runs, the same way (s_r = max|x_r| /
//     127), then shifted by +128 to an unsigned byte u_r = round(x_r / s_r) + 128 in [1, 255],
//     which the AVX-512 VNNI instruction VPDPBUSD multiplies by the signed weights, 64
//     multiply-adds per instruction, summing in int32 (without VNNI, AVX2's VPMADDUBSW on
//     |u − 128| and the weights times sign(u − 128), as ggml's mul_sum_i8_pairs_float: 32 per
//     instruction, exact int16 pair sums, then VPMADDWD into int32);
//   - y[r, c] = s_r·s_c·(Σ_i u_r[i]·q_c[i] − 128·Σ_i q_c[i]) + b[c].
// The integer sums are exact, so every path (VNNI, AVX2 and scalar) gives the same bits, whatever the
// thread count or the other rows of the product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Output features (weight rows) per panel of an Int8Matrix: one 512-bit vector of int32 sums.
inline constexpr Index kInt8Panel = 16;

/// A [rows, cols] matrix quantized per row to int8 (Linear weights [out, in]), stored in the
/// layout the VNNI kernel reads: panels of kInt8Panel rows (the last padded with zero rows),
/// each panel k-quad by k-quad: the 4 values cols 4t..4t+3 of its 16 rows, 64 bytes (cols padded
/// with zeros to a multiple of 4). A product streams each panel once, front to back.
struct Int8Matrix {
  Index rows = 0;
  Index cols = 0;
  /// panels·kInt8Panel·padded_cols() quantized values q in [-127, 127], in the layout above.
  std::vector<int8_t, Eigen::aligned_allocator<int8_t>> data;
  /// [rows] scale s_r of each row: its values are q·s_r (max|w_r| / 127; 1 for an all-zero row).
  std::vector<float> scale;
  /// [rows] Σ_i q[r, i], for the +128 shift of the activations.
  std::vector<int32_t> row_sum;
  /// No matrix (rows or cols 0).
  bool empty() const { return rows == 0 || cols == 0; }
  /// cols rounded up to a multiple of 4 (the padding values are zero).
  Index padded_cols() const { return (cols + 3) / 4 * 4; }
  /// Number of panels: rows / kInt8Panel rounded up.
  Index panels() const { return (rows + kInt8Panel - 1) / kInt8Panel; }
  /// The quantized value q[r, c] (c < padded_cols()).
  int8_t at(Index r, Index c) const {
    return data[size_t((r / kInt8Panel) * kInt8Panel * padded_cols() + (c / 4) * 4 * kInt8Panel +
                       (r % kInt8Panel) * 4 + c % 4)];
  }
};

/// w [rows, cols] quantized row by row as above (round half away from zero). Throws ShapeError
/// when w holds a NaN or an infinity (its row's scale would be meaningless), naming the row.
Int8Matrix to_int8(const Eigen::Ref<const Mat>& w);
/// The float32 values q·s of w [rows, cols] (what the int8 weights stand for).
Mat from_int8(const Int8Matrix& w);

/// The code paths of int8_affine: kAuto is the widest compiled; kScalar is plain C++ (any
/// build); kAvx2 needs a build with AVX2 (VPSIGNB + VPMADDUBSW + VPMADDWD: 32 exact products
/// per 3 instructions; AMD Zen 3 and other CPUs without VNNI); kAvx512Vnni needs a build with
/// AVX-512 VNNI (-march=native on such a CPU: Intel Cascade Lake and later, AMD Zen 4 and
/// later). All give identical results.
enum class Int8Kernel { kAuto, kScalar, kAvx2, kAvx512Vnni };
/// The paths compiled into this build, narrowest first (kScalar always).
std::vector<Int8Kernel> int8_kernels_compiled();
/// "scalar", "avx2" or "avx512vnni"; kAuto names the path it stands for.
std::string int8_kernel_name(Int8Kernel kernel);

/// Multiply-adds (m·n·k) from which int8_affine, called outside a parallel region, splits its
/// output panels across the OpenMP threads. Chosen by measurement (tests/bench/README.md, "int8
/// weights"; AMD EPYC family 26, 2 threads, where one fork/join costs about 6 µs): cached greedy
/// decoding at batch 1, tok/s, with the split from 32,768 / 262,144 / 1,572,864 multiply-adds:
/// small 4,908-5,091 / 5,917-8,059 / 6,296-9,321, base 918-1,582 / 966-1,364 / 667-1,075.
inline constexpr double kInt8SplitMinMultiplyAdds = 262144.0;

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
