// The beam trace as JSON (include/anuvad/inspect/beam_trace_dump.h).
#include "anuvad/inspect/beam_trace_dump.h"

#include "anuvad/core/error.h"
#include "anuvad/inspect/html_page.h"
#include "dump_support.h"

namespace anuvad {

namespace {

using inspect_detail::round_sig;
using inspect_detail::valid_utf8;
using nlohmann::json;

const char* status_name(TraceStatus s) {
  switch (s) {
    case TraceStatus::kKept: return "kept";
    case TraceStatus::kFinished: return "finished";
    case TraceStatus::kPruned: break;
  }
  return "pruned";
}

json id_or_null(int id) { return id < 0 ? json(nullptr) : json(id); }

/// Fields common to hypotheses, candidates and finished entries: token, piece and the scores.
json scored_token(int32_t token, double logprob, double score, double normalized,
                  const std::function<std::string(int32_t)>& piece, int digits) {
  return {{"token", token},
          {"piece", valid_utf8(piece(token))},
          {"logprob", round_sig(logprob, digits)},
          {"score", round_sig(score, digits)},
          {"normalized", round_sig(normalized, digits)}};
}

json hypothesis_json(const TraceHypothesis& h, const std::function<std::string(int32_t)>& piece,
                     int digits) {
  json j = scored_token(h.token, h.logprob, h.score, h.normalized, piece, digits);
  j["id"] = h.id;
  j["parent"] = id_or_null(h.parent);
  json cross = json::array();
  for (Index l = 0; l < h.cross.rows(); ++l) {
    json row = json::array();
    for (Index k = 0; k < h.cross.cols(); ++k) row.push_back(round_sig(double(h.cross(l, k)), digits));
    cross.push_back(std::move(row));
  }
  j["cross_attention"] = std::move(cross);
  json candidates = json::array();
  for (const TraceCandidate& c : h.candidates) {
    json cj = scored_token(c.token, c.logprob, c.score, c.normalized, piece, digits);
    cj["rank"] = c.rank;
    cj["status"] = status_name(c.status);
    cj["id"] = id_or_null(c.id);
    candidates.push_back(std::move(cj));
  }
  j["candidates"] = std::move(candidates);
  return j;
}

}  // namespace

nlohmann::json beam_trace_json(const SentenceTrace& trace, int top,
                               const std::function<std::string(int32_t)>& piece,
                               int significant_digits) {
  json steps = json::array();
  for (const std::vector<TraceHypothesis>& step : trace.steps) {
    json hyps = json::array();
    for (const TraceHypothesis& h : step) hyps.push_back(hypothesis_json(h, piece, significant_digits));
    steps.push_back(std::move(hyps));
  }
  json finished = json::array();
  for (const TraceFinished& f : trace.finished) {
    json j = scored_token(f.token, f.logprob, f.score, f.normalized, piece, significant_digits);
    j["id"] = f.id;
    j["parent"] = id_or_null(f.parent);
    j["step"] = f.step;
    j["eos"] = f.eos;
    finished.push_back(std::move(j));
  }
  return {{"top", top}, {"steps", std::move(steps)}, {"finished", std::move(finished)},
          {"n_best", trace.n_best}};
}

nlohmann::json make_beam_trace_dump(const ModelConfig& cfg, const DecodeOptions& opts, int top,
                                    const std::vector<AttentionDumpSentence>& sentences) {
  json doc;
  doc["schema"] = kBeamTraceSchemaName;
  doc["version"] = kBeamTraceSchemaVersion;
  doc["model"] = cfg.to_json();
  doc["decoding"] = inspect_detail::decoding_json(opts);
  doc["top"] = top;
  json out = json::array();
  for (size_t n = 0; n < sentences.size(); ++n) {
    const AttentionDumpSentence& s = sentences[n];
    if (s.src_pieces.size() != s.src_ids.size())
      throw ShapeError("beam trace sentence " + std::to_string(n) + ": " + std::to_string(s.src_pieces.size()) +
                       " source pieces for " + std::to_string(s.src_ids.size()) + " source ids");
    json src = json::array();
    for (size_t i = 0; i < s.src_ids.size(); ++i)
      src.push_back({{"piece", valid_utf8(s.src_pieces[i])}, {"id", s.src_ids[i]}});
    out.push_back({{"source", valid_utf8(s.source_text)},
                   {"translation", valid_utf8(s.translation)},
                   {"src_tokens", std::move(src)},
                   {"beam_trace", s.beam_trace}});
  }
  doc["sentences"] = std::move(out);
  return doc;
}

void write_beam_trace_json(const std::string& path, const nlohmann::json& dump) {
  write_atomically(path, dump.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace anuvad
