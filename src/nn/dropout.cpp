// Counter-based dropout masks (see include/anuvad/nn/dropout.h).
#include "anuvad/nn/dropout.h"


#include <algorithm>

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

namespace anuvad {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment, 2^64/φ

/// The drop test of one 32-bit uniform u: dropped when u < threshold = ⌊p·2^32⌋ (so with
/// probability p to within 2^-32), else multiplied by keep = 1/(1−p).
struct DropRule {
  explicit DropRule(Scalar p)
      : threshold(static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0)),
        keep(Scalar(1) / (Scalar(1) - p)) {}
  uint32_t threshold;
  Scalar keep;
};

/// Fills out[0, cols) from the SplitMix64 sequence seeded with `row_key` (state row_key + i·γ,
/// output i): output i gives columns 2i (its low 32 bits) and 2i + 1 (its high 32 bits).
/// (The rule is passed by value so that the loop vectorises: no aliasing with `out`.)
void fill_row(uint64_t row_key, const DropRule rule, Scalar* out, Index cols) {
  const uint32_t threshold = rule.threshold;
  const Scalar keep = rule.keep;
  const Index pairs = cols / 2;
  for (Index i = 0; i < pairs; ++i) {
    const uint64_t z = splitmix64(row_key + static_cast<uint64_t>(i) * kGamma);
    out[2 * i] = static_cast<uint32_t>(z) < threshold ? Scalar(0) : keep;
    out[2 * i + 1] = static_cast<uint32_t>(z >> 32) < threshold ? Scalar(0) : keep;
  }
  if (cols % 2 != 0) {
    const uint64_t z = splitmix64(row_key + static_cast<uint64_t>(pairs) * kGamma);
    out[cols - 1] = static_cast<uint32_t>(z) < threshold ? Scalar(0) : keep;
  }
}

/// Runs fill(b) for every sentence b of `batch`, split across the threads when the mask has
/// `elements` enough to pay for it (each element is a pure function of its coordinates, so
/// the split changes nothing).
template <typename Fill>
void for_each_sentence(int batch, Index elements, const Fill& fill) {
  parallel_for(batch, elements >= (Index(1) << 16), fill);
}

}  // namespace

DropoutContext DropoutContext::training(uint64_t seed, int64_t step, int64_t first_sentence) {
  DropoutContext c;
  c.active_ = true;
  c.key_ = derive_key(seed, static_cast<uint64_t>(step));
  c.first_sentence_ = first_sentence;
  return c;
}

DropoutContext DropoutContext::site(uint64_t id) const {
  DropoutContext c = *this;
  if (active_) c.key_ = derive_key(key_, id);
  return c;
}

DropoutContext DropoutContext::with_layer_drop(Scalar p) const {
  DropoutContext c = *this;
  if (!active_ || p <= Scalar(0)) return c;
  c.layer_drop_ = p;
  c.layer_key_ = derive_key(key_, dropout_site::kLayerDrop);
  return c;
}

Scalar DropoutContext::layer_keep(int b) const {
  if (!active_ || layer_drop_ <= Scalar(0)) return Scalar(1);
  const DropRule rule(layer_drop_);
  const uint64_t z = splitmix64(derive_key(layer_key_, static_cast<uint64_t>(first_sentence_ + b)));
  return static_cast<uint32_t>(z) < rule.threshold ? Scalar(0) : rule.keep;
}

DropoutContext DropoutContext::over(const Packing& rows) const {
  DropoutContext c = *this;
  c.rows_ = &rows;
  return c;
}

void make_dropout_mask(Index cols, Scalar p, const DropoutContext& ctx, Mat& mask) {
  if (!ctx.active() || (p <= Scalar(0) && ctx.layer_drop() <= Scalar(0))) {
    mask.resize(0, 0);
    return;
  }
  const Packing* rows = ctx.rows();
  ANUVAD_CHECK_SHAPE(rows != nullptr, "dropout: an active context without a row layout");
  mask.resize(rows->rows(), cols);
  const DropRule rule(std::max(p, Scalar(0)));
  for_each_sentence(rows->batch_size(), mask.size(), [&](int b) {
    const uint64_t key = ctx.sentence_key(b);
    auto block = mask.middleRows(rows->offsets[b], rows->lengths[b]);
    if (p > Scalar(0)) {
      for (int t = 0; t < rows->lengths[b]; ++t)
        fill_row(derive_key(key, static_cast<uint64_t>(t)), rule, mask.row(rows->offsets[b] + t).data(), cols);
    } else {
      block.setOnes();
    }
    if (ctx.layer_drop() > Scalar(0)) block *= ctx.layer_keep(b);
  });
}

void make_attention_dropout_mask(const Packing& q_rows, int n_heads, Index n_keys, Scalar p,
                                 const DropoutContext& ctx, Mat& mask) {
  if (!ctx.active() || p <= Scalar(0)) {
    mask.resize(0, 0);
    return;
  }
  const int n_queries = q_rows.max_length;
  mask.resize(Index(q_rows.batch_size()) * n_heads * n_queries, n_keys);
  const DropRule rule(p);
  for_each_sentence(q_rows.batch_size(), mask.size(), [&](int b) {
    const uint64_t key = ctx.sentence_key(b);
    for (int h = 0; h < n_heads; ++h) {
      const Index first = (Index(b) * n_heads + h) * n_queries;
      for (int q = 0; q < q_rows.lengths[b]; ++q)
        fill_row(derive_key(key, (static_cast<uint64_t>(h) << 32) | static_cast<uint64_t>(q)), rule,
                 mask.row(first + q).data(), n_keys);
      mask.middleRows(first + q_rows.lengths[b], n_queries - q_rows.lengths[b]).setOnes();
    }
  });
}

}  // namespace anuvad
