// The anuvad-attention JSON document and its self-contained HTML viewer (attention_dump.h).
#include "anuvad/inspect/attention_dump.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "anuvad/core/error.h"
#include "anuvad/inspect/html_page.h"
#include "dump_support.h"

namespace anuvad {

namespace {

using nlohmann::json;
using inspect_detail::round_sig;
using inspect_detail::valid_utf8;

// ---------------------------------------------------------------------------------------------
// Building the document

/// The matrices of one attention kind: [layers][H][n_queries][n_keys] from [H·n_queries, n_keys].
json matrices(const std::vector<Mat>& mats, int heads, size_t n_queries, size_t n_keys,
              int digits) {
  json layers = json::array();
  for (const Mat& m : mats) {
    json per_head = json::array();
    for (int h = 0; h < heads; ++h) {
      json rows = json::array();
      for (size_t i = 0; i < n_queries; ++i) {
        json row = json::array();
        row.get_ref<json::array_t&>().reserve(n_keys);
        const Index r = static_cast<Index>(h * n_queries + i);
        for (size_t j = 0; j < n_keys; ++j)
          row.push_back(round_sig(static_cast<double>(m(r, static_cast<Index>(j))), digits));
        rows.push_back(std::move(row));
      }
      per_head.push_back(std::move(rows));
    }
    layers.push_back(std::move(per_head));
  }
  return layers;
}

void check_record(const std::vector<Mat>& mats, size_t layers, int heads, size_t n_queries,
                  size_t n_keys, const std::string& where, const char* kind) {
  if (mats.size() != layers)
    throw ShapeError(where + ": " + kind + " has " + std::to_string(mats.size()) +
                     " layers, the model has " + std::to_string(layers));
  for (size_t l = 0; l < mats.size(); ++l)
    if (static_cast<size_t>(mats[l].rows()) != heads * n_queries ||
        static_cast<size_t>(mats[l].cols()) != n_keys)
      throw ShapeError(where + ": " + kind + " layer " + std::to_string(l) + " is [" +
                       std::to_string(mats[l].rows()) + ", " + std::to_string(mats[l].cols()) +
                       "], expected [" + std::to_string(heads * n_queries) + ", " +
                       std::to_string(n_keys) + "] (heads · queries, keys)");
}

// ---------------------------------------------------------------------------------------------
// Checking a document

class DumpChecker {
 public:
  explicit DumpChecker(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw DataError(origin_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  const json& member(const json& obj, const std::string& where, const char* key) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where, std::string("missing \"") + key + "\"");
    return *it;
  }
  const json& array(const json& obj, const std::string& where, const char* key) const {
    const json& v = member(obj, where, key);
    if (!v.is_array()) fail(where + "/" + key, "expected an array");
    return v;
  }
  void string(const json& obj, const std::string& where, const char* key) const {
    if (!member(obj, where, key).is_string()) fail(where + "/" + key, "expected a string");
  }
  int positive_int(const json& obj, const std::string& where, const char* key) const {
    const json& v = member(obj, where, key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100000)
      fail(where + "/" + key, "expected a positive integer");
    return v.get<int>();
  }

  /// A [layers][heads][n_queries][n_keys] array of numbers (or null for non-finite weights).
  void matrices(const json& m, const std::string& where, int layers, int heads,
                size_t n_queries, size_t n_keys) const {
    if (m.size() != static_cast<size_t>(layers))
      fail(where, "expected " + std::to_string(layers) + " layers, found " +
                      std::to_string(m.size()));
    for (size_t l = 0; l < m.size(); ++l) {
      const std::string wl = where + "/" + std::to_string(l);
      if (!m[l].is_array() || m[l].size() != static_cast<size_t>(heads))
        fail(wl, "expected an array of " + std::to_string(heads) + " heads");
      for (size_t h = 0; h < m[l].size(); ++h) {
        const json& rows = m[l][h];
        const std::string wh = wl + "/" + std::to_string(h);
        if (!rows.is_array() || rows.size() != n_queries)
          fail(wh, "expected an array of " + std::to_string(n_queries) + " query rows");
        for (size_t i = 0; i < rows.size(); ++i) {
          const json& row = rows[i];
          if (!row.is_array() || row.size() != n_keys)
            fail(wh + "/" + std::to_string(i),
                 "expected an array of " + std::to_string(n_keys) + " weights");
          for (const json& w : row)
            if (!w.is_number() && !w.is_null())
              fail(wh + "/" + std::to_string(i), "weights must be numbers");
        }
      }
    }
  }

  /// The parts of an optional beam_trace the page walks: arrays of steps of hypotheses, each
  /// with an id and candidates, and the finished and n_best arrays.
  void beam_trace(const json& t, const std::string& where) const {
    if (!t.is_object()) fail(where, "expected an object");
    for (const json& step : array(t, where, "steps")) {
      if (!step.is_array()) fail(where + "/steps", "expected arrays of hypotheses");
      for (const json& h : step) {
        if (!h.is_object() || !member(h, where + "/steps", "id").is_number_integer())
          fail(where + "/steps", "expected hypotheses with an integer id");
        array(h, where + "/steps", "candidates");
      }
    }
    array(t, where, "finished");
    array(t, where, "n_best");
  }

  void check(const json& d) const {
    if (!d.is_object()) fail("", "not an anuvad attention dump (expected a JSON object)");
    const auto schema = d.find("schema");
    if (schema == d.end() || !schema->is_string() || *schema != kAttentionSchemaName)
      fail("", std::string("not an anuvad attention dump (\"schema\" must be \"") +
                   kAttentionSchemaName + "\")");
    const auto version = d.find("version");
    if (version == d.end() || !version->is_number_integer())
      fail("/version", "missing or not an integer");
    if (*version != kAttentionSchemaVersion)
      fail("", "unsupported " + std::string(kAttentionSchemaName) + " version " +
                   version->dump() + " (this anuvad reads version " +
                   std::to_string(kAttentionSchemaVersion) + ")");
    const json& model = member(d, "", "model");
    if (!model.is_object()) fail("/model", "expected an object");
    const int heads = positive_int(model, "/model", "n_heads");
    const int enc_layers = positive_int(model, "/model", "encoder_layers");
    const int dec_layers = positive_int(model, "/model", "decoder_layers");
    if (!member(d, "", "decoding").is_object()) fail("/decoding", "expected an object");
    const json& sentences = array(d, "", "sentences");
    for (size_t n = 0; n < sentences.size(); ++n) {
      const json& s = sentences[n];
      const std::string w = "/sentences/" + std::to_string(n);
      if (!s.is_object()) fail(w, "expected an object");
      string(s, w, "source");
      string(s, w, "translation");
      const json& src = array(s, w, "src_tokens");
      const json& tgt = array(s, w, "tgt_tokens");
      for (size_t i = 0; i < src.size(); ++i) {
        const std::string wt = w + "/src_tokens/" + std::to_string(i);
        if (!src[i].is_object()) fail(wt, "expected an object");
        string(src[i], wt, "piece");
        if (!member(src[i], wt, "id").is_number_integer()) fail(wt + "/id", "expected an integer");
      }
      for (size_t i = 0; i < tgt.size(); ++i) {
        const std::string wt = w + "/tgt_tokens/" + std::to_string(i);
        if (!tgt[i].is_object()) fail(wt, "expected an object");
        string(tgt[i], wt, "piece");
        if (!member(tgt[i], wt, "id").is_number_integer()) fail(wt + "/id", "expected an integer");
        const json& lp = member(tgt[i], wt, "logprob");
        if (!lp.is_number() && !lp.is_null()) fail(wt + "/logprob", "expected a number or null");
      }
      const json& inputs = array(s, w, "decoder_inputs");
      if (inputs.size() != tgt.size())
        fail(w + "/decoder_inputs", "expected " + std::to_string(tgt.size()) +
                                        " pieces (one per output token)");
      for (const json& p : inputs)
        if (!p.is_string()) fail(w + "/decoder_inputs", "expected strings");
      if (s.contains("beam_trace")) beam_trace(s["beam_trace"], w + "/beam_trace");
      const json& enc = array(s, w, "encoder_self_attention");
      const json& dec = array(s, w, "decoder_self_attention");
      const json& cross = array(s, w, "cross_attention");
      if (enc.empty() && dec.empty() && cross.empty()) continue;  // nothing recorded
      matrices(enc, w + "/encoder_self_attention", enc_layers, heads, src.size(), src.size());
      matrices(dec, w + "/decoder_self_attention", dec_layers, heads, tgt.size(), tgt.size());
      matrices(cross, w + "/cross_attention", dec_layers, heads, tgt.size(), src.size());
    }
  }

 private:
  const std::string& origin_;
};

// The page: kPageHead, the JSON document, kPageTail, generated at build time from
// src/inspect/page/attention.{html,css,js} by src/inspect/page/embed_page.cmake.
#include "attention_page_embedded.h"

}  // namespace

AttentionDumpSentence attention_dump_sentence(const Tokenizer& src_tokenizer,
                                              const Tokenizer& tgt_tokenizer,
                                              const std::string& source_text,
                                              const std::vector<int32_t>& source_ids,
                                              const Hypothesis& h) {
  AttentionDumpSentence s;
  s.src_ids = source_ids;
  s.src_ids.push_back(kEosId);
  s.tgt_ids = h.tokens;
  if (h.finished) s.tgt_ids.push_back(kEosId);
  for (int32_t id : s.src_ids) s.src_pieces.push_back(src_tokenizer.piece(id));
  for (int32_t id : s.tgt_ids) s.tgt_pieces.push_back(tgt_tokenizer.piece(id));
  s.tgt_logprobs = h.token_scores;
  s.source_text = source_text;
  s.translation = tgt_tokenizer.detokenize(h.tokens);
  s.attention = &h.attention;
  return s;
}

nlohmann::json make_attention_dump(const ModelConfig& cfg, const DecodeOptions& opts,
                                   const std::vector<AttentionDumpSentence>& sentences,
                                   int significant_digits) {
  if (significant_digits < 1 || significant_digits > 17)
    throw ConfigError("attention dump: significant_digits must be in 1..17");
  json doc;
  doc["schema"] = kAttentionSchemaName;
  doc["version"] = kAttentionSchemaVersion;
  doc["model"] = cfg.to_json();
  doc["decoding"] = inspect_detail::decoding_json(opts);
  json out = json::array();
  const int heads = cfg.n_heads;
  for (size_t n = 0; n < sentences.size(); ++n) {
    const AttentionDumpSentence& s = sentences[n];
    const std::string where = "attention dump sentence " + std::to_string(n);
    const size_t S = s.src_ids.size(), T = s.tgt_ids.size();
    if (s.src_pieces.size() != S)
      throw ShapeError(where + ": " + std::to_string(s.src_pieces.size()) + " source pieces for " +
                       std::to_string(S) + " source ids");
    if (s.tgt_pieces.size() != T)
      throw ShapeError(where + ": " + std::to_string(s.tgt_pieces.size()) + " target pieces for " +
                       std::to_string(T) + " target ids");
    if (!s.tgt_logprobs.empty() && s.tgt_logprobs.size() != T)
      throw ShapeError(where + ": " + std::to_string(s.tgt_logprobs.size()) +
                       " log-probabilities for " + std::to_string(T) + " target ids");
    json js;
    js["source"] = valid_utf8(s.source_text);
    js["translation"] = valid_utf8(s.translation);
    json src = json::array(), tgt = json::array(), inputs = json::array();
    for (size_t i = 0; i < S; ++i) src.push_back({{"piece", valid_utf8(s.src_pieces[i])}, {"id", s.src_ids[i]}});
    double score = 0;
    for (size_t i = 0; i < T; ++i) {
      json t = {{"piece", valid_utf8(s.tgt_pieces[i])}, {"id", s.tgt_ids[i]}};
      if (s.tgt_logprobs.empty()) {
        t["logprob"] = nullptr;
      } else {
        t["logprob"] = round_sig(s.tgt_logprobs[i], significant_digits);
        score += s.tgt_logprobs[i];
      }
      tgt.push_back(std::move(t));
      inputs.push_back(i == 0 ? std::string("<s>") : valid_utf8(s.tgt_pieces[i - 1]));
    }
    js["src_tokens"] = std::move(src);
    js["tgt_tokens"] = std::move(tgt);
    js["decoder_inputs"] = std::move(inputs);
    js["score"] = s.tgt_logprobs.empty() ? json(nullptr) : round_sig(score, significant_digits);
    const AttentionRecord* a = s.attention;
    if (a == nullptr || (a->encoder_self.empty() && a->decoder_self.empty() && a->cross.empty())) {
      js["encoder_self_attention"] = json::array();
      js["decoder_self_attention"] = json::array();
      js["cross_attention"] = json::array();
    } else {
      check_record(a->encoder_self, cfg.encoder_layers, heads, S, S, where, "encoder self-attention");
      check_record(a->decoder_self, cfg.decoder_layers, heads, T, T, where, "decoder self-attention");
      check_record(a->cross, cfg.decoder_layers, heads, T, S, where, "cross-attention");
      js["encoder_self_attention"] = matrices(a->encoder_self, heads, S, S, significant_digits);
      js["decoder_self_attention"] = matrices(a->decoder_self, heads, T, T, significant_digits);
      js["cross_attention"] = matrices(a->cross, heads, T, S, significant_digits);
    }
    if (!s.beam_trace.is_null()) js["beam_trace"] = s.beam_trace;
    out.push_back(std::move(js));
  }
  doc["sentences"] = std::move(out);
  return doc;
}

void check_attention_dump(const nlohmann::json& dump, const std::string& origin) {
  DumpChecker(origin).check(dump);
}

nlohmann::json read_attention_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw IoError(path + ": read failed");
  json dump;
  try {
    dump = json::parse(buf.str());
  } catch (const json::parse_error& e) {
    throw DataError(path + ": invalid JSON: " + json_error_text(e));
  }
  check_attention_dump(dump, path);
  return dump;
}

std::string attention_json_text(const nlohmann::json& dump) {
  return dump.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string render_attention_html(const nlohmann::json& dump) {
  check_attention_dump(dump, "attention dump");
  return page_with_json(kPageHead, attention_json_text(dump), kPageTail);
}

void write_attention_json(const std::string& path, const nlohmann::json& dump) {
  write_atomically(path, attention_json_text(dump) + "\n");
}

void write_attention_html(const std::string& path, const nlohmann::json& dump) {
  write_atomically(path, render_attention_html(dump));
}

}  // namespace anuvad
