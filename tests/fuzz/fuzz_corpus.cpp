// libFuzzer target: the parallel-corpus reader (TSV) on arbitrary bytes.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "anuvad/text/corpus.h"
#include "anuvad/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/anuvad_fuzz_corpus_" + std::to_string(::getpid()) + ".tsv";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    for (const auto& p : anuvad::read_parallel_corpus({path}))
      if (p.src.empty() || p.tgt.empty() || !anuvad::check_text(p.src).empty()) __builtin_trap();
  } catch (const anuvad::Error&) {
  }
  return 0;
}
