// Optimiser and learning-rate schedule.
#pragma once

#include <vector>

#include "anuvad/nn/param.h"

namespace anuvad {

/// Adam (Kingma & Ba 2015, arXiv:1412.6980, Algorithm 1) with Vaswani et al. 2017 §5.3 defaults
/// β1 = 0.9, β2 = 0.98, ε = 1e-9; no weight decay. Moments are kept per parameter in registry
/// order; the caller passes the 1-based step so bias correction advances once per step.
class Adam {
 public:
  explicit Adam(const ParamRegistry& reg, double beta1 = 0.9, double beta2 = 0.98,
                double eps = 1e-9);
  /// θ ← θ − lr · m̂ / (√v̂ + ε) for every parameter, using its current grad times
  /// `grad_scale` (clip_coefficient's factor: clipping folded into the update, the gradients
  /// themselves are left as they are). Values are split across the threads; the result does
  /// not depend on the thread count.
  void step(ParamRegistry& reg, double lr, int64_t step, Scalar grad_scale = Scalar(1));
  /// First and second moment estimates, one per parameter in registry order (for checkpoints).
  std::vector<Mat>& first_moments() { return m_; }
  std::vector<Mat>& second_moments() { return v_; }

 private:
  double beta1_, beta2_, eps_;
  std::vector<Mat> m_, v_;
};

/// Learning rate at a 1-based step: linear warm-up to `peak` over `warmup_steps`, then inverse
/// square-root decay, lr = peak · min(step / warmup, √(warmup / step)) (Vaswani et al. 2017
/// Eq. 3 with the d_model^−½ factor folded into `peak`).
double inverse_sqrt_lr(double peak, int64_t step, int64_t warmup_steps);

/// Global L2 norm of all gradients (every value of every parameter; Pascanu et al. 2013 §3.2):
/// squares summed in double per block of 4,096 values, the blocks split across the threads and
/// their sums added in registry order (the same bits whatever the thread count). NaN or Inf
/// exactly when a gradient value is (double squares of floats cannot overflow).
double gradient_norm(const ParamRegistry& reg);

/// The factor gradient clipping multiplies the gradients by: max_norm / norm when max_norm > 0
/// and norm > max_norm, else 1.
Scalar clip_coefficient(double norm, double max_norm);

/// Global L2 norm of all gradients; if it exceeds max_norm > 0, scales them to max_norm
/// (Pascanu et al. 2013). Returns the norm before clipping.
double clip_grad_norm(ParamRegistry& reg, double max_norm);

}  // namespace anuvad
