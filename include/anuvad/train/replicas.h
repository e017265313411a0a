// Synchronous data parallelism across the ranks of an mpirun job (issue #17), on top of
// core/distributed.h: every rank holds a replica of the whole model; each update's global
// batch is cut into contiguous shards of sentences, one per rank; the shards' gradients are
// summed over the ranks, either with one fused allreduce after the backward pass (GradientSum)
// or in buckets started while the backward pass still runs (GradientBuckets, as PyTorch DDP and
// Horovod do), so that Adam then makes the same update on every rank.
// A single process can compute the same shards one after the other (TrainOptions::
// simulate_ranks), which reproduces an N-rank run bit for bit for N = 2 (one float addition per
// element, commutative) and up to summation order for more.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/core/distributed.h"
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
  /// Sums the buffer over all ranks (one blocking allreduce), writes it into the gradients of
  /// `params` and starts a new update.
  void reduce_into(ParamRegistry& params);

 private:
  void ensure_size(const ParamRegistry& params);
  std::vector<Scalar> sum_;
  bool empty_ = true;  ///< no shard added since the last reduce_into
};

/// How an mpirun job sums its gradients (--allreduce): kFused = one blocking allreduce of all
/// of them after the backward pass (GradientSum); kOverlap = buckets started during the backward
/// pass, MPI polled (MPI_Testall) after every layer; kOverlapLazy = the same buckets, not polled
/// (Open MPI then moves them only in the update's later MPI calls).
enum class AllreduceMode { kFused, kOverlap, kOverlapLazy };

/// "fused", "overlap" or "overlap-lazy" → the mode; throws ConfigError naming --allreduce for
/// another value.
AllreduceMode parse_allreduce_mode(const std::string& name);

/// One rank's gradients summed over all ranks while its backward pass still runs (the bucketed
/// allreduce of PyTorch DDP and Horovod). The parameters are cut, from the last in registry
/// order (the output side, whose gradients the backward pass finishes first) to the first,
/// into buckets of consecutive parameters of at least `bucket_bytes` each (the last one
/// smaller, a parameter never split). A bucket is copied into its own buffer and its sum
/// started (MPI_Iallreduce) as soon as the backward pass has finished every gradient in it
/// (gradients_final, the Transformer::backward hook); finish() waits for them all. The sums are
/// the same as GradientSum's: with 2 ranks bit for bit (one addition per element).
class GradientBuckets {
 public:
  /// Plans the buckets of `params` (gradients allocated or not); `poll` = MPI_Testall after
  /// every gradients_final call (AllreduceMode::kOverlap). Throws ConfigError when
  /// bucket_bytes is 0.
  GradientBuckets(const ParamRegistry& params, size_t bucket_bytes, bool poll);
  /// GradientsFinal hook: every gradient at registry index >= first_final is final. Starts, in
  /// descending order, each bucket not yet started that lies wholly in that range (every rank
  /// thus starts the same sums in the same order); then polls when `poll`. Call it with 0
  /// before the update's next collective (it starts whatever is left, zeros for an empty shard).
  void gradients_final(const ParamRegistry& params, size_t first_final);
  /// Waits for every bucket's sum (MPI_Waitall), writes the sums into the gradients of
  /// `params` and starts a new update. Throws Error when a bucket was never started.
  void finish(ParamRegistry& params);
  /// Number of buckets.
  size_t size() const { return buckets_.size(); }

 private:
  struct Bucket {
    size_t first = 0, last = 0;  ///< parameters [first, last) in registry order
    std::vector<Scalar> sum;     ///< their gradients, flattened in registry order
  };
  std::vector<Bucket> buckets_;  ///< in registry order; started from the back
  size_t unstarted_ = 0;         ///< buckets [0, unstarted_) not started in this update
  bool poll_ = true;
  AsyncSums sums_;
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
