// The AVX2 GEMM path of bf16_affine (include/anuvad/core/bf16.h, Bf16Kernel::kAvx2Gemm): the
// batched bfloat16 products of a CPU with AVX2 and FMA but no AVX-512 BF16. Per kBf16GemmPanel
// weight rows, the bfloat16 values are widened and transposed into a float32 panel [k, 16] (in
// L1/L2), which tiles of 6 activation rows × 16 columns of FMA accumulators then multiply; each
// output summed in the order of k, as the scalar path sums it (the same bits). Private to src/core.
#pragma once

#include "anuvad/core/bf16.h"

namespace anuvad::detail {

#if defined(__AVX2__) && defined(__FMA__)
/// y[r, c] = bias[c] + Σ_i x[r, i]·widen(w[c, i]) (bias [n] or nullptr: 0) for the m rows of
/// x [m, k] (row stride ldx, read as it is) and the output columns c0 ≤ c < c1 of y (row stride
/// ldy; only written, never read); w [n, k] row-major bfloat16 (w.data must hold it: not a
/// oneDNN-only matrix). `scratch`: kBf16GemmPanel·k floats of the calling thread's own.
/// Allocates nothing, never throws.
void avx2_gemm_columns(const float* x, Index ldx, Index m, const Bf16Matrix& w, const float* bias,
                       float* y, Index ldy, Index c0, Index c1, float* scratch);
#endif

}  // namespace anuvad::detail
