// Parameter registry and initialisers.
#include "anuvad/nn/param.h"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

namespace anuvad {

Param& ParamRegistry::add(const std::string& name, std::vector<int64_t> shape) {
  if (find(name) != nullptr) throw ConfigError("duplicate parameter name: " + name);
  Index rows = shape.size() == 2 ? shape[0] : 1;
  Index cols = shape.size() == 2 ? shape[1] : shape.at(0);
  Param& p = params_.emplace_back();
  p.name = name;
  p.shape = std::move(shape);
  p.value = Mat::Zero(rows, cols);
  return p;
}

Param* ParamRegistry::find(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const Param* ParamRegistry::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

void ParamRegistry::zero_grad() {
  for (auto& p : params_)  // allocates the missing ones (serially)
    if (p.grad.rows() != p.value.rows() || p.grad.cols() != p.value.cols())
      p.grad = Mat::Zero(p.value.rows(), p.value.cols());
  // Each gradient's lines split across the threads (a memset of every parameter's size).
#pragma omp parallel if (!omp_in_parallel())
  {
    const Index t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (auto& p : params_) {
      const auto [first, last] = line_block(p.grad.size(), t, nt);
      if (last > first) std::fill(p.grad.data() + first, p.grad.data() + last, Scalar(0));
    }
  }
}

void ParamRegistry::reserve_gradient_slots(int slots) {
  const size_t extra = slots > 1 ? size_t(slots) - 1 : 0;
  for (auto& p : params_) {
    if (extra == 0) {
      std::vector<Mat>().swap(p.shard_grads);
      continue;
    }
    p.shard_grads.resize(extra);
    for (Mat& g : p.shard_grads)
      if (g.rows() != p.value.rows() || g.cols() != p.value.cols()) g = Mat::Zero(p.value.rows(), p.value.cols());
  }
}

namespace {

/// Values summed at a time by add_slots: the slots' chunks are read, then zeroed, while they
/// are still in L1/L2 (a multiple of 16: chunk boundaries stay on 64-byte lines).
constexpr Index kSlotChunk = 2048;

/// grad[first, last) += Σ_k shard_grads[k][first, last) in slot order, then zeroes those
/// values of the shard gradients.
void add_slots(Param& p, Index first, Index last) {
  using Values = Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>;
  for (Index c0 = first; c0 < last; c0 += kSlotChunk) {
    const Index len = std::min(kSlotChunk, last - c0);
    Values g(p.grad.data() + c0, len);
    for (Mat& s : p.shard_grads) {
      Values slot(s.data() + c0, len);
      g += slot;
      slot.setZero();
    }
  }
}

}  // namespace

void ParamRegistry::sum_gradient_slots(size_t first, size_t last) {
  last = std::min(last, params_.size());
  if (first >= last) return;
  if (omp_in_parallel()) {
    for (size_t i = first; i < last; ++i)
      if (!params_[i].shard_grads.empty()) add_slots(params_[i], 0, params_[i].grad.size());
    return;
  }
#pragma omp parallel
  {
    const Index t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (size_t i = first; i < last; ++i) {
      Param& p = params_[i];
      if (p.shard_grads.empty()) continue;
      const auto [v0, v1] = line_block(p.grad.size(), t, nt);
      if (v1 > v0) add_slots(p, v0, v1);
    }
  }
}

int64_t ParamRegistry::num_elements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.rows() * p.cols();
  return n;
}

void xavier_uniform(Mat& w, std::mt19937_64& rng) {
  const double a = std::sqrt(6.0 / static_cast<double>(w.rows() + w.cols()));
  std::uniform_real_distribution<double> dist(-a, a);
  for (Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<Scalar>(dist(rng));
}

void normal_init(Mat& w, Scalar std, std::mt19937_64& rng) {
  std::normal_distribution<double> dist(0.0, static_cast<double>(std));
  for (Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<Scalar>(dist(rng));
}

}  // namespace anuvad
