// Decoding results as bytes, to move them between the ranks of an mpirun job
// (Translator::translate_across_ranks): a source's n-best list (tokens, scores, attention
// records) and its search (SentenceTrace), copied bit for bit, so that what rank 0 prints from
// another rank's results is byte-identical to what it prints from its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anuvad/decode/beam_trace.h"
#include "anuvad/decode/decode.h"

namespace anuvad {

/// One source's results as read back by read_result_bytes.
struct SourceResult {
  uint64_t index = 0;             ///< the source's position in the input
  std::vector<Hypothesis> n_best; ///< best first
  bool has_trace = false;         ///< a SentenceTrace was written
  SentenceTrace trace;            ///< the search, when has_trace
};

/// Appends one record to `out`: `index`, every field of every hypothesis of `n_best` (attention
/// matrices included, element for element), and `*trace` when not null. Host byte order: the
/// ranks of one job run the same build.
void append_result_bytes(std::string& out, uint64_t index, const std::vector<Hypothesis>& n_best,
                         const SentenceTrace* trace);

/// Reads the record that starts at `pos` in `bytes` and moves `pos` past it. Throws DataError
/// naming the offset when the bytes end inside the record.
SourceResult read_result_bytes(const std::string& bytes, size_t& pos);

}  // namespace anuvad
