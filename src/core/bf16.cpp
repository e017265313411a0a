// bfloat16 rounding and the small-row product x·Wᵀ on bfloat16 weights (see
// include/anuvad/core/bf16.h). One tile template serves the three code paths; a path is a
// traits struct saying how wide a vector is and how to load, widen, multiply-add and sum it.
#include "anuvad/core/bf16.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"
#include "bf16_avx2_gemm.h"
#include "bf16_onednn.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source of their
// masked builtins (unpack, shuffle, extract), which -Wuninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace anuvad {

ComputeType parse_compute_type(const std::string& name) {
  if (name == "float32") return ComputeType::kFloat32;
  if (name == "bfloat16") return ComputeType::kBfloat16;
  if (name == "auto") return ComputeType::kAuto;
  if (name == "int8") return ComputeType::kInt8;
  throw ConfigError("compute type '" + name + "' is not auto, float32, bfloat16 or int8");
}

std::string compute_type_name(ComputeType type) {
  switch (type) {
    case ComputeType::kBfloat16: return "bfloat16";
    case ComputeType::kAuto: return "auto";
    case ComputeType::kInt8: return "int8";
    default: return "float32";
  }
}

Bf16Matrix to_bf16(const Eigen::Ref<const Mat>& w) {
  Bf16Matrix out{w.rows(), w.cols(), {}, detail::onednn_weights_slot()};
  out.data.resize(size_t(w.rows() * w.cols()));
  for (Index r = 0; r < w.rows(); ++r)
    for (Index c = 0; c < w.cols(); ++c)
      out.data[size_t(r * w.cols() + c)] = float_to_bf16(static_cast<float>(w(r, c)));
  return out;
}

Mat from_bf16(const Bf16Matrix& w) {
  Mat out(w.rows, w.cols);
  const std::vector<uint16_t> unpacked = w.data.empty() && !w.empty() ? detail::onednn_unpack(w) : std::vector<uint16_t>();
  const uint16_t* values = unpacked.empty() ? w.data.data() : unpacked.data();
  for (Index i = 0; i < out.size(); ++i) out.data()[i] = static_cast<Scalar>(bf16_to_float(values[i]));
  return out;
}

namespace {

// A path multiplies-adds kWidth lanes at a time and reads the weights 2·kWidth at a time: one
// load of 2·kWidth bfloat16 values holds, in each 32-bit lane j, weights 2j (low half) and
// 2j + 1 (high half), widened with one shift and one mask to the vectors `even` and `odd`
// (instead of a zero-extension and a shift per kWidth weights). The activations are reordered
// to match once per call (interleave_rows), so the tile loads them as they are.

/// c + a·b rounded once where the target has FMA (explicitly: the compiler's contraction of
/// a·b + c could differ between two instantiations of the tile, and then a row's result with
/// the tile size), else rounded twice (nothing to contract into).
inline float madd(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// One lane: the reference order, a left-to-right sum over k.
struct ScalarPath {
  static constexpr int kWidth = 1, kMaxRows = 4;
  using V = float;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static void widen(const uint16_t* p, V& even, V& odd) {
    even = bf16_to_float(p[0]);
    odd = bf16_to_float(p[1]);
  }
  static V fma(V a, V b, V c) { return madd(a, b, c); }
  static void sum4(const V* v, float* out) {
    for (int c = 0; c < 4; ++c) out[c] = v[c];
  }
};

#if defined(__AVX2__) && defined(__FMA__)
/// 8 lanes; 2 rows × 4 columns of accumulators (+ 4 x, 2 w) fit the 16 ymm registers.
struct Avx2Path {
  static constexpr int kWidth = 8, kMaxRows = 2;
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void widen(const uint16_t* p, V& even, V& odd) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32(int(0xffff0000u))));
  }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void sum4(const V* v, float* out) {  // lanes 0-3 of the result: Σ v[0] .. Σ v[3]
    const V ab = _mm256_add_ps(_mm256_unpacklo_ps(v[0], v[1]), _mm256_unpackhi_ps(v[0], v[1]));
    const V cd = _mm256_add_ps(_mm256_unpacklo_ps(v[2], v[3]), _mm256_unpackhi_ps(v[2], v[3]));
    const V abcd = _mm256_add_ps(
        _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd))),
        _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd))));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
};
#endif

#ifdef __AVX512F__
/// 16 lanes; 4 rows × 4 columns of accumulators (+ 8 x, 2 w) in the 32 zmm registers.
struct Avx512Path {
  static constexpr int kWidth = 16, kMaxRows = 4;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void widen(const uint16_t* p, V& even, V& odd) {
    const __m512i h = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32(int(0xffff0000u))));
  }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void sum4(const V* v, float* out) {  // each 128-bit lane: partial sums of v[0..3]
    const V ab = _mm512_add_ps(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
    const V cd = _mm512_add_ps(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
    const V abcd = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    alignas(64) float t[16];
    _mm512_store_ps(t, abcd);
    _mm_storeu_ps(out, _mm_add_ps(_mm_add_ps(_mm_load_ps(t), _mm_load_ps(t + 4)),
                                  _mm_add_ps(_mm_load_ps(t + 8), _mm_load_ps(t + 12))));
  }
};
#endif

using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;

/// out [m, k] (row-major) = float_to_bf16 of the rows of x [m, k] (stride ldx): the activations
/// of the two dot-product paths (kAvx512Bf16, kOnednn).
template <class Alloc>
void round_rows(const float* x, Index ldx, Index m, Index k, std::vector<uint16_t, Alloc>& out) {
  out.resize(size_t(m * k));
  round_rows_to_bf16(x, ldx, 0, m, k, out.data());
}

/// out [m, k] = the rows of x [m, k] (stride ldx) with each block of 2·width values reordered
/// as its even-indexed then its odd-indexed values; the k mod 2·width tail as it is.
void interleave_rows(const float* x, Index ldx, Index m, Index k, Index width, AlignedFloats& out) {
  out.resize(size_t(m * k));
  const Index k_main = k - k % (2 * width);
  for (Index r = 0; r < m; ++r) {
    const float* src = x + r * ldx;
    float* dst = out.data() + r * k;
    for (Index i = 0; i < k_main; i += 2 * width)
      for (Index j = 0; j < width; ++j) {
        dst[i + j] = src[i + 2 * j];
        dst[i + width + j] = src[i + 2 * j + 1];
      }
    for (Index i = k_main; i < k; ++i) dst[i] = src[i];
  }
}

/// y[r, c] += Σ_i x[r, i]·w[c, i] for R rows of x (interleaved, stride k) and C rows of w
/// (stride k): kWidth partial sums per output over the whole 2·kWidth blocks of k (the even then
/// the odd weights of each block), summed by P::sum4, then the k mod 2·kWidth tail in order.
template <class P, int R, int C>
void tile(const float* x, const uint16_t* w, Index k, float* y, Index ldy) {
  using V = typename P::V;
  constexpr Index kBlock = 2 * P::kWidth;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = P::zero();
  const Index k_main = k - k % kBlock;
  for (Index i = 0; i < k_main; i += kBlock) {
    V xe[R], xo[R];
    for (int r = 0; r < R; ++r) {
      xe[r] = P::load(x + r * k + i);
      xo[r] = P::load(x + r * k + i + P::kWidth);
    }
    for (int c = 0; c < C; ++c) {
      // One 64-byte line of each weight row per block (AVX-512): fetch the same line of the next
      // tile's rows, one tile ahead (a prefetch past the end of W is harmless).
      if constexpr (P::kWidth >= 8) __builtin_prefetch(w + (C + c) * k + i);
      V we, wo;
      P::widen(w + c * k + i, we, wo);
      for (int r = 0; r < R; ++r) acc[r][c] = P::fma(xo[r], wo, P::fma(xe[r], we, acc[r][c]));
    }
  }
  for (int r = 0; r < R; ++r) {
    float s[4];
    if constexpr (C == 4) {
      P::sum4(acc[r], s);
    } else {  // the same order as in a tile of 4 columns
      for (int c = 0; c < C; ++c) {
        const V same[4] = {acc[r][c], acc[r][c], acc[r][c], acc[r][c]};
        float t[4];
        P::sum4(same, t);
        s[c] = t[0];
      }
    }
    for (int c = 0; c < C; ++c) {
      for (Index i = k_main; i < k; ++i) s[c] = madd(x[r * k + i], bf16_to_float(w[c * k + i]), s[c]);
      y[r * ldy + c] += s[c];
    }
  }
}

/// `n_rows` rows of x against C rows of w, in tiles of R rows, the remainder in smaller tiles.
template <class P, int R, int C>
void row_tiles(const float* x, Index n_rows, const uint16_t* w, Index k, float* y, Index ldy) {
  Index r = 0;
  for (; r + R <= n_rows; r += R) tile<P, R, C>(x + r * k, w, k, y + r * ldy, ldy);
  if constexpr (R > 1)
    if (r < n_rows) row_tiles<P, R - 1, C>(x + r * k, n_rows - r, w, k, y + r * ldy, ldy);
}

/// Output columns c0..c1 of m rows of x (stride k), in blocks of 32 rows (reread from L2 across
/// the column tiles) and tiles of 4 columns (their weight rows stay in L1 across the row tiles):
/// tiles4 / tiles1(x, rows, w_row, k, y, ldy) multiply a block's rows by 4 / 1 weight rows.
template <class T, class Tiles4, class Tiles1>
void blocked_columns(const T* x, Index m, const Bf16Matrix& w, float* y, Index ldy, Index c0,
                     Index c1, Tiles4 tiles4, Tiles1 tiles1) {
  constexpr Index kRowBlock = 32;
  const Index k = w.cols;
  for (Index r0 = 0; r0 < m; r0 += kRowBlock) {
    const Index rows = std::min(kRowBlock, m - r0);
    const T* xb = x + r0 * k;
    float* yb = y + r0 * ldy;
    Index c = c0;
    for (; c + 4 <= c1; c += 4) tiles4(xb, rows, w.row(c), k, yb + c, ldy);
    for (; c < c1; ++c) tiles1(xb, rows, w.row(c), k, yb + c, ldy);
  }
}

/// The widening paths over output columns c0..c1 (x interleaved by interleave_rows).
template <class P>
void columns(const float* x, Index m, const Bf16Matrix& w, float* y, Index ldy, Index c0, Index c1) {
  blocked_columns(x, m, w, y, ldy, c0, c1, row_tiles<P, P::kMaxRows, 4>, row_tiles<P, P::kMaxRows, 1>);
}

#ifdef __AVX512BF16__
/// The AVX-512 BF16 path: activations rounded to bfloat16 too (x_bf16 [m, k], row-major, as
/// float_to_bf16 rounds), then one VDPBF16PS per 32 multiply-adds (each 32-bit lane adds the
/// products of its pair of bfloat16 values in float32). Tile of R rows × C columns of y:
/// 16 lane sums per output over the whole 32-value blocks of k, summed as Avx512Path::sum4
/// does, then the k mod 32 tail in order.
template <int R, int C>
void dot_tile(const uint16_t* x, const uint16_t* w, Index k, float* y, Index ldy) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const Index k_main = k - k % 32;
  for (Index i = 0; i < k_main; i += 32) {
    __m512i xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_si512(x + r * k + i);
    for (int c = 0; c < C; ++c) {
      __builtin_prefetch(w + (C + c) * k + i);  // the next tile's line, as tile() does
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(w + c * k + i);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)xv[r], wv);
    }
  }
  for (int r = 0; r < R; ++r) {
    float s[4];
    if constexpr (C == 4) {
      Avx512Path::sum4(acc[r], s);
    } else {
      const __m512 same[4] = {acc[r][0], acc[r][0], acc[r][0], acc[r][0]};
      float t[4];
      Avx512Path::sum4(same, t);
      s[0] = t[0];
    }
    for (int c = 0; c < C; ++c) {
      for (Index i = k_main; i < k; ++i)
        s[c] = madd(bf16_to_float(x[r * k + i]), bf16_to_float(w[c * k + i]), s[c]);
      y[r * ldy + c] += s[c];
    }
  }
}

/// dot_tile over `n_rows` rows in tiles of R rows, the remainder in smaller tiles.
template <int R, int C>
void dot_row_tiles(const uint16_t* x, Index n_rows, const uint16_t* w, Index k, float* y, Index ldy) {
  Index r = 0;
  for (; r + R <= n_rows; r += R) dot_tile<R, C>(x + r * k, w, k, y + r * ldy, ldy);
  if constexpr (R > 1)
    if (r < n_rows) dot_row_tiles<R - 1, C>(x + r * k, n_rows - r, w, k, y + r * ldy, ldy);
}

/// y[c0..c1) += x · w_cᵀ for one row x [k] (rounded to bfloat16) and w [n, k] (row-major): a
/// batch-1 decoding step's matrix-vector product, bound by reading w. 8 weight rows at a time:
/// 8 accumulator chains, one x load per 8 weight loads, each weight row through a pointer of its
/// own (dot_tile<1, 4>'s generic indexing spilled registers inside its loop here), and per 64
/// bytes of each row a prefetch of the same line of the next 8 rows. Each column's lanes add up
/// in the order dot_tile's do and are summed by the same sum4, so y has dot_tile's bits. The
/// c1 − c0 mod 8 rest by dot_tile.
void dot_gemv(const uint16_t* x, const Bf16Matrix& w, float* y, Index c0, Index c1) {
  const Index k = w.cols, k_main = k - k % 32;
  Index c = c0;
  for (; c + 8 <= c1; c += 8) {
    const uint16_t* p0 = w.row(c);
    const uint16_t *p1 = p0 + k, *p2 = p1 + k, *p3 = p2 + k, *p4 = p3 + k, *p5 = p4 + k, *p6 = p5 + k,
                   *p7 = p6 + k;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (Index i = 0; i < k_main; i += 32) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + i);
      for (int j = 0; j < 8; ++j) __builtin_prefetch(p0 + (8 + j) * k + i);
      a0 = _mm512_dpbf16_ps(a0, xv, (__m512bh)_mm512_loadu_si512(p0 + i));
      a1 = _mm512_dpbf16_ps(a1, xv, (__m512bh)_mm512_loadu_si512(p1 + i));
      a2 = _mm512_dpbf16_ps(a2, xv, (__m512bh)_mm512_loadu_si512(p2 + i));
      a3 = _mm512_dpbf16_ps(a3, xv, (__m512bh)_mm512_loadu_si512(p3 + i));
      a4 = _mm512_dpbf16_ps(a4, xv, (__m512bh)_mm512_loadu_si512(p4 + i));
      a5 = _mm512_dpbf16_ps(a5, xv, (__m512bh)_mm512_loadu_si512(p5 + i));
      a6 = _mm512_dpbf16_ps(a6, xv, (__m512bh)_mm512_loadu_si512(p6 + i));
      a7 = _mm512_dpbf16_ps(a7, xv, (__m512bh)_mm512_loadu_si512(p7 + i));
    }
    const __m512 lo[4] = {a0, a1, a2, a3}, hi[4] = {a4, a5, a6, a7};
    float s[8];
    Avx512Path::sum4(lo, s);
    Avx512Path::sum4(hi, s + 4);
    for (int j = 0; j < 8; ++j) {
      const uint16_t* wj = p0 + j * k;
      for (Index i = k_main; i < k; ++i) s[j] = madd(bf16_to_float(x[i]), bf16_to_float(wj[i]), s[j]);
      y[c + j] += s[j];
    }
  }
  for (; c + 4 <= c1; c += 4) dot_tile<1, 4>(x, w.row(c), k, y + c, 1);
  for (; c < c1; ++c) dot_tile<1, 1>(x, w.row(c), k, y + c, 1);
}

/// The dot-product path over output columns c0..c1 (x rounded to bfloat16, stride k).
void dot_columns(const uint16_t* x, Index m, const Bf16Matrix& w, float* y, Index ldy, Index c0, Index c1) {
  if (m == 1) return dot_gemv(x, w, y, c0, c1);
  blocked_columns(x, m, w, y, ldy, c0, c1, dot_row_tiles<4, 4>, dot_row_tiles<4, 1>);
}
#endif

/// Weight rows kBlas widens per chunk for rows of k values: about kBf16BlasChunkBytes of
/// float32, a multiple of 16 rows from 16 to 256.
Index blas_chunk_rows(Index k) {
  return std::clamp<Index>(kBf16BlasChunkBytes / (Index(sizeof(float)) * std::max<Index>(k, 1)) / 16 * 16, 16, 256);
}

/// The kBlas path over output columns c0..c1: y[:, c] += x·widen(w_c) for chunks of
/// blas_chunk_rows(k) weight rows, each widened into `scratch` (room for one chunk) and
/// multiplied by OpenBLAS's cblas_sgemm on the calling thread (x [m, k], stride ldx, as it is).
void blas_columns(const float* x, Index ldx, Index m, const Bf16Matrix& w, float* y, Index ldy,
                  Index c0, Index c1, float* scratch) {
  const Index k = w.cols, chunk = blas_chunk_rows(k);
  // OpenBLAS's OpenMP build threads a product called outside a parallel region: one thread here
  // (this thread's setting only), as core/gemm.cpp runs it.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > 1) omp_set_num_threads(1);
  for (Index c = c0; c < c1; c += chunk) {
    const Index cols = std::min(chunk, c1 - c);
    const uint16_t* src = w.row(c);
    for (Index i = 0; i < cols * k; ++i) scratch[i] = bf16_to_float(src[i]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(cols), int(k), 1.0f, x, int(ldx),
                scratch, int(k), 1.0f, y + c, int(ldy));
  }
  if (threads > 1) omp_set_num_threads(threads);
}

std::atomic<Bf16Kernel> auto_kernel{Bf16Kernel::kAuto};  // set_bf16_auto_kernel

/// The path kAuto (nothing set) takes for products of kBf16BlasMinRows rows or more where oneDNN
/// is not available: the widest own path if it multiplies bfloat16 directly (kAvx512Bf16: 50
/// GMAC/s at 32 rows on one thread against 43 for float32 OpenBLAS), kAvx2Gemm where the widest
/// is kAvx2 (an AVX2-only CPU), else kBlas.
Bf16Kernel batched_kernel() {
  switch (bf16_widest_own_kernel()) {
    case Bf16Kernel::kAvx512Bf16: return Bf16Kernel::kAvx512Bf16;
    case Bf16Kernel::kAvx2: return Bf16Kernel::kAvx2Gemm;
    default: return Bf16Kernel::kBlas;
  }
}

/// `kernel` checked against the paths available; kAuto → the one set_bf16_auto_kernel set, else
/// the widest own path (the row rule for oneDNN is pick()'s).
Bf16Kernel resolve(Bf16Kernel kernel) {
  if (kernel == Bf16Kernel::kAuto) kernel = auto_kernel.load(std::memory_order_relaxed);
  if (kernel != Bf16Kernel::kAuto) {
    for (Bf16Kernel k : bf16_kernels_compiled())
      if (k == kernel) return kernel;
    throw ConfigError("bf16 kernel " + bf16_kernel_name(kernel) + " is not available in this build");
  }
  return bf16_widest_own_kernel();
}

/// The path of one product of m rows by w: kAuto (nothing set) hands kOnednnMinRows rows or
/// more to oneDNN when w has its slot, else resolve().
Bf16Kernel pick(Bf16Kernel kernel, Index m, const Bf16Matrix& w) {
  const bool packed_only = w.data.empty() && !w.empty();
  if (kernel == Bf16Kernel::kAuto && auto_kernel.load(std::memory_order_relaxed) == Bf16Kernel::kAuto &&
      (m >= kOnednnMinRows || packed_only) && w.onednn)
    return Bf16Kernel::kOnednn;
  if (kernel == Bf16Kernel::kAuto && auto_kernel.load(std::memory_order_relaxed) == Bf16Kernel::kAuto &&
      m >= kBf16BlasMinRows && !packed_only)
    return batched_kernel();
  kernel = resolve(kernel);
  if (packed_only && kernel != Bf16Kernel::kOnednn)
    throw ConfigError("bf16 kernel " + bf16_kernel_name(kernel) + ": the weights are packed for oneDNN only");
  return kernel;
}

/// y [m, n] = x [m, k]·Wᵀ + bias on oneDNN, kBf16MaxRowsPerCall rows at a time (x rounded to
/// bfloat16 into the primitive's input and the bias added by oneDNN: detail::onednn_multiply).
/// float32 only (the double build has no oneDNN).
template <class X, class Y>  // Eigen::Ref<const Mat>, Eigen::Ref<Mat>: a template, so that the
void onednn_affine(const X& x, const Bf16Matrix& w, const Mat& bias, Y y) {  // double build discards the body
  if constexpr (std::is_same_v<typename X::Scalar, float>) {
    const float* b = bias.size() > 0 ? bias.data() : nullptr;
    for (Index r0 = 0; r0 < x.rows(); r0 += kBf16MaxRowsPerCall) {
      const Index rows = std::min(kBf16MaxRowsPerCall, x.rows() - r0);
      detail::onednn_multiply(x.data() + r0 * x.outerStride(), x.outerStride(), rows, w, b,
                              y.data() + r0 * y.outerStride(), y.outerStride());
    }
  } else {
    (void)x, (void)w, (void)bias, (void)y;
    throw ConfigError("bf16 kernel onednn: float32 only");
  }
}

/// y [m, n] = x [m, k]·Wᵀ + bias [n] (nullptr: no bias) with the path `kernel` (resolved): the
/// activations interleaved once, then the output columns split across the threads when the
/// call is large enough (outside a parallel region, or on the caller's StepTeam). Each thread
/// writes its columns' bias itself before adding its products, so no line of y is written by
/// two cores and thread 0 has no serial bias pass (batch-1 small-config decoding against the
/// bias written by thread 0 for all columns: +4 % in 8 alternated rounds, −1 % in 5 more; within
/// this host's noise). kAvx2Gemm's tiles store bias + products themselves, with no pass over y
/// before them (base batch-64 decoding, bfloat16, Zen 3: +2.4 % median over 30 alternated pairs).
[[maybe_unused]] void multiply(const float* x, Index ldx, Index m, const Bf16Matrix& w, const float* bias,
                               float* y, Index ldy, Bf16Kernel kernel) {
  const Index width = kernel == Bf16Kernel::kAvx512 ? 16 : kernel == Bf16Kernel::kAvx2 ? 8 : 1;
  // Reused: a decoding step allocates nothing; at most kBf16MaxRowsPerCall·k values per thread.
  thread_local AlignedFloats interleaved;
  thread_local std::vector<uint16_t, Eigen::aligned_allocator<uint16_t>> rounded;
  thread_local AlignedFloats widened;  // kBlas, kAvx2Gemm: widened weight rows, per thread
  const Index n = w.rows;
  const int threads = split_threads();
  if (kernel == Bf16Kernel::kAvx512Bf16) {
    round_rows(x, ldx, m, w.cols, rounded);
  } else if (kernel == Bf16Kernel::kBlas) {
    widened.resize(size_t(threads * blas_chunk_rows(w.cols) * w.cols));
  } else if (kernel == Bf16Kernel::kAvx2Gemm) {
    widened.resize(size_t(threads * kBf16GemmPanel * w.cols));
  } else {
    interleave_rows(x, ldx, m, w.cols, width, interleaved);
  }
  // Pointers, not the thread_local buffers: inside the parallel region below those names would
  // be each worker thread's own (empty) buffers.
  const float* xi = interleaved.data();
  [[maybe_unused]] const uint16_t* xr = rounded.data();
  float* const scratch = widened.data();
  const auto run = [&](Index c0, Index c1, Index t) {
#if defined(__AVX2__) && defined(__FMA__)
    if (kernel == Bf16Kernel::kAvx2Gemm)  // writes bias + products itself: no pass over y first
      return detail::avx2_gemm_columns(x, ldx, m, w, bias, y, ldy, c0, c1,
                                       scratch + t * kBf16GemmPanel * w.cols);
#endif
    for (Index r = 0; r < m; ++r) {
      float* row = y + r * ldy;
      if (bias) std::copy(bias + c0, bias + c1, row + c0); else std::fill(row + c0, row + c1, 0.0f);
    }
    switch (kernel) {
      case Bf16Kernel::kBlas:
        return blas_columns(x, ldx, m, w, y, ldy, c0, c1, scratch + t * blas_chunk_rows(w.cols) * w.cols);
#ifdef __AVX512BF16__
      case Bf16Kernel::kAvx512Bf16: return dot_columns(xr, m, w, y, ldy, c0, c1);
#endif
#ifdef __AVX512F__
      case Bf16Kernel::kAvx512: return columns<Avx512Path>(xi, m, w, y, ldy, c0, c1);
#endif
#if defined(__AVX2__) && defined(__FMA__)
      case Bf16Kernel::kAvx2: return columns<Avx2Path>(xi, m, w, y, ldy, c0, c1);
#endif
      default: return columns<ScalarPath>(xi, m, w, y, ldy, c0, c1);
    }
  };
  const double min_split = StepTeam::current() ? kBf16TeamSplitMinMultiplyAdds : kBf16SplitMinMultiplyAdds;
  if (threads <= 1 || double(m) * double(n) * double(w.cols) < min_split) return run(0, n, 0);
  split_run(threads, [&](Index t, Index nt) {
    const Index c0 = n * t / nt / 4 * 4, c1 = t + 1 == nt ? n : n * (t + 1) / nt / 4 * 4;
    if (c1 > c0) run(c0, c1, t);
  });
}

/// The same in double precision (the gradient-check build compiles this file with Scalar =
/// double; it never decodes in bfloat16, but the library must link): a plain sum.
[[maybe_unused]] void multiply(const double* x, Index ldx, Index m, const Bf16Matrix& w, const double* bias,
                               double* y, Index ldy, Bf16Kernel) {
  for (Index r = 0; r < m; ++r)
    for (Index c = 0; c < w.rows; ++c) y[r * ldy + c] = bias ? bias[c] : 0.0;
  for (Index r = 0; r < m; ++r)
    for (Index c = 0; c < w.rows; ++c)
      for (Index i = 0; i < w.cols; ++i) y[r * ldy + c] += x[r * ldx + i] * bf16_to_float(w.row(c)[i]);
}

}  // namespace

std::vector<Bf16Kernel> bf16_kernels_compiled() {
  std::vector<Bf16Kernel> k{Bf16Kernel::kScalar};
#if defined(__AVX2__) && defined(__FMA__)
  k.push_back(Bf16Kernel::kAvx2);
  k.push_back(Bf16Kernel::kAvx2Gemm);
#endif
#ifdef __AVX512F__
  k.push_back(Bf16Kernel::kAvx512);
#endif
#ifdef __AVX512BF16__
  k.push_back(Bf16Kernel::kAvx512Bf16);
#endif
  k.push_back(Bf16Kernel::kBlas);
  if (detail::onednn_available()) k.push_back(Bf16Kernel::kOnednn);
  return k;
}

bool bf16_onednn_available() { return detail::onednn_available(); }

Bf16Kernel bf16_widest_own_kernel() {
  static const Bf16Kernel widest = [] {
    Bf16Kernel best = Bf16Kernel::kScalar;
    for (Bf16Kernel k : bf16_kernels_compiled())
      if (k != Bf16Kernel::kBlas && k != Bf16Kernel::kOnednn && k != Bf16Kernel::kAvx2Gemm) best = k;
    return best;
  }();
  return widest;
}

ComputeType auto_compute_type(int64_t weight_bytes) {
  // A vector path of our own: oneDNN only takes products of kOnednnMinRows rows or more.
  const bool vector_path = bf16_widest_own_kernel() != Bf16Kernel::kScalar;
  return vector_path && weight_bytes >= kBf16AutoMinWeightBytes ? ComputeType::kBfloat16
                                                                 : ComputeType::kFloat32;
}

Bf16Kernel parse_bf16_kernel(const std::string& name) {
  if (name == "auto") return Bf16Kernel::kAuto;
  for (Bf16Kernel k : bf16_kernels_compiled())
    if (bf16_kernel_name(k) == name) return k;
  throw ConfigError("bf16 kernel '" + name + "' is unknown or not compiled into this build");
}

void set_bf16_auto_kernel(Bf16Kernel kernel) {
  auto_kernel.store(Bf16Kernel::kAuto);
  if (kernel != Bf16Kernel::kAuto) auto_kernel.store(resolve(kernel));
}

void pack_for_onednn_only(Bf16Matrix& w) {
  if (!w.onednn || w.data.empty() || auto_kernel.load() != Bf16Kernel::kAuto) return;
  detail::onednn_pack(w);
  w.data = decltype(w.data)();  // freed, not just cleared
}

std::string bf16_kernel_name(Bf16Kernel kernel) {
  switch (kernel) {
    case Bf16Kernel::kAvx512Bf16: return "avx512bf16";
    case Bf16Kernel::kAvx512: return "avx512";
    case Bf16Kernel::kAvx2: return "avx2";
    case Bf16Kernel::kAvx2Gemm: return "avx2gemm";
    case Bf16Kernel::kScalar: return "scalar";
    case Bf16Kernel::kOnednn: return "onednn";
    case Bf16Kernel::kBlas: return "openblas";
    default:
      if (auto_kernel.load() == Bf16Kernel::kAuto && detail::onednn_available())
        return "onednn+" + bf16_kernel_name(bf16_widest_own_kernel());
      if (auto_kernel.load() == Bf16Kernel::kAuto && batched_kernel() != bf16_widest_own_kernel())
        return bf16_kernel_name(batched_kernel()) + "+" + bf16_kernel_name(bf16_widest_own_kernel());
      return bf16_kernel_name(resolve(Bf16Kernel::kAuto));
  }
}

void bf16_affine(const Eigen::Ref<const Mat>& x, const Bf16Matrix& w, const Mat& bias,
                 Eigen::Ref<Mat> y, Bf16Kernel kernel) {
  const Index m = x.rows(), n = w.rows, k = w.cols;
  ANUVAD_CHECK_SHAPE(x.cols() == k && y.rows() == m && y.cols() == n &&
                         (bias.size() == 0 || (bias.rows() == 1 && bias.cols() == n)),
                     "bf16_affine: [" + std::to_string(m) + "x" + std::to_string(x.cols()) +
                         "]·[" + std::to_string(n) + "x" + std::to_string(k) + "]ᵀ into [" +
                         std::to_string(y.rows()) + "x" + std::to_string(y.cols()) + "]");
  kernel = pick(kernel, m, w);
  if (m == 0 || n == 0) return;
  if (kernel == Bf16Kernel::kOnednn) return onednn_affine(x, w, bias, y);
  // At most kBf16MaxRowsPerCall rows at a time: a row's result does not depend on the others,
  // and the calling thread's interleaved copy of x stays at most that many rows long.
  for (Index r0 = 0; r0 < m; r0 += kBf16MaxRowsPerCall) {
    const Index rows = std::min(kBf16MaxRowsPerCall, m - r0);
    multiply(x.data() + r0 * x.outerStride(), x.outerStride(), rows, w, bias.size() > 0 ? bias.data() : nullptr,
             y.data() + r0 * y.outerStride(), y.outerStride(), kernel);
  }
}

}  // namespace anuvad
