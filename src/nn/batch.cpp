// Packed batches.
#include "anuvad/nn/batch.h"

#include <algorithm>
#include <string>
#include <utility>

#include "anuvad/core/error.h"

namespace anuvad {

Packing Packing::of(std::vector<int> lengths) {
  Packing p;
  p.offsets.reserve(lengths.size() + 1);
  p.offsets.push_back(0);
  for (const int len : lengths) {
    ANUVAD_CHECK_SHAPE(len >= 0, "Packing: negative sequence length");
    p.offsets.push_back(p.offsets.back() + len);
    p.max_length = std::max(p.max_length, len);
  }
  p.lengths = std::move(lengths);
  return p;
}

int64_t Batch::n_tgt_tokens() const { return static_cast<int64_t>(tgt_out.size()); }

int64_t Batch::padded_tokens() const {
  return int64_t(batch_size) * (int64_t(src_len) + int64_t(tgt_len));
}

Batch make_batch(const std::vector<const Example*>& examples) {
  ANUVAD_CHECK_SHAPE(!examples.empty(), "make_batch: no examples");
  Batch b;
  b.batch_size = static_cast<int>(examples.size());
  for (const Example* e : examples) {
    b.src_lengths.push_back(static_cast<int>(e->src.size()) + 1);
    b.tgt_lengths.push_back(static_cast<int>(e->tgt.size()) + 1);
  }
  b.src_rows = Packing::of(b.src_lengths);
  b.tgt_rows = Packing::of(b.tgt_lengths);
  b.src_len = b.src_rows.max_length;
  b.tgt_len = b.tgt_rows.max_length;
  b.src.reserve(size_t(b.src_rows.rows()));
  b.tgt_in.reserve(size_t(b.tgt_rows.rows()));
  b.tgt_out.reserve(size_t(b.tgt_rows.rows()));
  for (const Example* e : examples) {
    b.src.insert(b.src.end(), e->src.begin(), e->src.end());
    b.src.push_back(kEosId);
    b.tgt_in.push_back(kBosId);
    b.tgt_in.insert(b.tgt_in.end(), e->tgt.begin(), e->tgt.end());
    b.tgt_out.insert(b.tgt_out.end(), e->tgt.begin(), e->tgt.end());
    b.tgt_out.push_back(kEosId);
  }
  return b;
}

Batch sub_batch(const Batch& b, int first, int last) {
  ANUVAD_CHECK_SHAPE(0 <= first && first < last && last <= b.batch_size,
                     "sub_batch: sentences [" + std::to_string(first) + ", " + std::to_string(last) +
                         ") of a batch of " + std::to_string(b.batch_size));
  Batch s;
  s.batch_size = last - first;
  s.src_lengths.assign(b.src_lengths.begin() + first, b.src_lengths.begin() + last);
  s.tgt_lengths.assign(b.tgt_lengths.begin() + first, b.tgt_lengths.begin() + last);
  s.src_rows = Packing::of(s.src_lengths);
  s.tgt_rows = Packing::of(s.tgt_lengths);
  s.src_len = s.src_rows.max_length;
  s.tgt_len = s.tgt_rows.max_length;
  const auto src0 = b.src.begin() + b.src_rows.offsets[first];
  const auto tgt0 = b.tgt_rows.offsets[first], tgt1 = b.tgt_rows.offsets[last];
  s.src.assign(src0, b.src.begin() + b.src_rows.offsets[last]);
  s.tgt_in.assign(b.tgt_in.begin() + tgt0, b.tgt_in.begin() + tgt1);
  s.tgt_out.assign(b.tgt_out.begin() + tgt0, b.tgt_out.begin() + tgt1);
  return s;
}

}  // namespace anuvad
