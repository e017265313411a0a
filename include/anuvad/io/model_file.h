// The model file: one self-describing safetensors file holding everything needed to translate.
//   __metadata__: "format" = "anuvad", "format_version" = "1", "config" = ModelConfig JSON,
//                 "text_normalization" = the rule its text was normalized with (normalize.h;
//                 absent in files written before it existed = "identity"), plus free-form training information (step, dev perplexity, ...).
//   tensors:      every Transformer parameter under its PyTorch-style name (F32, little endian,
//                 Linear weights [out, in]), and the two SentencePiece models as U8 byte
//                 tensors "tokenizer.src" and "tokenizer.tgt" (serialized ModelProto).
// Tensor names and shapes are listed in docs/model-format.md.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "anuvad/io/safetensors.h"
#include "anuvad/text/normalize.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/nn/transformer.h"

namespace anuvad {

/// A model ready to translate: the network and both tokenizers.
struct TranslationModel {
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<Tokenizer> src_tokenizer;
  std::unique_ptr<Tokenizer> tgt_tokenizer;
  std::map<std::string, std::string> metadata;
  /// The normalization every text given to this model goes through (its training text's).
  TextNormalization normalization = TextNormalization::kNfcSpaces;

  /// `text` normalized as this model's training text was (normalize_text).
  std::string normalize(const std::string& text) const { return normalize_text(text, normalization); }

  /// A source sentence (valid UTF-8, checked by the caller) as subword ids for beam_search,
  /// truncated to max_positions − 1 subwords with a warning naming `where` (e.g. "<stdin>:3",
  /// "test.tsv:12"): what `translate`, `evaluate` and the translation fuzz target feed the model.
  std::vector<int32_t> encode_source(const std::string& text, const std::string& where) const;
};

/// Writes the model atomically (temporary file, fsync, rename). The metadata records
/// "text_normalization" = "nfc-spaces" unless `extra_metadata` names another rule (an average of
/// older models keeps theirs). Throws IoError.
void save_model(const std::string& path, const Transformer& model, const Tokenizer& src_tokenizer,
                const Tokenizer& tgt_tokenizer,
                const std::map<std::string, std::string>& extra_metadata = {});

/// The model as safetensors contents (what save_model writes). Throws ConfigError for a model
/// set to decode in bfloat16 (Transformer::set_compute_type).
SafetensorsFile model_to_safetensors(const Transformer& model, const Tokenizer& src_tokenizer,
                                     const Tokenizer& tgt_tokenizer,
                                     const std::map<std::string, std::string>& extra_metadata = {});

/// Builds a model from safetensors contents read from `path` (used in messages). Tensors whose
/// names start with `ignored_prefix` (non-empty) are skipped, as a checkpoint's optimizer state.
TranslationModel model_from_safetensors(SafetensorsFile f, const std::string& path,
                                        const std::string& ignored_prefix = "");

/// Loads and checks a model file: format marker and version, config, every parameter present
/// with the shape the config implies and a float dtype, no unknown tensors, tokenizers whose
/// vocabulary sizes match the config, finite weights. Throws ModelFileError or IoError naming
/// the file and the field.
TranslationModel load_model(const std::string& path);

}  // namespace anuvad
