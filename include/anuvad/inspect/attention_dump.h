// Attention inspection: every attention matrix of translated sentences as one JSON document
// (schema "anuvad-attention", version 1; docs/attention-schema.json, docs/attention.md), and a
// self-contained HTML page that shows it as heatmaps, a layers × heads grid and a head view.
//
// Token conventions (the same as AttentionRecord):
//   S = source tokens = source subwords + EOS                    (src_tokens, keys of encoder
//       self-attention and of cross-attention)
//   T = decoder steps = output tokens, EOS included when produced (tgt_tokens)
//   query t of the decoder is the decoder input at position t: BOS for t = 0, output token t − 1
//   after that (decoder_inputs); it is the step that predicts tgt_tokens[t].
// Matrices are nested arrays [layer][head][query][key]: encoder_self_attention [L_enc][H][S][S],
// decoder_self_attention [L_dec][H][T][T] (exactly 0 above the diagonal), cross_attention
// [L_dec][H][T][S]. Every row sums to 1 over the keys (up to the rounding of the numbers).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "anuvad/nn/config.h"
#include "anuvad/decode/decode.h"
#include "anuvad/text/tokenizer.h"

namespace anuvad {

/// Name and version written in (and required of) every dump.
inline constexpr const char* kAttentionSchemaName = "anuvad-attention";
inline constexpr int kAttentionSchemaVersion = 1;

/// One translated sentence and the attention weights used to produce it.
struct AttentionDumpSentence {
  std::vector<std::string> src_pieces;  ///< S subword strings, EOS ("</s>") included
  std::vector<int32_t> src_ids;         ///< S ids, EOS included
  std::vector<std::string> tgt_pieces;  ///< T output subword strings, final EOS included if produced
  std::vector<int32_t> tgt_ids;         ///< T output ids, final EOS included if produced
  std::vector<double> tgt_logprobs;     ///< T log-probabilities (nats), or empty when unknown
  std::string source_text, translation;
  /// The matrices (Hypothesis::attention), or nullptr / an empty record when none were
  /// recorded (e.g. an empty source that was not decoded): the three arrays are then [].
  const AttentionRecord* attention = nullptr;
  /// The sentence's search (beam_trace_json, include/anuvad/inspect/beam_trace_dump.h), written
  /// as its optional "beam_trace"; null when it was not recorded.
  nlohmann::json beam_trace;
};

/// The entry of one translation: source_ids (subword ids without EOS, as given to
/// beam_search) + EOS, the output h.tokens + EOS when h.finished, log-probabilities
/// h.token_scores, attention &h.attention (so `h` must outlive the result), pieces from the
/// tokenizers, translation = tgt_tokenizer.detokenize(h.tokens).
AttentionDumpSentence attention_dump_sentence(const Tokenizer& src_tokenizer,
                                              const Tokenizer& tgt_tokenizer,
                                              const std::string& source_text,
                                              const std::vector<int32_t>& source_ids,
                                              const Hypothesis& h);

/// Builds the document. Numbers are rounded to `significant_digits` significant digits (files
/// stay small; 6 keeps every row sum within 1e-5 of 1). Strings that are not valid UTF-8 get
/// U+FFFD for each invalid sequence, so the result always serializes. Throws ShapeError naming
/// the sentence when the token lists or the matrices do not have the sizes described above.
nlohmann::json make_attention_dump(const ModelConfig& cfg, const DecodeOptions& opts,
                                   const std::vector<AttentionDumpSentence>& sentences,
                                   int significant_digits = 6);

/// Checks that `dump` is an anuvad-attention version-1 document with consistent shapes (what
/// the page relies on). Throws DataError starting with `origin` (a file name) and naming the
/// JSON pointer at fault.
void check_attention_dump(const nlohmann::json& dump, const std::string& origin);

/// Reads and checks a dump file. Throws IoError (cannot read) or DataError (invalid JSON, not a
/// dump), the message starting with the file name.
nlohmann::json read_attention_json(const std::string& path);

/// The document as compact JSON text (invalid UTF-8 replaced, never throws on strings).
std::string attention_json_text(const nlohmann::json& dump);

/// One self-contained HTML page (inline CSS and JavaScript, the document embedded in a
/// <script type="application/json" id="attention-data">, no network access) with the
/// heatmap, model and head views. See docs/attention.md.
std::string render_attention_html(const nlohmann::json& dump);

/// Write the JSON document / the page atomically (temporary file in the same directory, then
/// rename). Throw IoError naming the file.
void write_attention_json(const std::string& path, const nlohmann::json& dump);
void write_attention_html(const std::string& path, const nlohmann::json& dump);

}  // namespace anuvad
