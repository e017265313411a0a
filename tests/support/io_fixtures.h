// Data shared by the text and io suites (corpus, tokenizer, safetensors, model file): the
// bundled corpus read once per process, UTF-8 code points, float32 bytes and a sample
// safetensors file holding awkward values.
#pragma once

#include <utf8.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "anuvad/io/safetensors.h"
#include "anuvad/text/corpus.h"
#include "support/test_support.h"

namespace anuvad::test {

/// Code points of a valid UTF-8 string.
inline std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  utf8::utf8to32(s.begin(), s.end(), std::back_inserter(out));
  return out;
}

/// The little-endian IEEE-754 bytes of `v` (4 per value), as a safetensors F32 tensor holds them.
inline std::string f32_bytes(const std::vector<float>& v) {
  std::string out(v.size() * 4, '\0');
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

/// data/NAME of the source tree (e.g. "train.tsv"), read once per process.
inline const std::vector<SentencePair>& bundled(const std::string& name) {
  static std::map<std::string, std::vector<SentencePair>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, read_parallel_corpus({repo_path("data/" + name)})).first;
  return it->second;
}

/// A safetensors file with metadata (Devanagari, quotes, backslash) and three tensors: F32 [2, 3]
/// with −0, a denormal, ∞ and NaN; U8 [5] with bytes 0x00 and 0xff; F64 [1] holding π.
inline SafetensorsFile sample_file() {
  SafetensorsFile f;
  f.metadata = {{"format", "test"}, {"note", "हिन्दी \"quoted\" \\ text"}};
  RawTensor w;
  w.dtype = "F32";
  w.shape = {2, 3};
  w.bytes = f32_bytes({1.5f, -0.0f, std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::infinity(), std::nanf(""), -3.25e7f});
  f.tensors["layer.weight"] = w;
  RawTensor b;
  b.dtype = "U8";
  b.shape = {5};
  b.bytes = std::string("\x00\x01\xff\x7f\x80", 5);
  f.tensors["bytes"] = b;
  RawTensor d;
  d.dtype = "F64";
  d.shape = {1};
  d.bytes = std::string(8, '\0');
  const double pi = 3.141592653589793;
  std::memcpy(d.bytes.data(), &pi, 8);
  f.tensors["z.double"] = d;
  return f;
}

}  // namespace anuvad::test
