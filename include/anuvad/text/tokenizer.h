// Subword tokenization with SentencePiece (Kudo & Richardson 2018, arXiv:1808.06226), used as a
// library. Every anuvad vocabulary has PAD = 0, UNK = 1, BOS = 2, EOS = 3 (tensor.h).
//
// Normalization: SentencePiece's "identity" rule (no NFKC, so Devanagari and every other
// character are kept as written), plus its whitespace handling: leading and trailing spaces are
// removed and runs of spaces collapse to one. decode(encode(s)) == s for every line that has
// no leading, trailing or repeated spaces and no character missing from the training text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace anuvad {

/// Options of SentencePiece training.
struct TokenizerOptions {
  int vocab_size = 1000;             ///< upper bound (SentencePiece may stop earlier: hard_vocab_limit=false)
  std::string model_type = "unigram";  ///< "unigram" or "bpe"
  /// What the vocabulary is, for error messages, e.g. "target vocabulary (--tgt-vocab-size)".
  std::string name = "vocabulary";
};

/// A loaded SentencePiece model.
class Tokenizer {
 public:
  /// Trains a model on `sentences` (in memory) and returns it. Throws TokenizerError, e.g.
  /// "target vocabulary (--tgt-vocab-size) of 20 pieces is too small for the 63 distinct
  /// characters of its text (each needs a piece, as do the word boundary ▁ and 4
  /// specials): use at least 68".
  static Tokenizer train(const std::vector<std::string>& sentences, const TokenizerOptions& opts);
  /// Loads a serialized SentencePiece model proto. Throws TokenizerError when invalid.
  static Tokenizer from_serialized(const std::string& model_proto);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Text → subword ids (no BOS/EOS). Characters unseen in training map to UNK.
  std::vector<int32_t> encode(const std::string& text) const;
  /// Subword regularisation (Kudo 2018, arXiv:1804.10959 §3): one segmentation of each of
  /// `texts` sampled from the whole lattice of a unigram model (SentencePiece's SampleEncode
  /// with nbest_size −1, i.e. l = ∞) with smoothing `alpha` > 0, P(x) ∝ P_unigram(x)^alpha (small
  /// alpha: nearly uniform; large: nearly encode()). Deterministic for a given `seed` (the
  /// texts are sampled in order by one generator seeded with it), whatever else runs in the
  /// process. The pieces always decode to the text encode() sees (detokenize(sample) ==
  /// detokenize(encode(text))). Throws TokenizerError when SentencePiece fails or alpha ≤ 0.
  std::vector<std::vector<int32_t>> sample_encode(const std::vector<std::string>& texts, double alpha,
                                                  uint64_t seed) const;
  /// Subword ids → text; PAD/BOS/EOS are skipped, UNK decodes to "⁇" (U+2047) without spaces
  /// of its own, so "I☃snow" comes back as "I⁇snow" and "I ☃ snow" as "I ⁇ snow".
  std::string detokenize(const std::vector<int32_t>& ids) const;
  /// The piece string of an id (e.g. "▁We"), "<pad>", "<unk>", "<s>", "</s>" for specials.
  std::string piece(int32_t id) const;
  int vocab_size() const;
  /// The serialized model proto (bytes), as stored in a model file.
  const std::string& serialized() const { return serialized_; }

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string serialized_;
};

}  // namespace anuvad
