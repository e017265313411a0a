// Attention dumps of a small random model for the attention tests and the page fixture tool:
// the attention record of one sentence pair taken from a teacher-forced forward pass (the
// ForwardCache probabilities, which have exactly AttentionRecord's layout for a batch of one),
// and fake subword pieces that include text hostile to JSON and HTML.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "anuvad/inspect/attention_dump.h"
#include "anuvad/nn/batch.h"
#include "anuvad/nn/transformer.h"
#include "support/tiny_config.h"

namespace anuvad::test {

/// Vocabularies 40/50, d_ff = 2·d_model, 256 positions, pre-norm, tied, no dropout.
inline ModelConfig attention_test_config(int encoder_layers = 2, int decoder_layers = 3,
                                         int n_heads = 4, int d_model = 32) {
  return tiny_config({40, 50, d_model, n_heads, 2 * d_model, encoder_layers, decoder_layers, 256},
                     "pre", true, 0.0);
}

/// Teacher-forced pass over one pair: the attention record (S = |src| + 1, T = |tgt| + 1) and,
/// in `logprobs`, log p of each target token and EOS.
inline AttentionRecord teacher_forced_record(const Transformer& model, const Example& ex,
                                             std::vector<double>* logprobs = nullptr) {
  const Batch b = make_batch({&ex});
  ForwardCache cache;
  Mat logits;
  model.forward(b, DropoutContext{}, cache, logits);
  AttentionRecord r;
  for (const auto& e : cache.enc) r.encoder_self.push_back(e.self_attn.probs);
  for (const auto& d : cache.dec) {
    r.decoder_self.push_back(d.self_attn.probs);
    r.cross.push_back(d.cross_attn.probs);
  }
  if (logprobs != nullptr) {
    logprobs->clear();
    for (Index t = 0; t < logits.rows(); ++t) {
      const double mx = static_cast<double>(logits.row(t).maxCoeff());
      double z = 0;
      for (Index v = 0; v < logits.cols(); ++v) z += std::exp(static_cast<double>(logits(t, v)) - mx);
      logprobs->push_back(static_cast<double>(logits(t, b.tgt_out[static_cast<size_t>(t)])) - mx - std::log(z));
    }
  }
  return r;
}

/// A piece string for `id`: specials as SentencePiece spells them, then words, including
/// quotes, backslashes, markup, an emoji and Devanagari.
inline std::string fake_piece(int32_t id, bool target) {
  static const std::vector<std::string> specials = {"<pad>", "<unk>", "<s>", "</s>"};
  static const std::vector<std::string> src = {
      "▁the", "▁\"quoted\"", "▁back\\slash", "</script>", "<!--", "▁😀", "▁house", "s", "▁&amp;",
      "▁is", "▁big", "."};
  static const std::vector<std::string> tgt = {"▁घर", "▁बड़ा", "▁है", "।", "▁\"उद्धरण\"",
                                               "</script>", "▁😀", "▁के", "▁लिए", "▁नमस्ते"};
  if (id >= 0 && id < 4) return specials[static_cast<size_t>(id)];
  const auto& words = target ? tgt : src;
  return words[static_cast<size_t>(id - 4) % words.size()];
}

/// A dump sentence for a teacher-forced pair; `record` and `logprobs` must outlive the result.
inline AttentionDumpSentence fixture_sentence(const Example& ex, const AttentionRecord& record,
                                              const std::vector<double>& logprobs) {
  AttentionDumpSentence s;
  s.src_ids = ex.src;
  s.src_ids.push_back(kEosId);
  s.tgt_ids = ex.tgt;
  s.tgt_ids.push_back(kEosId);
  for (int32_t id : s.src_ids) {
    s.src_pieces.push_back(fake_piece(id, false));
    if (id != kEosId) s.source_text += (s.source_text.empty() ? "" : " ") + fake_piece(id, false);
  }
  for (int32_t id : s.tgt_ids) {
    s.tgt_pieces.push_back(fake_piece(id, true));
    if (id != kEosId) s.translation += (s.translation.empty() ? "" : " ") + fake_piece(id, true);
  }
  s.tgt_logprobs = logprobs;
  s.attention = &record;
  return s;
}

}  // namespace anuvad::test
