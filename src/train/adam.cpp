// Adam, the warm-up/inverse-sqrt schedule and gradient-norm clipping.
#include "anuvad/train/adam.h"

#include <algorithm>
#include <cmath>

namespace anuvad {

Adam::Adam(const ParamRegistry& reg, double beta1, double beta2, double eps)
    : beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const Param& p : reg.params()) {
    m_.push_back(Mat::Zero(p.value.rows(), p.value.cols()));
    v_.push_back(Mat::Zero(p.value.rows(), p.value.cols()));
  }
}

void Adam::step(ParamRegistry& reg, double lr, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(step));
  const Scalar b1 = static_cast<Scalar>(beta1_), b2 = static_cast<Scalar>(beta2_);
  const Scalar step_size = static_cast<Scalar>(lr / bc1);
  const Scalar inv_sqrt_bc2 = static_cast<Scalar>(1.0 / std::sqrt(bc2));
  const Scalar eps = static_cast<Scalar>(eps_);
  auto& params = reg.params();
  const int n = static_cast<int>(params.size());
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < n; ++i) {
    Param& p = params[i];
    m_[i] = b1 * m_[i] + (Scalar(1) - b1) * p.grad;
    v_[i] = b2 * v_[i] + (Scalar(1) - b2) * p.grad.cwiseAbs2();
    p.value.array() -= step_size * m_[i].array() / (v_[i].array().sqrt() * inv_sqrt_bc2 + eps);
  }
}

double inverse_sqrt_lr(double peak, int64_t step, int64_t warmup_steps) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(std::max<int64_t>(warmup_steps, 1));
  return peak * std::min(s / w, std::sqrt(w / s));
}

double clip_grad_norm(ParamRegistry& reg, double max_norm) {
  double sq = 0;
  for (const Param& p : reg.params()) sq += static_cast<double>(p.grad.squaredNorm());
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    const Scalar s = static_cast<Scalar>(max_norm / (norm + 1e-12));
    for (Param& p : reg.params()) p.grad *= s;
  }
  return norm;
}

}  // namespace anuvad
