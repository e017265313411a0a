// int8 quantization and the product x·Wᵀ on int8 weights (see include/anuvad/core/int8.h).
// Three paths compute the same exact int32 sums: plain C++; AVX2 (signed activations a = u − 128,
// VPSIGNB + VPMADDUBSW: 32 products |a|·(w·sign(a)) per instruction, summed 2 at a time into
// int16, exact because |a|, |w| ≤ 127 (u·w with u up to 255 would saturate), then VPMADDWD by 1
// into 8 int32 lanes); and AVX-512 VNNI (VPDPBUSD: 64 unsigned-by-signed byte products per
// instruction, summed 4 at a time into 16 int32 lanes).
#include "anuvad/core/int8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_* as the unused merge source of their masked
// builtins, which -Wuninitialized reports at every inlined use (as in bf16.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace anuvad {

namespace {

/// Largest k for which no int32 sum can overflow: |Σ u·q| ≤ k·255·127 < 2^31.
constexpr Index kInt8MaxCols = 65536;

/// The activations of one product: rows of x quantized to u8 (zero point 128), padded to the
/// weights' padded_cols, and each row's scale (NaN for a row holding a NaN or an infinity).
struct QuantizedRows {
  std::vector<uint8_t, Eigen::aligned_allocator<uint8_t>> u;  // [m, padded_cols]
  std::vector<float> scale;                                   // [m]
  std::vector<int8_t> a;       // [m, padded_cols]: u − 128 (AVX2 path)
  std::vector<uint8_t> a_abs;  // [m, padded_cols]: |u − 128| (AVX2 path)
};

/// u = nearbyint(x·(127/amax)) + 128 (round half to even) for `k` values of one row, and the
/// padding to `stride` with 128 (= 0); returns the row's scale amax/127 (NaN if not finite, 0
/// for an all-zero row, whose u are all 128).
template <class T>
float quantize_row(const T* x, Index k, Index stride, uint8_t* u) {
  const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> row(x, k);
  const bool finite = row.allFinite();  // vectorized, as the maximum below
  const float amax = finite && k > 0 ? static_cast<float>(row.abs().maxCoeff()) : 0.0f;
  // A row below 127/FLT_MAX (denormals) would scale by an infinity: taken as all-zero.
  if (!finite || !(amax > 0.0f) || !std::isfinite(127.0f / amax)) {
    std::fill(u, u + stride, uint8_t(128));
    return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const float inv = 127.0f / amax;
  Index i = 0;
#ifdef __AVX512F__
  if constexpr (std::is_same_v<T, float>) {
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i shift = _mm512_set1_epi32(128);
    for (; i + 16 <= k; i += 16) {  // cvtps rounds half to even, as nearbyint below
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(u + i), _mm512_cvtepi32_epi8(_mm512_add_epi32(q, shift)));
    }
  }
#elif defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i shift = _mm256_set1_epi32(128);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane split
    const auto quad = [&](Index at) {  // 8 values as int32 u in [1, 255]; cvtps rounds half to even
      return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + at), vinv)), shift);
    };
    for (; i + 32 <= k; i += 32) {
      const __m256i lo = _mm256_packus_epi32(quad(i), quad(i + 8));
      const __m256i hi = _mm256_packus_epi32(quad(i + 16), quad(i + 24));
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + i), bytes);
    }
  }
#endif
  for (; i < k; ++i) u[i] = uint8_t(int(std::nearbyint(static_cast<float>(x[i]) * inv)) + 128);
  std::fill(u + k, u + stride, uint8_t(128));
  return amax / 127.0f;
}

template <class T>
void quantize_rows(const T* x, Index ldx, Index m, Index k, Index stride, QuantizedRows& q) {
  q.u.resize(size_t(m * stride));
  q.scale.resize(size_t(m));
  for (Index r = 0; r < m; ++r) q.scale[size_t(r)] = quantize_row(x + r * ldx, k, stride, q.u.data() + r * stride);
}

/// The output of one row and column from its exact sum: one rounding of a·s + b (an explicit
/// FMA, as the vector path's, so both give the same bits).
template <class T>
inline T finish(int32_t sum, float x_scale, const Int8Matrix& w, Index c, const T* bias) {
  const float a = float(sum - 128 * w.row_sum[size_t(c)]);
  const float s = x_scale * w.scale[size_t(c)];
  if constexpr (std::is_same_v<T, float>) return std::fma(a, s, bias ? bias[c] : 0.0f);
  return static_cast<T>(a * s) + (bias ? bias[c] : T(0));
}

/// Output columns c0..c1 of m quantized rows, plain C++.
template <class T>
void scalar_columns(const QuantizedRows& q, Index m, const Int8Matrix& w, const T* bias, T* y,
                    Index ldy, Index c0, Index c1) {
  const Index k = w.padded_cols();
  for (Index r = 0; r < m; ++r) {
    const uint8_t* u = q.u.data() + r * k;
    for (Index c = c0; c < c1; ++c) {
      int32_t sum = 0;
      for (Index i = 0; i < k; ++i) sum += int32_t(u[i]) * int32_t(w.at(c, i));
      y[r * ldy + c] = finish(sum, q.scale[size_t(r)], w, c, bias);
    }
  }
}

#ifdef __AVX2__
/// The signed activations a = u − 128 in [-127, 127] of q's rows (q.a) and their magnitudes |a|
/// (q.a_abs), for avx2_tile.
void split_signs(QuantizedRows& q) {
  const size_t n = q.u.size();
  q.a.resize(n);
  q.a_abs.resize(n);
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.u.data() + i));
    const __m256i a = _mm256_xor_si256(u, flip);  // u − 128 as a signed byte
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.a.data() + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.a_abs.data() + i), _mm256_abs_epi8(a));
  }
  for (; i < n; ++i) {
    const int a = int(q.u[i]) - 128;
    q.a[i] = int8_t(a);
    q.a_abs[i] = uint8_t(std::abs(a));
  }
}

/// R rows × 1 panel (16 output columns) at panel p, as ggml's AVX2 mul_sum_i8_pairs_float: per
/// k-quad, the panel's 64 weight bytes in 2 vectors (8 columns × 4 values each), and per row
/// the broadcast 4 values a and |a|: VPSIGNB gives w·sign(a), VPMADDUBSW |a|·(w·sign(a)) = a·w
/// summed in pairs into int16 (exact: |pair| ≤ 2·127·127 < 2^15, where u·w with u up to 255
/// would saturate), VPMADDWD by 1 the pairs into int32 column sums Σ a·q = Σ u·q − 128·Σ q,
/// the centred sum finish() forms; the epilogue rounds as finish() does (same bits).
template <int R>
void avx2_tile(const int8_t* a, const uint8_t* a_abs, const float* x_scale, const Int8Matrix& w,
               Index p, const float* bias, float* y, Index ldy) {
  const Index k = w.padded_cols();
  const int8_t* wp = w.data.data() + p * kInt8Panel * k;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (Index i = 0; i < k; i += 4) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + i * kInt8Panel));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + i * kInt8Panel + 32));
    for (int r = 0; r < R; ++r) {
      int32_t quad, quad_abs;
      std::memcpy(&quad, a + r * k + i, sizeof quad);
      std::memcpy(&quad_abs, a_abs + r * k + i, sizeof quad_abs);
      const __m256i sv = _mm256_set1_epi32(quad), av = _mm256_set1_epi32(quad_abs);
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(w0, sv)), ones);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(w1, sv)), ones);
      acc[r][0] = _mm256_add_epi32(acc[r][0], p0);
      acc[r][1] = _mm256_add_epi32(acc[r][1], p1);
    }
  }
  const Index c0 = p * kInt8Panel, valid = std::min(kInt8Panel, w.rows - c0);
#ifdef __FMA__
  if (valid == kInt8Panel) {
    for (int j = 0; j < 2; ++j) {
      const __m256 ws = _mm256_loadu_ps(w.scale.data() + c0 + 8 * j);
      const __m256 b = bias ? _mm256_loadu_ps(bias + c0 + 8 * j) : _mm256_setzero_ps();
      for (int r = 0; r < R; ++r) {
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(x_scale[r]), ws);
        _mm256_storeu_ps(y + r * ldy + c0 + 8 * j, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][j]), s, b));
      }
    }
    return;
  }
#endif
  for (int r = 0; r < R; ++r) {  // a partial last panel (or no FMA): finish() on the uncentred sums
    alignas(32) int32_t sums[kInt8Panel];
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 8), acc[r][1]);
    for (Index c = 0; c < valid; ++c)
      y[r * ldy + c0 + c] = finish(sums[c] + 128 * w.row_sum[size_t(c0 + c)], x_scale[r], w, c0 + c, bias);
  }
}

/// Panels p0..p1 in blocks of rows whose a and |a| fit in about 128 KB of L2 (reread across the
/// panels), each panel's rows in tiles of 4 (8 int32 sums, 2 weight vectors, the broadcasts and
/// products: 14 of the 16 ymm registers) and the last 1-3 rows in one smaller tile.
/// (Unused in the double-precision build, whose panel_range never takes this path.)
[[maybe_unused]] void avx2_panels(const QuantizedRows& q, Index m, const Int8Matrix& w, const float* bias,
                                  float* y, Index ldy, Index p0, Index p1) {
  const Index k = w.padded_cols();
  const Index row_block = std::max<Index>(4, (Index(65536) / std::max<Index>(k, 4)) / 4 * 4);
  for (Index r0 = 0; r0 < m; r0 += row_block) {
    const Index r_end = std::min(m, r0 + row_block);
    for (Index p = p0; p < p1; ++p) {
      Index r = r0;
      const auto tile = [&](auto rows) {
        avx2_tile<decltype(rows)::value>(q.a.data() + r * k, q.a_abs.data() + r * k, q.scale.data() + r, w, p,
                                         bias, y + r * ldy, ldy);
        r += decltype(rows)::value;
      };
      while (r + 4 <= r_end) tile(std::integral_constant<int, 4>());
      switch (r_end - r) {
        case 3: tile(std::integral_constant<int, 3>()); break;
        case 2: tile(std::integral_constant<int, 2>()); break;
        case 1: tile(std::integral_constant<int, 1>()); break;
        default: break;
      }
    }
  }
}
#endif

#ifdef __AVX512VNNI__
/// R rows × C panels (16·C output columns) from panel p on: per k-quad, R broadcasts of 4 bytes
/// of x, C loads of 64 weight bytes, R·C VPDPBUSD into int32 sums of 16 columns each; then
/// the same epilogue as finish(), 16 columns at a time (the last panel's padding not stored).
template <int R, int C, class T>
void vnni_tile(const uint8_t* u, const float* x_scale, const Int8Matrix& w, Index p,
               const T* bias, T* y, Index ldy) {
  const Index k = w.padded_cols(), panel_bytes = kInt8Panel * k;
  const int8_t* wp = w.data.data() + p * panel_bytes;
  __m512i acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_si512();
  for (Index i = 0; i < k; i += 4) {
    __m512i wv[C];
    for (int j = 0; j < C; ++j) wv[j] = _mm512_loadu_si512(wp + j * panel_bytes + i * kInt8Panel);
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, u + r * k + i, sizeof quad);
      const __m512i xv = _mm512_set1_epi32(quad);
      for (int j = 0; j < C; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[j]);
    }
  }
  for (int j = 0; j < C; ++j) {
    const Index c = (p + j) * kInt8Panel, valid = std::min(kInt8Panel, w.rows - c);
    const __mmask16 mask = __mmask16((1u << valid) - 1u);
    const __m512i shifted = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(mask, w.row_sum.data() + c), 7);
    const __m512 ws = _mm512_maskz_loadu_ps(mask, w.scale.data() + c);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + c) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][j], shifted));
      const __m512 s = _mm512_mul_ps(_mm512_set1_ps(x_scale[r]), ws);
      _mm512_mask_storeu_ps(y + r * ldy + c, mask, _mm512_fmadd_ps(a, s, b));
    }
  }
}

/// `n_rows` rows in tiles of R, the remainder in smaller tiles.
template <int R, int C, class T>
void vnni_row_tiles(const uint8_t* u, const float* x_scale, Index n_rows, const Int8Matrix& w,
                    Index p, const T* bias, T* y, Index ldy) {
  Index r = 0;
  for (; r + R <= n_rows; r += R)
    vnni_tile<R, C>(u + r * w.padded_cols(), x_scale + r, w, p, bias, y + r * ldy, ldy);
  if constexpr (R > 1)
    if (r < n_rows)
      vnni_row_tiles<R - 1, C>(u + r * w.padded_cols(), x_scale + r, n_rows - r, w, p, bias, y + r * ldy, ldy);
}

/// Panels p0..p1 in blocks of 32 rows (reread from L1/L2 across the panel tiles) and tiles of 4
/// panels (64 columns, their weights reread from L2 across the row tiles).
template <class T>
void vnni_panels(const QuantizedRows& q, Index m, const Int8Matrix& w, const T* bias, T* y,
                 Index ldy, Index p0, Index p1) {
  constexpr Index kRowBlock = 32;
  for (Index r0 = 0; r0 < m; r0 += kRowBlock) {
    const Index rows = std::min(kRowBlock, m - r0);
    const uint8_t* u = q.u.data() + r0 * w.padded_cols();
    const float* s = q.scale.data() + r0;
    T* yb = y + r0 * ldy;
    Index p = p0;
    for (; p + 4 <= p1; p += 4) vnni_row_tiles<4, 4>(u, s, rows, w, p, bias, yb, ldy);
    switch (p1 - p) {
      case 3: vnni_row_tiles<4, 3>(u, s, rows, w, p, bias, yb, ldy); break;
      case 2: vnni_row_tiles<4, 2>(u, s, rows, w, p, bias, yb, ldy); break;
      case 1: vnni_row_tiles<4, 1>(u, s, rows, w, p, bias, yb, ldy); break;
      default: break;
    }
  }
}
#endif

/// Panels p0..p1 of the product on `kernel` (the double-precision build, for gradient checks
/// only, always takes the scalar path: the same sums).
template <class T>
void panel_range(Int8Kernel kernel, const QuantizedRows& q, Index m, const Int8Matrix& w, const T* bias,
                 T* y, Index ldy, Index p0, Index p1) {
#ifdef __AVX512VNNI__
  if constexpr (std::is_same_v<T, float>)
    if (kernel == Int8Kernel::kAvx512Vnni) return vnni_panels(q, m, w, bias, y, ldy, p0, p1);
#endif
#ifdef __AVX2__
  if constexpr (std::is_same_v<T, float>)
    if (kernel == Int8Kernel::kAvx2) return avx2_panels(q, m, w, bias, y, ldy, p0, p1);
#endif
  (void)kernel;
  scalar_columns(q, m, w, bias, y, ldy, p0 * kInt8Panel, std::min(w.rows, p1 * kInt8Panel));
}

/// `kernel` checked against this build's paths; kAuto → the widest. Allocates nothing (it runs
/// in every product of a decoding step).
Int8Kernel resolve(Int8Kernel kernel) {
#if defined(__AVX512VNNI__)
  constexpr Int8Kernel widest = Int8Kernel::kAvx512Vnni;
#elif defined(__AVX2__)
  constexpr Int8Kernel widest = Int8Kernel::kAvx2;
#else
  constexpr Int8Kernel widest = Int8Kernel::kScalar;
#endif
  if (kernel == Int8Kernel::kAuto) return widest;
#ifdef __AVX2__
  if (kernel == Int8Kernel::kAvx2) return kernel;
#endif
  if (kernel != Int8Kernel::kScalar && kernel != widest)
    throw ConfigError("int8 kernel " + int8_kernel_name(kernel) + " is not compiled into this build");
  return kernel;
}

}  // namespace

Int8Matrix to_int8(const Eigen::Ref<const Mat>& w) {
  ANUVAD_CHECK_SHAPE(w.cols() <= kInt8MaxCols, "to_int8: " + std::to_string(w.cols()) +
                                                    " columns, more than " + std::to_string(kInt8MaxCols));
  Int8Matrix out{w.rows(), w.cols(), {}, {}, {}};
  out.data.assign(size_t(out.panels() * kInt8Panel * out.padded_cols()), int8_t(0));
  out.scale.resize(size_t(out.rows));
  out.row_sum.resize(size_t(out.rows));
  for (Index r = 0; r < w.rows(); ++r) {
    float amax = 0.0f;
    for (Index c = 0; c < w.cols(); ++c) {
      const float v = static_cast<float>(w(r, c));
      ANUVAD_CHECK_SHAPE(std::isfinite(v), "to_int8: row " + std::to_string(r) + " holds a NaN or an infinity");
      amax = std::max(amax, std::abs(v));
    }
    const float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
    int32_t sum = 0;
    int8_t* panel = out.data.data() + (r / kInt8Panel) * kInt8Panel * out.padded_cols();
    for (Index c = 0; c < w.cols(); ++c) {
      const long q = std::clamp(std::lround(static_cast<float>(w(r, c)) / scale), -127L, 127L);
      panel[(c / 4) * 4 * kInt8Panel + (r % kInt8Panel) * 4 + c % 4] = int8_t(q);
      sum += int32_t(q);
    }
    out.scale[size_t(r)] = scale;
    out.row_sum[size_t(r)] = sum;
  }
  return out;
}

Mat from_int8(const Int8Matrix& w) {
  Mat out(w.rows, w.cols);
  for (Index r = 0; r < w.rows; ++r)
    for (Index c = 0; c < w.cols; ++c) out(r, c) = static_cast<Scalar>(float(w.at(r, c)) * w.scale[size_t(r)]);
  return out;
}

std::vector<Int8Kernel> int8_kernels_compiled() {
  std::vector<Int8Kernel> k{Int8Kernel::kScalar};
#ifdef __AVX2__
  k.push_back(Int8Kernel::kAvx2);
#endif
#ifdef __AVX512VNNI__
  k.push_back(Int8Kernel::kAvx512Vnni);
#endif
  return k;
}

std::string int8_kernel_name(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kScalar: return "scalar";
    case Int8Kernel::kAvx2: return "avx2";
    case Int8Kernel::kAvx512Vnni: return "avx512vnni";
    default: return int8_kernel_name(resolve(kernel));
  }
}

void int8_affine(const Eigen::Ref<const Mat>& x, const Int8Matrix& w, const Mat& bias,
                 Eigen::Ref<Mat> y, Int8Kernel kernel) {
  const Index m = x.rows(), n = w.rows, k = w.cols;
  ANUVAD_CHECK_SHAPE(x.cols() == k && y.rows() == m && y.cols() == n &&
                         (bias.size() == 0 || (bias.rows() == 1 && bias.cols() == n)),
                     "int8_affine: [" + std::to_string(m) + "x" + std::to_string(x.cols()) +
                         "]·[" + std::to_string(n) + "x" + std::to_string(k) + "]ᵀ into [" +
                         std::to_string(y.rows()) + "x" + std::to_string(y.cols()) + "]");
  kernel = resolve(kernel);
  if (m == 0 || n == 0) return;
  // Reused: a decoding step allocates nothing after the first.
  thread_local QuantizedRows quantized;
  quantize_rows(x.data(), x.outerStride(), m, k, w.padded_cols(), quantized);
#ifdef __AVX2__
  if (kernel == Int8Kernel::kAvx2) split_signs(quantized);
#endif
  const QuantizedRows& q = quantized;  // the caller's buffer, also inside the region below
  using T = Mat::Scalar;
  const T* b = bias.size() > 0 ? bias.data() : nullptr;
  T* out = y.data();
  const Index ldy = y.outerStride();
  // Threads own whole panels (16 columns); the scalar path takes the same column ranges.
  const auto run = [&](Index p0, Index p1) { panel_range(kernel, q, m, w, b, out, ldy, p0, p1); };
  const Index panels = w.panels();
  const int threads = split_threads();
  if (threads <= 1 || double(m) * double(n) * double(k) < kInt8SplitMinMultiplyAdds) return run(0, panels);
  split_run(threads, [&](Index t, Index nt) {
    const Index p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
    if (p1 > p0) run(p0, p1);
  });
}

}  // namespace anuvad
