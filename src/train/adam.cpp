// Adam, the warm-up/inverse-sqrt schedule and gradient-norm clipping.
#include "anuvad/train/adam.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"
#include "anuvad/core/reduce.h"

namespace anuvad {

namespace {

/// Values Adam::step updates in one go (a multiple of 16: chunk boundaries stay line-aligned).
constexpr Index kAdamChunk = 2048;

}  // namespace

Adam::Adam(const ParamRegistry& reg, double beta1, double beta2, double eps)
    : beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const Param& p : reg.params()) {
    m_.push_back(Mat::Zero(p.value.rows(), p.value.cols()));
    v_.push_back(Mat::Zero(p.value.rows(), p.value.cols()));
  }
}

void Adam::step(ParamRegistry& reg, double lr, int64_t step, Scalar grad_scale) {
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(step));
  const Scalar b1 = static_cast<Scalar>(beta1_), b2 = static_cast<Scalar>(beta2_);
  const Scalar step_size = static_cast<Scalar>(lr / bc1);
  const Scalar inv_sqrt_bc2 = static_cast<Scalar>(1.0 / std::sqrt(bc2));
  const Scalar eps = static_cast<Scalar>(eps_);
  auto& params = reg.params();
  const int n = static_cast<int>(params.size());
  for (int i = 0; i < n; ++i)
    ANUVAD_CHECK_SHAPE(params[i].grad.size() == params[i].value.size() &&
                           m_[i].size() == params[i].value.size() && v_[i].size() == params[i].value.size(),
                       "Adam::step: " + params[i].name + " has no gradient or moments of its size");
  // Every value is updated by the same expression; each parameter's values are split across
  // the threads by line_block (core/parallel.h), so the result does not depend on their count.
  using Values = Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
#pragma omp parallel
  {
    const Index t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int i = 0; i < n; ++i) {
      Param& p = params[i];
      const auto [first, last] = line_block(p.value.size(), t, nt);
      // Chunks of kAdamChunk values, so that the three statements read m and v from L1/L2
      // rather than memory (7 streams of the parameter's size instead of 10).
      for (Index c0 = first; c0 < last; c0 += kAdamChunk) {
        const Index len = std::min(kAdamChunk, last - c0);
        Values g(p.grad.data() + c0, len), m(m_[i].data() + c0, len), v(v_[i].data() + c0, len);
        Values theta(p.value.data() + c0, len);
        m = b1 * m + (Scalar(1) - b1) * (g * grad_scale);
        v = b2 * v + (Scalar(1) - b2) * (g * grad_scale).square();
        theta -= step_size * m / (v.sqrt() * inv_sqrt_bc2 + eps);
      }
    }
  }
}

double inverse_sqrt_lr(double peak, int64_t step, int64_t warmup_steps) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(std::max<int64_t>(warmup_steps, 1));
  return peak * std::min(s / w, std::sqrt(w / s));
}

namespace {

/// Values per block of gradient_norm (a fixed size, so that the sums do not depend on the
/// thread count).
constexpr Index kNormBlock = 4096;

}  // namespace

double gradient_norm(const ParamRegistry& reg) {
  struct Block {
    const Scalar* data;
    Index size;
  };
  std::vector<Block> blocks;
  for (const Param& p : reg.params())
    for (Index i = 0; i < p.grad.size(); i += kNormBlock)
      blocks.push_back({p.grad.data() + i, std::min(kNormBlock, p.grad.size() - i)});
  std::vector<double> sums(blocks.size());
  const int n = static_cast<int>(blocks.size());
#pragma omp parallel for schedule(static) if (n > 16)
  for (int b = 0; b < n; ++b) sums[b] = sum_of_squares_in_double(blocks[b].data, blocks[b].size);
  double sq = 0;
  for (const double s : sums) sq += s;
  return std::sqrt(sq);
}

Scalar clip_coefficient(double norm, double max_norm) {
  if (max_norm > 0 && norm > max_norm) return static_cast<Scalar>(max_norm / (norm + 1e-12));
  return Scalar(1);
}

double clip_grad_norm(ParamRegistry& reg, double max_norm) {
  const double norm = gradient_norm(reg);
  const Scalar s = clip_coefficient(norm, max_norm);
  if (s != Scalar(1))
    for (Param& p : reg.params()) p.grad *= s;
  return norm;
}

}  // namespace anuvad
