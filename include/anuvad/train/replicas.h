// Synchronous data parallelism across the ranks of an mpirun job (issue #17), on top of
// core/distributed.h: every rank holds a replica of the whole model; each update's global
// batch is cut into contiguous shards of sentences, one per rank; the shards' gradients are
// summed with one fused allreduce, so that Adam then makes the same update on every rank.
// A single process can compute the same shards one after the other (TrainOptions::
// simulate_ranks), which reproduces an N-rank run bit for bit for N = 2 (one float addition per
// element, commutative) and up to summation order for more.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/nn/param.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/train/checkpoint.h"

namespace anuvad {

/// Sentences [first, last) of a global batch of `batch_size` sentences that shard `shard` of
/// `shards` takes: contiguous, in order, sizes differing by at most one (a shard may be empty
/// when batch_size < shards).
std::pair<size_t, size_t> shard_range(size_t batch_size, int shard, int shards);

/// The summed gradient of one update, flattened in registry order into one buffer so that a
/// single allreduce moves it (2·(N−1)/N × its bytes per rank with a ring).
class GradientSum {
 public:
  /// Adds the gradients now in `params` to the sum (the first call of an update copies them).
  void add(const ParamRegistry& params);
  /// Adds nothing, but counts as a shard (an empty shard; the first call zero-fills).
  void add_zero(const ParamRegistry& params);
  /// Seconds of one reduce_into: waiting at a barrier for the slowest rank (load imbalance),
  /// then in the allreduce itself (the transfer and the sums).
  struct Timing {
    double wait = 0, allreduce = 0;
  };
  /// Sums the buffer over all ranks (allreduce), writes it into the gradients of `params` and
  /// starts a new update.
  Timing reduce_into(ParamRegistry& params);

 private:
  void ensure_size(const ParamRegistry& params);
  std::vector<Scalar> sum_;
  bool empty_ = true;  ///< no shard added since the last reduce_into
};

/// FNV-1a hash of the bytes of every weight (registry order), for replica checks.
uint64_t weights_hash(const ParamRegistry& params);

/// Throws NumericError "step N: the weights of the ranks differ ..." when the replicas are not
/// bit-identical (one allreduce of the hash); true without MPI.
void check_replicas_identical(const ParamRegistry& params, int64_t step);

/// Copies rank 0's weights to every rank (MPI_Bcast), so that every replica starts identical.
void broadcast_weights(ParamRegistry& params);

/// Gives every rank rank 0's tokenizers: rank 0 passes its own, the others get copies from
/// their serialized SentencePiece protos.
void broadcast_tokenizers(std::unique_ptr<Tokenizer>& src, std::unique_ptr<Tokenizer>& tgt);

/// Rank 0's checkpoint file on every rank (the file need not exist on the other hosts): rank 0
/// sends the file's bytes, the others read them through a private temporary file. Throws what
/// read_checkpoint throws.
Checkpoint broadcast_checkpoint(const std::string& path, const nlohmann::json& fingerprint, bool with_ema);

}  // namespace anuvad
