// Routing of matrix products to OpenBLAS or Eigen (see include/anuvad/core/gemm.h).
#include "anuvad/core/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "anuvad/core/error.h"
#include "anuvad/core/gemm_stats.h"
#include "anuvad/core/parallel.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source of their
// masked builtins; inlined into Eigen's AVX-512 ptranspose (the GEMM kernels instantiated here)
// at -O1, the sanitizer build's level, -Wuninitialized reports it (as in core/bf16.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"

// OpenBLAS extensions (declared in its cblas.h, restated here so that the header of another
// CBLAS would not break the build): the kernel chosen at start-up, the build options, threads.
extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
}

namespace anuvad {

namespace {

/// cblas_sgemm / cblas_dgemm by overload (the gradient-check build runs in double).
[[maybe_unused]] void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
[[maybe_unused]] void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                const double* a, int lda, const double* b, int ldb, double beta, double* c,
                int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// The totals of gemm_stats() (guarded by g_stats_mutex) and whether start_gemm_stats() was
/// called.
GemmStats g_stats;
std::mutex g_stats_mutex;
std::atomic<bool> g_counting{false};

/// The OpenBLAS path. OpenBLAS's own threading synchronises its threads inside every product
/// (they share packed panels and spin-wait for each other), which made training 4x slower when
/// another process shared the cores; so OpenBLAS always runs single-threaded here: inside a
/// parallel region it is anyway, and outside one the rows of C are split across the OpenMP
/// threads (one fork/join per product, no waiting inside it) when the product is large enough,
/// or the calling thread's OpenMP thread count is set to 1 for the call.
void blas_rows(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
               bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c, Index m, Index n,
               Index k) {
  const auto call = [&](Index r0, Index rows) {
    const Scalar* a0 = trans_a ? a.data() + r0 : a.data() + r0 * a.outerStride();
    cblas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
               int(rows), int(n), int(k), alpha, a0, int(a.outerStride()), b.data(),
               int(b.outerStride()), beta, c.data() + r0 * c.outerStride(), int(c.outerStride()));
  };
  if (omp_in_parallel()) return call(0, m);
  const int threads = omp_get_max_threads();
  const bool split = threads > 1 && m >= 2 * kGemmBlasMinRows &&
                     double(m) * double(n) * double(k) >= kGemmSplitMinMultiplyAdds;
  if (!split) {
    omp_set_num_threads(1);  // this thread's setting only; OpenBLAS follows it
    call(0, m);
    omp_set_num_threads(threads);
    return;
  }
  const bool counting = g_counting.load(std::memory_order_relaxed);
  const double start = counting ? omp_get_wtime() : 0.0;
  double busy = 0;  // Σ over the threads of their seconds inside call()
  int team = 1;
#pragma omp parallel num_threads(threads) reduction(+ : busy)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) team = nt;
    const Index r0 = m * t / nt, r1 = m * (t + 1) / nt;
    const double t0 = counting ? omp_get_wtime() : 0.0;
    if (r1 > r0) call(r0, r1 - r0);
    if (counting) busy += omp_get_wtime() - t0;
  }
  if (counting) {
    const double idle = omp_get_wtime() - start - busy / team;
    const std::lock_guard<std::mutex> lock(g_stats_mutex);
    g_stats.split_idle_seconds += idle;
  }
}

/// The same product with Eigen (small m); A and B are views, never copied.
template <typename A, typename B>
void eigen_gemm(const A& a, const B& b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c) {
  if (beta == Scalar(0)) {
    c.noalias() = alpha * (a * b);
  } else {
    if (beta != Scalar(1)) c *= beta;
    c.noalias() += alpha * (a * b);
  }
}

/// Eigen's product of C's columns c0..c1 (op(B)'s columns c0..c1: rows of B when trans_b).
void eigen_columns(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
                   bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c, Index c0, Index c1) {
  const Index n = c1 - c0;
  auto cb = c.middleCols(c0, n);
  if (trans_b) {
    const auto bb = b.middleRows(c0, n);
    if (trans_a) return eigen_gemm(a.transpose(), bb.transpose(), alpha, beta, cb);
    return eigen_gemm(a, bb.transpose(), alpha, beta, cb);
  }
  const auto bb = b.middleCols(c0, n);
  if (trans_a) return eigen_gemm(a.transpose(), bb, alpha, beta, cb);
  eigen_gemm(a, bb, alpha, beta, cb);
}

/// The Eigen path (m < kGemmBlasMinRows): outside a parallel region (or on a StepTeam) and from
/// kGemmColumnSplitMinMultiplyAdds on, C's columns are split across the threads (each reads its
/// own rows of a weight matrix once: a decoding step of one sentence reads every weight, and one
/// thread's GEMV leaves the other core idle); otherwise one call on the calling thread.
void eigen_split(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
                 bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c, Index m, Index n,
                 Index k) {
  const int threads = split_threads();
  if (threads < 2 || n < 64 || double(m) * double(n) * double(k) < kGemmColumnSplitMinMultiplyAdds)
    return eigen_columns(a, trans_a, b, trans_b, alpha, beta, c, 0, n);
  split_run(threads, [&](Index t, Index nt) {
    // Column blocks in multiples of 16 (whole 64-byte lines of C's rows per thread).
    const Index c0 = std::min(n, (n * t / nt + 15) / 16 * 16);
    const Index c1 = t + 1 == nt ? n : std::min(n, (n * (t + 1) / nt + 15) / 16 * 16);
    if (c1 > c0) eigen_columns(a, trans_a, b, trans_b, alpha, beta, c, c0, c1);
  });
}

/// gemm() without the time accounting.
void gemm_impl(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
               bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c) {
  const Index m = trans_a ? a.cols() : a.rows(), k = trans_a ? a.rows() : a.cols();
  const Index kb = trans_b ? b.cols() : b.rows(), n = trans_b ? b.rows() : b.cols();
  ANUVAD_CHECK_SHAPE(k == kb && c.rows() == m && c.cols() == n,
                     "gemm: [" + std::to_string(m) + "x" + std::to_string(k) + "]·[" +
                         std::to_string(kb) + "x" + std::to_string(n) + "] into [" +
                         std::to_string(c.rows()) + "x" + std::to_string(c.cols()) + "]");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = β·C (BLAS would do the same; Eigen's product is all zeros)
    if (beta == Scalar(0)) c.setZero(); else c *= beta;
    return;
  }
  if (m >= kGemmBlasMinRows) {
    blas_rows(a, trans_a, b, trans_b, alpha, beta, c, m, n, k);
    return;
  }
  eigen_split(a, trans_a, b, trans_b, alpha, beta, c, m, n, k);
}

}  // namespace

void gemm(const Eigen::Ref<const Mat>& a, bool trans_a, const Eigen::Ref<const Mat>& b,
          bool trans_b, Scalar alpha, Scalar beta, Eigen::Ref<Mat> c) {
  if (!g_counting.load(std::memory_order_relaxed))
    return gemm_impl(a, trans_a, b, trans_b, alpha, beta, c);
  const double t0 = omp_get_wtime();
  gemm_impl(a, trans_a, b, trans_b, alpha, beta, c);
  // Inside a parallel region each of the team's threads counts its share of the wall time.
  const double seconds = (omp_get_wtime() - t0) / omp_get_num_threads();
  const double flops = 2.0 * double(c.rows()) * double(c.cols()) * double(trans_a ? a.rows() : a.cols());
  const std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats.seconds += seconds;
  g_stats.calls += 1;
  g_stats.flops += flops;
}

GemmStats gemm_stats() {
  const std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_stats;
}

void start_gemm_stats() {
  const std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats = GemmStats{};
  g_counting = true;
}

std::string gemm_forced_core() {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return coretype == nullptr ? std::string() : std::string(coretype);
}

std::string gemm_backend() {
  // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... USE_OPENMP ...".
  const std::string config = openblas_get_config();
  const size_t version_end = config.find(' ', config.find(' ') + 1);
  const char* threads = config.find("USE_OPENMP") != std::string::npos        ? "OpenMP"
                        : config.find("SINGLE_THREADED") != std::string::npos ? "single-threaded"
                                                                              : "pthreads";
  const char* forced = gemm_forced_core().empty() ? "" : ", forced by OPENBLAS_CORETYPE";
  return config.substr(0, version_end) + " (" + threads + ", core " + openblas_get_corename() +
         forced + ") for >= " + std::to_string(kGemmBlasMinRows) + " rows, Eigen " +
         std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " below";
}

}  // namespace anuvad
