// libFuzzer target: the JSON model-config reader (`anuvad train -c FILE`) on arbitrary text.
// A config that is accepted must also validate and build a model description without throwing.
#include <cstdint>
#include <string>

#include "anuvad/nn/config.h"
#include "anuvad/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const anuvad::ModelConfig c = anuvad::ModelConfig::from_json_text(text, "fuzz");
    c.validate();
    if (c.parameter_count() <= 0) __builtin_trap();
    (void)anuvad::ModelConfig::from_json(c.to_json(), "round trip");
  } catch (const anuvad::Error&) {
  }
  return 0;
}
