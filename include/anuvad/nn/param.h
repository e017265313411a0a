// Trainable parameters. Every parameter lives in one ParamRegistry under a stable dotted name
// (PyTorch state_dict style, e.g. "decoder.layers.0.cross_attn.k_proj.weight"); the optimizer,
// model-file I/O and gradient checks iterate the registry in registration order.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "anuvad/core/bf16.h"
#include "anuvad/core/int8.h"
#include "anuvad/core/tensor.h"

namespace anuvad {

/// The gradient slot the calling thread's backward passes accumulate into (Param::grad_acc):
/// 0 = Param::grad, k >= 1 = Param::shard_grads[k − 1]. Thread-local, 0 unless a data-parallel
/// step across threads (train/thread_shards.h) sets it for its shards.
inline thread_local int t_gradient_slot = 0;

/// One parameter tensor and its gradient. `value` is [rows, cols]; `shape` is the logical
/// (PyTorch) shape written to the model file: {out, in} for a Linear weight, {n} for a bias or
/// LayerNorm vector (stored as a [1, n] row). `grad` is allocated lazily (empty until the first
/// zero_grad() or backward pass), so a model that only translates holds no gradient memory.
/// A weight read every decoding step may instead live in `bf16` or `int8`
/// (Transformer::set_compute_type): then `value` is empty and `shape` still gives the size.
struct Param {
  std::string name;
  std::vector<int64_t> shape;
  Mat value;
  Mat grad;
  /// Gradients of the other shards of a data-parallel step across threads, one per slot
  /// k >= 1 (train/thread_shards.h; ParamRegistry::sum_gradient_slots adds them into `grad`),
  /// else empty.
  std::vector<Mat> shard_grads;
  Bf16Matrix bf16;  ///< [rows, cols] rounded copy replacing `value` when not empty
  Int8Matrix int8;  ///< [rows, cols] quantized copy replacing `value` when not empty
  /// Rows and columns of the parameter (of `value`, `bf16` or `int8`, whichever holds it).
  Index rows() const { return !bf16.empty() ? bf16.rows : !int8.empty() ? int8.rows : value.rows(); }
  Index cols() const { return !bf16.empty() ? bf16.cols : !int8.empty() ? int8.cols : value.cols(); }
  /// Whether the weight is held in float32 (`value`), as training needs it.
  bool is_float() const { return bf16.empty() && int8.empty(); }
  /// The gradient for accumulation (+=) of the calling thread's slot (t_gradient_slot:
  /// `grad`, or shard_grads[slot − 1], which ParamRegistry::reserve_gradient_slots must have
  /// created): allocated as zeros of value's shape when empty.
  Mat& grad_acc() {
    Mat& g = t_gradient_slot == 0 ? grad : shard_grads[size_t(t_gradient_slot) - 1];
    if (g.rows() != value.rows() || g.cols() != value.cols()) g = Mat::Zero(value.rows(), value.cols());
    return g;
  }
};

/// Owns all parameters in stable storage (references never dangle) in registration order.
class ParamRegistry {
 public:
  /// Registers a zero-initialised parameter. Throws ConfigError on a duplicate name.
  Param& add(const std::string& name, std::vector<int64_t> shape);
  /// Looks a parameter up by name; returns nullptr when absent.
  Param* find(const std::string& name);
  const Param* find(const std::string& name) const;
  /// Sets every gradient (Param::grad) to zero, allocating it on first use (backward passes
  /// accumulate); split across the threads outside a parallel region.
  void zero_grad();
  /// Makes sure every parameter has `slots` − 1 shard gradients (Param::shard_grads), so that
  /// slots 0 .. slots − 1 exist (allocated zero; call before threads use them). slots <= 1
  /// frees them. Shard gradients are zero whenever no data-parallel step is running: they are
  /// allocated zero and sum_gradient_slots zeroes what it adds (train/thread_shards.h).
  void reserve_gradient_slots(int slots);
  /// For the parameters [first, last) in registration order: Param::grad += Σ_k
  /// shard_grads[k] in slot order (the same bits whatever the thread count or which thread
  /// does it), then shard_grads[k] = 0. Split across the threads by value ranges when called
  /// outside a parallel region; on the calling thread inside one.
  void sum_gradient_slots(size_t first = 0, size_t last = SIZE_MAX);
  /// Total number of scalar parameters.
  int64_t num_elements() const;

  std::deque<Param>& params() { return params_; }
  const std::deque<Param>& params() const { return params_; }

 private:
  std::deque<Param> params_;
};

/// Xavier/Glorot uniform initialisation U(-a, a), a = sqrt(6 / (fan_in + fan_out))
/// (Glorot & Bengio 2010, Eq. 16), of a [fan_out, fan_in] weight.
void xavier_uniform(Mat& w, std::mt19937_64& rng);
/// Normal initialisation N(0, std²) of every element.
void normal_init(Mat& w, Scalar std, std::mt19937_64& rng);

}  // namespace anuvad
