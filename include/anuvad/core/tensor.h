// Basic tensor types for anuvad. All activations are row-major matrices in which one row is one
// token: a padded batch of B sentences of length T is a [B·T, D] matrix, row b·T + t.
// The scalar type is float in the product and double in the gradient-check build
// (the same sources compiled with -DANUVAD_SCALAR=double).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#ifndef ANUVAD_SCALAR
#define ANUVAD_SCALAR float
#endif

namespace anuvad {

using Scalar = ANUVAD_SCALAR;
using Index = Eigen::Index;
/// Row-major dynamic matrix; a row is one token.
using Mat = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Row vector [1, n], used for biases and per-feature parameters.
using RowVec = Eigen::Matrix<Scalar, 1, Eigen::Dynamic, Eigen::RowMajor>;
/// Token ids of a padded batch, [B·T], row-major (sentence b, position t at b·T + t).
using TokenIds = std::vector<int32_t>;

/// Special token ids, fixed for every anuvad vocabulary (source and target).
inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;

}  // namespace anuvad
