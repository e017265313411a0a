// Translation of many sentences: batching and ordering around beam_search.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "anuvad/decode/beam_trace.h"
#include "anuvad/decode/decode.h"
#include "anuvad/nn/batch.h"
#include "anuvad/text/tokenizer.h"

namespace anuvad {

/// Translates lists of sources with beam_search: the sources are ordered by length (a stable
/// sort, so equal lengths keep input order), cut into mini-batches of `mini_batch` sentences
/// (less padding; beam_search's results do not depend on the batch), and the results come
/// back in input order. What `translate`, `evaluate`, training validation and the benchmark
/// run.
class Translator {
 public:
  /// mini_batch: sentences decoded together (values below 1 count as 1). `models`: one
  /// Transformer or an ensemble (decode/ensemble.h; the Ensemble is copied, its models are
  /// not); the models must outlive the Translator.
  Translator(const Ensemble& models, const DecodeOptions& opts, int mini_batch);

  /// The opts.n_best hypotheses of each source (subword ids without EOS), best first, in input
  /// order; with a trace, trace->sentences gets the search of each source, in input order.
  /// Throws as beam_search.
  std::vector<std::vector<Hypothesis>> translate(const std::vector<std::vector<int32_t>>& sources,
                                                 BeamTrace* trace = nullptr) const;
  /// The best hypothesis of each source detokenized with `tgt`, in input order.
  std::vector<std::string> translate_text(const std::vector<std::vector<int32_t>>& sources,
                                          const Tokenizer& tgt) const;

  /// translate across the ranks of an mpirun job (core/distributed.h), every rank calling it
  /// with the same sources and options (a trace on every rank or on none): mini-batch j of the
  /// same length-ordered mini-batches is decoded by rank j mod N, each rank's results travel to
  /// rank 0 as bytes (decode/result_bytes.h, gather_to_root), and rank 0 gets translate()'s
  /// n-best lists and trace->sentences in input order, bit for bit; the other ranks get an
  /// empty vector and an empty trace. translate() with one rank. Throws as beam_search.
  std::vector<std::vector<Hypothesis>> translate_across_ranks(const std::vector<std::vector<int32_t>>& sources,
                                                              BeamTrace* trace = nullptr) const;
  /// translate_text across the ranks (translate_across_ranks, then the best hypothesis of each
  /// source detokenized on rank 0): every translation in input order on rank 0, byte-identical
  /// to translate_text; an empty vector on the other ranks.
  std::vector<std::string> translate_text_across_ranks(const std::vector<std::vector<int32_t>>& sources,
                                                       const Tokenizer& tgt) const;

  const DecodeOptions& options() const { return opts_; }

 private:
  /// Decodes the sources mini-batch by mini-batch (only the batches j with j mod `stride` ==
  /// `first`) and hands each source's n-best list with its input index to `sink`, in length
  /// order (and, with a trace, its search to trace->sentences).
  void run(const std::vector<std::vector<int32_t>>& sources,
           const std::function<void(size_t, std::vector<Hypothesis>&&)>& sink,
           BeamTrace* trace = nullptr, size_t first = 0, size_t stride = 1) const;

  const Ensemble models_;
  DecodeOptions opts_;
  size_t mini_batch_;
};

/// Translations (the best hypothesis, detokenized with `tgt`) of the sources of `examples`,
/// decoded `mini_batch` sentences at a time in order of source length, in input order: a
/// Translator run. The default options are greedy search.
std::vector<std::string> best_translations(const Ensemble& models,
                                           const std::vector<Example>& examples,
                                           const Tokenizer& tgt, int mini_batch,
                                           const DecodeOptions& decode = {});

}  // namespace anuvad
