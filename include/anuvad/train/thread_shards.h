// Data parallelism across the threads of one process (issue #15): the sentences of an update's
// batch are cut into contiguous shards of about equal work, one per OpenMP thread, and each
// thread runs the forward pass, the loss and the backward pass of its shard on its own, with
// single-threaded products (core/gemm.h: inside a parallel region every product runs on the
// calling thread). The alternative, splitting every product and element-wise pass of the whole
// batch across the threads, pays a fork/join and a wait at the end of each of the hundreds of
// parallel regions of a step and leaves the serial parts (attention's small per-head products,
// the loss) on one thread; shards per thread have one fork/join for the whole forward and
// backward pass (and one more for the rest of the sum of their gradients). Each shard's
// gradients accumulate in its own slot (Param::grad_acc, t_gradient_slot) and are summed into
// Param::grad in slot order, so a run is deterministic for a given thread count (but not the
// same bits for another count: the sum is cut differently). The sum begins while shards still
// run: a thread whose shard is done adds up the parameters whose gradients every shard has
// finished (the backward pass reports them, GradientsFinal), rather than waiting idle for the
// slowest shard; the slots it reads are zeroed as they are added, so the next step need not
// clear them (small, 2 threads, the two versions alternated step by step in one process, 120
// steps each, three runs: 66.0 / 65.8 / 68.5 ms per step before, 65.2 / 64.4 / 67.7 after). The cost is one
// extra gradient buffer per extra thread (4 bytes per parameter each).
#pragma once

#include <utility>
#include <vector>

#include "anuvad/nn/loss.h"
#include "anuvad/nn/transformer.h"

namespace anuvad {

/// Where the shards of `b` start: cuts[0] = 0 < cuts[1] < … < cuts[n] = b.batch_size, n =
/// min(shards, b.batch_size) contiguous runs of sentences whose costs (src_cost per source
/// token + tgt_cost per target token, any unit) are as equal as a cut between sentences
/// allows: shard k ends at the sentence boundary nearest to k/n of the batch's cost (each
/// shard keeps at least one sentence). Contiguous rather than dealt out to balance better
/// (longest-processing-time first): dealt shards measured slower (small, 2 threads, 3
/// alternated rounds: 62.7 against 60.3 ms per step at the same 5 % idle time). Throws
/// ShapeError when shards < 1 or the batch is empty.
std::vector<int> balanced_shard_cuts(const Batch& b, int shards, double src_cost = 1,
                                     double tgt_cost = 1);

/// Multiply-adds per source token and per target token of a training step's matrix products
/// (forward; the backward pass is twice that): the encoder layers' projections and
/// feed-forward network and the decoder's cross-attention keys/values per source token; the
/// decoder layers' and the output projection's per target token. Attention's own products
/// (quadratic in the lengths) are left out: small at these lengths.
std::pair<double, double> token_costs(const ModelConfig& cfg);

/// Feed-forward weight size (d_model · d_ff values) above which default_thread_shards keeps one
/// shard. Measured with 2 threads (anuvad_bench --mode train, the same batches alternated in one
/// process, median ms per step): tiny (64 · 256) 8.1 → 4.5 and small (256 · 1024) 68.9 → 60.3
/// with two shards (2026-12-03); base (512 · 2048) had no gain then (426 → 444) but 4.7-10 %
/// once the shards' gradient sum overlapped the slowest shard (2026-12-05: 497 → 468, 584 → 532,
/// and 584 → 524 with --clip-norm 1; 11-15 rounds each), for 220 MiB more peak RSS (the second
/// gradient copy, 4 bytes per parameter: 1,287 → 1,508 MiB). Larger models are unmeasured and
/// keep one shard: their products keep both threads busy and their gradient copy is larger.
inline constexpr double kThreadShardsMaxFfnWeight = 512.0 * 2048.0;

/// Shards per batch for `threads` threads: `threads` when d_model · d_ff is at most
/// kThreadShardsMaxFfnWeight, else 1.
int default_thread_shards(const ModelConfig& cfg, int threads);

/// The training loss of an update: label-smoothed cross-entropy (Szegedy et al. 2016 §7) with
/// smoothing ε, and with rdrop_alpha > 0 R-Drop's consistency term on two passes (nn/loss.h
/// rdrop_loss: twice the forward and backward work).
struct StepLoss {
  double label_smoothing = 0.1;
  double rdrop_alpha = 0;
};

/// One update's gradient computation: forward pass with dropout (`dctx`), the loss (StepLoss)
/// and backward pass of a batch, data-parallel across
/// the threads as this file's header describes. Keeps each shard's activations and logits
/// ([Nt_shard, V]) from one update to the next.
class ShardedStep {
 public:
  /// At most `threads` shards (one per thread); 1 computes the whole batch on the calling
  /// thread, its products split across the threads as gemm() does.
  explicit ShardedStep(int threads);
  /// Leaves in model.params() (Param::grad) the gradient of Σ loss / `grad_scale` over the
  /// batch's target tokens, and returns the loss totals (summed over the shards in order).
  /// `final` (the overlapped allreduce's hook, Transformer::backward) is called after every
  /// part of the backward pass with one shard, and once with 0 after the shards' sum with
  /// several. Throws what the forward pass, the loss or the backward pass throw (ShapeError
  /// on a token id outside the vocabularies), after every shard has stopped; the gradients
  /// are then unspecified.
  LossStats run(Transformer& model, const Batch& b, const DropoutContext& dctx,
                const StepLoss& loss, double grad_scale, const GradientsFinal& final = {});
  /// Shards the last run used.
  int last_shards() const { return last_shards_; }
  /// Seconds, summed over the runs, that the shards' threads spent after their shards waiting
  /// for the slowest shard, summing the finished gradients meanwhile (the wall time of the
  /// shards' parallel region minus the mean of the shards' own times), and that wall time:
  /// their ratio is the load imbalance.
  double idle_seconds() const { return idle_seconds_; }
  double region_seconds() const { return region_seconds_; }

 private:
  /// One shard's scratch, reused: its activations and its logits and their gradient [Nt, V];
  /// the twin's for R-Drop's second pass.
  struct Buffers {
    ForwardCache cache, twin_cache;
    Mat logits, dlogits, twin_logits, twin_dlogits;
  };
  int threads_;
  int last_shards_ = 0;
  double idle_seconds_ = 0, region_seconds_ = 0;
  std::vector<Buffers> buffers_;
};

}  // namespace anuvad
