// The beam trace as JSON (schema "anuvad-beam-trace", version 1; docs/beam-trace-schema.json,
// docs/attention.md): `translate --beam-trace FILE.json` writes one document for all translated
// sentences, and the same per-sentence object goes into the attention document as `beam_trace`
// (the attention page's decoding view draws it).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "anuvad/decode/beam_trace.h"
#include "anuvad/inspect/attention_dump.h"
#include "anuvad/nn/config.h"

namespace anuvad {

/// Name and version written in every beam trace document.
inline constexpr const char* kBeamTraceSchemaName = "anuvad-beam-trace";
inline constexpr int kBeamTraceSchemaVersion = 1;

/// The search of one sentence as JSON: {"top", "steps": [step][hypothesis], "finished",
/// "n_best"}, each hypothesis with its token, piece, logprob, score, normalized,
/// cross_attention [decoder_layers][S] (head average) and candidates (token, piece, rank,
/// logprob, score, normalized, status "kept" | "pruned" | "finished", id or null). `piece` names
/// a target id; numbers are rounded to `significant_digits`. Parents are null for the start.
nlohmann::json beam_trace_json(const SentenceTrace& trace, int top,
                               const std::function<std::string(int32_t)>& piece,
                               int significant_digits = 6);

/// The beam trace document: schema, version, model (cfg), decoding (opts), top, and one entry
/// per sentence {source, translation, src_tokens, beam_trace} from sentences[n] (its
/// `beam_trace`, null for a sentence that was not traced, is written as is).
nlohmann::json make_beam_trace_dump(const ModelConfig& cfg, const DecodeOptions& opts, int top,
                                    const std::vector<AttentionDumpSentence>& sentences);

/// Writes the document atomically as one line of JSON (temporary file, then rename). Throws
/// IoError naming the file.
void write_beam_trace_json(const std::string& path, const nlohmann::json& dump);

}  // namespace anuvad
