// libFuzzer target: the model-file reader (safetensors parsing and every model check) on
// arbitrary bytes. Any anuvad::Error is an accepted outcome; a crash, hang, sanitizer report or
// huge allocation is a finding.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/anuvad_fuzz_model_" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    anuvad::load_model(path);
  } catch (const anuvad::Error&) {
  }
  return 0;
}
