// Sums of float arrays accumulated in double precision, vectorised.
#pragma once

#include "anuvad/core/tensor.h"

namespace anuvad {

/// Σ x[i] for i in [0, n), accumulated in double. An OpenMP SIMD reduction: the compiler keeps
/// one double accumulator per vector lane (Eigen's `cast<double>().sum()` does not vectorise the
/// cast and runs ~8x slower), so the order of the additions is fixed by the compiled code, never
/// by the thread count. NaN or ±Inf in x give a non-finite result.
inline double sum_in_double(const Scalar* x, Index n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (Index i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  return s;
}

/// Σ x[i]² for i in [0, n), accumulated in double; vectorised as sum_in_double.
inline double sum_of_squares_in_double(const Scalar* x, Index n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (Index i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    s += v * v;
  }
  return s;
}

}  // namespace anuvad
