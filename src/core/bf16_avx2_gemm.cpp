// The AVX2 GEMM path of bf16_affine (Bf16Kernel::kAvx2Gemm, bf16_avx2_gemm.h): bfloat16 weight
// rows widened and transposed into float32 panels, multiplied by tiles of 6 activation rows.
#include "bf16_avx2_gemm.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace anuvad::detail {
namespace {

/// panel [k, 16] (row-major) = the `cols` (≤ 16) weight rows w [cols, k] (stride k) widened to
/// float32 and transposed, columns from `cols` on zero: 8×8 blocks widened and transposed in
/// registers (8 unpacks, 8 shuffles, 8 lane permutes per 64 values), the k mod 8 tail one by one.
void pack_panel(const uint16_t* w, Index k, Index cols, float* panel) {
  Index i = 0;
  if (cols == kBf16GemmPanel) {
    for (; i + 8 <= k; i += 8)
      for (int half = 0; half < 2; ++half) {
        __m256 r[8];
        for (int j = 0; j < 8; ++j) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + (8 * half + j) * k + i));
          r[j] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
        }
        const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
        const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
        const __m256 s[8] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                             _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE),
                             _mm256_shuffle_ps(t4, t6, 0x44), _mm256_shuffle_ps(t4, t6, 0xEE),
                             _mm256_shuffle_ps(t5, t7, 0x44), _mm256_shuffle_ps(t5, t7, 0xEE)};
        for (int j = 0; j < 4; ++j) {  // s[j] holds k-offsets j (low lane) and j + 4 (high lane)
          float* out = panel + (i + j) * kBf16GemmPanel + 8 * half;
          _mm256_storeu_ps(out, _mm256_permute2f128_ps(s[j], s[j + 4], 0x20));
          _mm256_storeu_ps(out + 4 * kBf16GemmPanel, _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
        }
      }
  }
  for (; i < k; ++i)
    for (Index j = 0; j < kBf16GemmPanel; ++j)
      panel[i * kBf16GemmPanel + j] = j < cols ? bf16_to_float(w[j * k + i]) : 0.0f;
}

/// y[r, 0..cols) = bias[0..cols) + Σ_i x[r, i]·panel[i, 0..cols) (bias nullptr: 0) for R ≤ 6
/// rows of x (stride ldx): 2R accumulators of 8 columns (named, so that they stay in registers),
/// one broadcast of x and two FMAs per row and k; each output's sum in the order of k, as
/// kScalar's, then the bias added (the same bits as adding the sum to y = bias). y is only
/// written: no pass beforehand, no read of its lines here (they had left the cache by then for
/// the wide products: 2 MB of logits at batch 64).
template <int R>
void gemm_tile(const float* x, Index ldx, const float* panel, Index k, const float* bias, float* y,
               Index ldy, Index cols) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
         a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  const float* x0 = x;
  const float* x1 = x + std::min(R - 1, 1) * ldx;
  const float* x2 = x + std::min(R - 1, 2) * ldx;
  const float* x3 = x + std::min(R - 1, 3) * ldx;
  const float* x4 = x + std::min(R - 1, 4) * ldx;
  const float* x5 = x + std::min(R - 1, 5) * ldx;
  for (Index i = 0; i < k; ++i) {
    const __m256 w0 = _mm256_loadu_ps(panel + i * kBf16GemmPanel);
    const __m256 w1 = _mm256_loadu_ps(panel + i * kBf16GemmPanel + 8);
#define ANUVAD_GEMM_ROW(r)                                \
  if constexpr (R > r) {                                  \
    const __m256 xv = _mm256_broadcast_ss(x##r + i);      \
    a##r##0 = _mm256_fmadd_ps(xv, w0, a##r##0);           \
    a##r##1 = _mm256_fmadd_ps(xv, w1, a##r##1);           \
  }
    ANUVAD_GEMM_ROW(0) ANUVAD_GEMM_ROW(1) ANUVAD_GEMM_ROW(2)
    ANUVAD_GEMM_ROW(3) ANUVAD_GEMM_ROW(4) ANUVAD_GEMM_ROW(5)
#undef ANUVAD_GEMM_ROW
  }
  const __m256 acc[6][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}};
  if (cols == kBf16GemmPanel) {
    const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(y + r * ldy, _mm256_add_ps(b0, acc[r][0]));
      _mm256_storeu_ps(y + r * ldy + 8, _mm256_add_ps(b1, acc[r][1]));
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float sums[kBf16GemmPanel];
    _mm256_store_ps(sums, acc[r][0]);
    _mm256_store_ps(sums + 8, acc[r][1]);
    for (Index c = 0; c < cols; ++c) y[r * ldy + c] = (bias ? bias[c] : 0.0f) + sums[c];
  }
}

}  // namespace

void avx2_gemm_columns(const float* x, Index ldx, Index m, const Bf16Matrix& w, const float* bias,
                       float* y, Index ldy, Index c0, Index c1, float* scratch) {
  const Index k = w.cols;
  const Index panel_lines = kBf16GemmPanel * k * Index(sizeof(uint16_t)) / 64, tiles = (m + 5) / 6;
  const Index lines_per_tile = (panel_lines + tiles - 1) / tiles;
  for (Index c = c0; c < c1; c += kBf16GemmPanel) {
    const Index cols = std::min(kBf16GemmPanel, c1 - c);
    const float* bc = bias ? bias + c : nullptr;
    pack_panel(w.row(c), k, cols, scratch);
    // The next panel's weights (contiguous rows) fetched into L2 a share per tile, while the
    // tiles compute: pack_panel then reads them from L2, not from memory.
    const char* next = reinterpret_cast<const char*>(w.row(std::min(c + kBf16GemmPanel, c1 - 1)));
    const Index next_lines = c + kBf16GemmPanel < c1 ? panel_lines : 0;
    Index r = 0, line = 0;
    for (; r + 6 <= m; r += 6) {
      for (const Index end = std::min(next_lines, line + lines_per_tile); line < end; ++line)
        _mm_prefetch(next + 64 * line, _MM_HINT_T1);
      gemm_tile<6>(x + r * ldx, ldx, scratch, k, bc, y + r * ldy + c, ldy, cols);
    }
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy + c;
    switch (m - r) {
      case 5: gemm_tile<5>(xr, ldx, scratch, k, bc, yr, ldy, cols); break;
      case 4: gemm_tile<4>(xr, ldx, scratch, k, bc, yr, ldy, cols); break;
      case 3: gemm_tile<3>(xr, ldx, scratch, k, bc, yr, ldy, cols); break;
      case 2: gemm_tile<2>(xr, ldx, scratch, k, bc, yr, ldy, cols); break;
      case 1: gemm_tile<1>(xr, ldx, scratch, k, bc, yr, ldy, cols); break;
      default: break;
    }
  }
}

}  // namespace anuvad::detail
#endif
