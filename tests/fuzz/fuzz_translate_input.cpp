// libFuzzer target: the translation input path of `anuvad translate` on arbitrary bytes: line
// cleaning, UTF-8/NUL checks, the model's text normalization, TranslationModel::encode_source
// (SentencePiece, truncation to max_positions − 1) and greedy or beam decoding with the small
// committed reference model (tests/data/reference/model_pre.safetensors).
#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>

#include "anuvad/text/corpus.h"
#include "anuvad/decode/decode.h"
#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"

#ifndef ANUVAD_TEST_DATA
#error "ANUVAD_TEST_DATA must point at tests/data"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const anuvad::TranslationModel model = [] {
    spdlog::set_level(spdlog::level::err);  // the truncation warnings would flood the output
    return anuvad::load_model(std::string(ANUVAD_TEST_DATA) + "/reference/model_pre.safetensors");
  }();
  std::string line(reinterpret_cast<const char*>(data), size);
  anuvad::clean_line(line, true);
  if (!anuvad::check_text(line).empty()) return 0;  // rejected with a message, as the CLI does
  const std::vector<int32_t> ids = model.encode_source(model.normalize(line), "fuzz input");
  anuvad::DecodeOptions opts;
  opts.max_length = 8;
  opts.beam_size = 1 + static_cast<int>(size % 3);
  const auto hyps = anuvad::beam_search(*model.transformer, {ids}, opts);
  if (hyps.size() != 1 || hyps[0].empty()) __builtin_trap();
  (void)model.tgt_tokenizer->detokenize(hyps[0][0].tokens);
  return 0;
}
