// Finite-difference gradient checking for the double-precision test build.
// A module's output y is reduced to the scalar L = Σ R ⊙ y with a fixed random R, so dL/dy = R;
// the analytic gradient from backward is compared with central differences
// (L(θ + h) − L(θ − h)) / 2h, element by element (all elements of small tensors, a seeded sample
// of large ones). In double precision with h = 1e-6 the truncation error h²·f'''/6 dominates;
// with the tests' inputs (activations of spread ~1 into each nonlinearity) every check stays
// below 5e-8 (release and sanitizer builds), so a bound of 1e-6 relative (absolute below 1)
// catches any real mistake. Inputs that saturate a softmax or a GELU raise f''' and can reach it.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "anuvad/nn/param.h"

namespace anuvad::test {

/// Fills a [rows, cols] matrix with N(0, scale²) values from a seeded generator.
inline Mat random_mat(Index rows, Index cols, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<Scalar>(d(rng));
  return m;
}

/// max |a − b| / max(max |b|, 1e-12): the relative deviation of a from the reference b. Both
/// must have the same shape (REQUIREd by the callers' Catch2 checks on the result).
inline double rel_diff(const Mat& a, const Mat& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return std::numeric_limits<double>::infinity();
  const double scale = std::max(static_cast<double>(b.cwiseAbs().maxCoeff()), 1e-12);
  return static_cast<double>((a - b).cwiseAbs().maxCoeff()) / scale;
}

/// L = Σ R ⊙ y.
inline double weighted_sum(const Mat& y, const Mat& r) { return static_cast<double>((y.array() * r.array()).sum()); }

/// Largest error |analytic − numeric| / max(1, |numeric|) over (a sample of) the elements of x.
/// `loss` recomputes L from the current contents of x.
inline double max_grad_error(Mat& x, const Mat& analytic, const std::function<double()>& loss,
                             int max_checks = 400, double h = 1e-6) {
  std::vector<Index> idx(static_cast<size_t>(x.size()));
  for (Index i = 0; i < x.size(); ++i) idx[static_cast<size_t>(i)] = i;
  if (x.size() > max_checks) {
    std::mt19937_64 rng(12345);
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(static_cast<size_t>(max_checks));
  }
  double worst = 0;
  for (Index i : idx) {
    const Scalar saved = x.data()[i];
    x.data()[i] = saved + h;
    const double up = loss();
    x.data()[i] = saved - h;
    const double down = loss();
    x.data()[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double a = static_cast<double>(analytic.data()[i]);
    worst = std::max(worst, std::abs(a - numeric) / std::max(1.0, std::abs(numeric)));
  }
  return worst;
}

/// Largest gradient error over every parameter of `reg` (gradients must already hold dL/dθ).
inline double max_param_grad_error(ParamRegistry& reg, const std::function<double()>& loss,
                                   int max_checks_per_param = 60, std::string* worst_name = nullptr) {
  double worst = 0;
  for (Param& p : reg.params()) {
    const Mat analytic = p.grad;
    const double e = max_grad_error(p.value, analytic, loss, max_checks_per_param);
    if (e > worst) {
      worst = e;
      if (worst_name) *worst_name = p.name;
    }
  }
  return worst;
}

}  // namespace anuvad::test
