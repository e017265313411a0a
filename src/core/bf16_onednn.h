// The oneDNN path of bf16_affine (include/anuvad/core/bf16.h, Bf16Kernel::kOnednn): oneDNN's
// matmul on bfloat16 activations and weights with float32 results, the weights packed once
// into the blocked layout its AVX-512 BF16 "brgemm" kernels read. Private to src/core.
#pragma once

#include <memory>

#include "anuvad/core/bf16.h"

namespace anuvad::detail {

/// Whether this build links oneDNN (ANUVAD_WITH_ONEDNN) and oneDNN finds at least AVX-512 BF16
/// on this CPU (checked once; without it oneDNN would emulate bfloat16, unmeasured here).
bool onednn_available();

/// An empty packing slot for a [n, k] Bf16Matrix (filled on first onednn_multiply), or null
/// when !onednn_available(). Never throws but bad_alloc.
std::shared_ptr<OnednnWeights> onednn_weights_slot();

/// Packs w.onednn now (as the first onednn_multiply would). Throws ConfigError as it does.
void onednn_pack(const Bf16Matrix& w);

/// w's row-major values [n, k] read back from its packed copy. Throws ConfigError without one.
std::vector<uint16_t> onednn_unpack(const Bf16Matrix& w);

/// y [m, n] (row stride ldy, overwritten) = x·Wᵀ + bias: x [m, k] float32 (row stride ldx),
/// rounded to bfloat16 as float_to_bf16 does (its rows split across the threads from
/// kParallelMinElements values), w [n, k], bias [n] float32 or null; float32 sums, the bias
/// added in oneDNN's epilogue. Packs w.onednn on the first call (thread-safe). Runs on
/// omp_get_max_threads() threads outside a parallel region, the calling thread inside one. One
/// oneDNN primitive per (rows rounded up to 8 or a multiple of 16, k, n, with or without bias),
/// made on first use and kept for the process (a few dozen for a model). Throws ConfigError
/// when w has no oneDNN slot (oneDNN unavailable) or oneDNN fails.
void onednn_multiply(const float* x, Index ldx, Index m, const Bf16Matrix& w, const float* bias, float* y,
                     Index ldy);

}  // namespace anuvad::detail
