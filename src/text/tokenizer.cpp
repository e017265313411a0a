// SentencePiece wrapper: in-memory training and (de)serialisation.
#include "anuvad/text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <utf8.h>

#include "anuvad/core/error.h"
#include "anuvad/core/tensor.h"

namespace anuvad {

namespace {

constexpr const char* kWordBoundary = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space
constexpr const char* kUnkSurface = "\xE2\x81\x87";    // U+2047 "⁇"

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

/// SentencePiece keeps one piece per distinct character (character_coverage 1.0) plus the four
/// specials, and fails with its own flag names when the size is smaller: say it in anuvad's.
void check_covers_characters(const std::vector<std::string>& sentences,
                             const TokenizerOptions& opts) {
  std::unordered_set<char32_t> chars{U'\u2581'};  // the word boundary "▁" is always a piece
  for (const std::string& s : sentences)
    for (auto it = s.begin(); it != s.end();) {
      const char32_t cp = utf8::next(it, s.end());
      if (cp != U' ') chars.insert(cp);
    }
  const size_t needed = chars.size() + 4;
  if (size_t(opts.vocab_size) < needed)
    throw TokenizerError(opts.name + " of " + std::to_string(opts.vocab_size) +
                         " pieces is too small for the " + std::to_string(chars.size() - 1) +
                         " distinct characters of its text (each needs a piece, as do the word boundary ▁ and 4 specials): use at least " + std::to_string(needed));
}

}  // namespace

Tokenizer::Tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences,
                           const TokenizerOptions& opts) {
  if (sentences.empty()) throw TokenizerError(opts.name + ": no training sentences");
  if (opts.vocab_size < 8) throw TokenizerError(opts.name + ": vocab_size must be at least 8");
  check_covers_characters(sentences, opts);
  const std::unordered_map<std::string, std::string> kwargs = {
      {"vocab_size", std::to_string(opts.vocab_size)},
      {"model_type", opts.model_type},
      {"character_coverage", "1.0"},
      {"hard_vocab_limit", "false"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "true"},
      {"add_dummy_prefix", "true"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"num_threads", "1"},
      {"minloglevel", "2"},
      {"seed_sentencepiece_size", "100000"},
      {"input_sentence_size", "0"},
  };
  VectorIterator it(sentences);
  std::string proto;
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &it, &proto);
  if (!status.ok()) throw TokenizerError(opts.name + ": SentencePiece training failed: " + status.ToString());
  return from_serialized(proto);
}

Tokenizer Tokenizer::from_serialized(const std::string& model_proto) {
  Tokenizer t;
  const auto status = t.sp_->LoadFromSerializedProto(model_proto);
  if (!status.ok())
    throw TokenizerError("tokenizer: invalid SentencePiece model: " + status.ToString());
  if (t.sp_->pad_id() != kPadId || t.sp_->unk_id() != kUnkId || t.sp_->bos_id() != kBosId ||
      t.sp_->eos_id() != kEosId)
    throw TokenizerError("tokenizer: special ids differ from PAD=0 UNK=1 BOS=2 EOS=3");
  t.serialized_ = model_proto;
  return t;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw TokenizerError("tokenizer: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::vector<std::vector<int32_t>> Tokenizer::sample_encode(const std::vector<std::string>& texts,
                                                           double alpha, uint64_t seed) const {
  if (!(alpha > 0)) throw TokenizerError("tokenizer: sampling needs alpha > 0");
  // SentencePiece draws from one std::mt19937 per thread, seeded from the process-wide seed
  // (SetRandomGeneratorSeed) when the thread first samples: a fresh thread started after
  // setting the seed has a generator in a known state. The mutex keeps two samplers from
  // interleaving their seeds. 0xFFFFFFFF means "from std::random_device" to SentencePiece.
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  auto seed32 = static_cast<unsigned>(seed ^ (seed >> 32));
  if (seed32 == 0xFFFFFFFFu) seed32 = 0;
  sentencepiece::SetRandomGeneratorSeed(seed32);
  std::vector<std::vector<int32_t>> out(texts.size());
  std::string error;
  std::thread sampler([&] {
    std::vector<int> ids;
    for (size_t i = 0; i < texts.size() && error.empty(); ++i) {
      const auto status = sp_->SampleEncode(texts[i], -1, static_cast<float>(alpha), &ids);
      if (!status.ok()) error = status.ToString();
      out[i].assign(ids.begin(), ids.end());
    }
  });
  sampler.join();
  if (!error.empty()) throw TokenizerError("tokenizer: " + error);
  return out;
}

std::string Tokenizer::detokenize(const std::vector<int32_t>& ids) const {
  // Runs of known pieces are decoded by SentencePiece; an UNK becomes "⁇" with no spaces of its
  // own (SentencePiece's surface " ⁇ " adds one on each side, so the text would re-encode with
  // extra "▁" pieces). A run after an UNK keeps the space its first piece starts with, which
  // SentencePiece drops at the start of a text.
  std::string out;
  std::vector<int> run;
  const auto flush = [&] {
    if (run.empty()) return;
    std::string text;
    const auto status = sp_->Decode(run, &text);
    if (!status.ok()) throw TokenizerError("tokenizer: " + status.ToString());
    if (!out.empty() && sp_->IdToPiece(run.front()).rfind(kWordBoundary, 0) == 0) out += ' ';
    out += text;
    run.clear();
  };
  for (int32_t id : ids) {
    if (id == kPadId || id == kBosId || id == kEosId || id < 0 || id >= vocab_size()) continue;
    if (id == kUnkId) {
      flush();
      out += kUnkSurface;
    } else {
      run.push_back(id);
    }
  }
  flush();
  return out;
}

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "<invalid>";
  return sp_->IdToPiece(id);
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace anuvad
