// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
// 8-byte little-endian header size N, an N-byte JSON header mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section) plus
// an optional "__metadata__" map of strings, then the raw little-endian tensor bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace anuvad {

/// One tensor as raw bytes. dtype is a safetensors dtype name ("F32", "F64", "U8", ...).
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

/// The contents of a safetensors file.
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, RawTensor> tensors;
};

/// Bytes per element of a dtype; 0 for an unknown dtype.
int dtype_size(const std::string& dtype);

/// Writes `file` to `path` atomically: to `path.tmp.<pid>`, flushed and fsynced, then renamed
/// over `path` and the directory fsynced, so a crash never leaves a half-written file (a killed
/// write may leave its `.tmp.<pid>` file, never read). Tensors are written in name order, back
/// to back from data offset 0, so they cover the data section exactly (as the reader requires).
/// Throws IoError (the temporary file removed, `path` untouched) when a write or fsync fails.
void write_safetensors(const std::string& path, const SafetensorsFile& file);

/// Reads and validates a safetensors file: header size within the file and ≤ 32 MiB, at most
/// one JSON value per 8 header bytes (so parsing memory stays proportional to a real header), strict
/// JSON, known dtypes, element counts matching byte ranges without overflow, ranges inside
/// the data section and covering it exactly (no overlap, no byte before, between or after the
/// tensors), and no duplicate names. Throws ModelFileError naming `path` and the field or offsets
/// at fault, or IoError when the file cannot be read.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace anuvad
