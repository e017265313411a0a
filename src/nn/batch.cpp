// Padded batches.
#include "anuvad/nn/batch.h"

#include <algorithm>

#include "anuvad/core/error.h"

namespace anuvad {

int64_t Batch::n_tgt_tokens() const {
  int64_t n = 0;
  for (int len : tgt_lengths) n += len;
  return n;
}

Batch make_batch(const std::vector<const Example*>& examples) {
  ANUVAD_CHECK_SHAPE(!examples.empty(), "make_batch: no examples");
  Batch b;
  b.batch_size = static_cast<int>(examples.size());
  for (const Example* e : examples) {
    b.src_lengths.push_back(static_cast<int>(e->src.size()) + 1);
    b.tgt_lengths.push_back(static_cast<int>(e->tgt.size()) + 1);
  }
  b.src_len = *std::max_element(b.src_lengths.begin(), b.src_lengths.end());
  b.tgt_len = *std::max_element(b.tgt_lengths.begin(), b.tgt_lengths.end());
  b.src.assign(size_t(b.batch_size) * b.src_len, kPadId);
  b.tgt_in.assign(size_t(b.batch_size) * b.tgt_len, kPadId);
  b.tgt_out.assign(size_t(b.batch_size) * b.tgt_len, kPadId);
  for (int i = 0; i < b.batch_size; ++i) {
    const Example& e = *examples[i];
    int32_t* src = &b.src[size_t(i) * b.src_len];
    std::copy(e.src.begin(), e.src.end(), src);
    src[e.src.size()] = kEosId;
    int32_t* tin = &b.tgt_in[size_t(i) * b.tgt_len];
    int32_t* tout = &b.tgt_out[size_t(i) * b.tgt_len];
    tin[0] = kBosId;
    std::copy(e.tgt.begin(), e.tgt.end(), tin + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), tout);
    tout[e.tgt.size()] = kEosId;
  }
  return b;
}

}  // namespace anuvad
