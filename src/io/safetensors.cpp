// safetensors reader and writer (format: include/anuvad/io/safetensors.h).
#include "anuvad/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "anuvad/core/error.h"
#include "anuvad/io/json.h"

namespace anuvad {
namespace {

/// A tensor's byte range [begin, end) in the data section.
struct TensorRange {
  uint64_t begin, end;
  std::string name;
};

/// Sorts `ranges` by offset and checks that they cover the data section of `data_size` bytes
/// exactly, as the safetensors format requires: no two overlap, and no byte lies before the
/// first, between two or after the last (zero-size tensors anywhere are fine). Throws
/// ModelFileError naming `path`, the tensors and the offsets at fault.
void check_data_layout(const std::string& path, std::vector<TensorRange>& ranges, uint64_t data_size) {
  std::sort(ranges.begin(), ranges.end(), [](const TensorRange& a, const TensorRange& b) {
    // Ties broken by end: an empty tensor at the start of another is not an overlap.
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  auto uncovered = [&](uint64_t begin, uint64_t end, const std::string& where) {
    return ModelFileError(path + ": bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") of the data section belong to no tensor (" + where + ")");
  };
  uint64_t covered = 0;  // bytes [0, covered) belong to the tensors checked so far
  for (size_t i = 0; i < ranges.size(); ++i) {
    const TensorRange& r = ranges[i];
    if (i > 0 && r.begin < ranges[i - 1].end)
      throw ModelFileError(path + ": tensors " + ranges[i - 1].name + " and " + r.name + " overlap");
    if (r.begin > covered)
      throw uncovered(covered, r.begin, i == 0 ? "before the first tensor, " + r.name
                                               : "between tensors " + ranges[i - 1].name + " and " + r.name);
    covered = r.end;
  }
  if (covered < data_size)
    throw uncovered(covered, data_size, ranges.empty() ? std::string("the file has no tensors")
                                                       : "after the last tensor, " + ranges.back().name);
}

}  // namespace

int dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
      {"I32", 4},  {"U32", 4}, {"F32", 4}, {"I64", 8}, {"U64", 8}, {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // align the data section to 8 bytes
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(tmp + ": cannot open for writing");
    const uint64_t n = text.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(le), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : file.tensors)
      out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw IoError(tmp + ": write failed (disk full?)");
    }
  }
  // The data must be on disk before the rename makes it the file: otherwise a power cut could
  // leave `path` pointing at a file whose blocks were never written.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    std::remove(tmp.c_str());
    throw IoError(tmp + ": fsync failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw IoError(path + ": cannot rename temporary file into place");
  }
  // Make the rename itself durable (best effort: some file systems refuse to fsync a directory;
  // the new file is complete either way).
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

/// Opens `path`, checks the 8-byte header size against the file and reads the header text.
/// Sets *data_size to the bytes after the header.
std::string read_header_text(std::ifstream& in, const std::string& path, uint64_t* data_size) {
  in.seekg(0, std::ios::end);
  const auto file_size_signed = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  if (file_size_signed < 8) throw ModelFileError(path + ": not a safetensors file (shorter than 8 bytes)");
  const uint64_t file_size = static_cast<uint64_t>(file_size_signed);
  unsigned char le[8];
  in.read(reinterpret_cast<char*>(le), 8);
  if (!in) throw IoError(path + ": cannot read the header size");
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(le[i]) << (8 * i);
  // 32 MiB holds ~200k tensor entries (a checkpoint of 1000 + 1000 layers needs ~27 MB).
  constexpr uint64_t kMaxHeader = 32u << 20;
  if (header_size == 0 || header_size > kMaxHeader || header_size > file_size - 8)
    throw ModelFileError(path + ": not a safetensors file (header size " +
                         std::to_string(header_size) + " does not fit the file of " +
                         std::to_string(file_size) + " bytes)");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw IoError(path + ": read error in header");
  *data_size = file_size - 8 - header_size;
  return text;
}

/// The header as a JSON object. nlohmann keeps the last of duplicate keys silently: they are
/// refused in every object (tensor names at the top, "dtype"/"shape"/... in an entry, metadata
/// keys). Values are counted too: a real header spends over 8 bytes of text per JSON value
/// (names, dtypes, offsets), while "[0,0,0,...]" spends 2 and would cost ~30 bytes of memory
/// per byte.
nlohmann::json parse_header(const std::string& text, const std::string& path) {
  DuplicateKeyFinder duplicates;
  uint64_t values = 0;
  const uint64_t max_values = text.size() / 8 + 64;
  nlohmann::json header;
  try {
    using Event = nlohmann::json::parse_event_t;
    header = nlohmann::json::parse(text, [&](int depth, Event event, nlohmann::json& parsed) {
      if ((event == Event::value || event == Event::object_start || event == Event::array_start) &&
          ++values > max_values)
        throw ModelFileError(path + ": header has more JSON values than a safetensors header holds (over " +
                             std::to_string(max_values) + " in " + std::to_string(text.size()) + " bytes)");
      duplicates.on_event(depth, event, parsed);
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    throw ModelFileError(path + ": header is not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!header.is_object()) throw ModelFileError(path + ": header is not a JSON object");
  if (const std::string& key = duplicates.duplicate(); !key.empty()) {
    const bool tensor_name = duplicates.duplicate_depth() == 1 && key != "__metadata__";
    throw ModelFileError(path + (tensor_name ? ": duplicate tensor name " : ": duplicate key ") + key);
  }
  return header;
}

/// One tensor entry {dtype, shape, data_offsets} → its dtype and shape in *t and its byte range;
/// `where` ("FILE: tensor NAME") starts every error.
TensorRange parse_tensor_entry(const nlohmann::json& v, const std::string& name,
                               const std::string& where, uint64_t data_size, RawTensor* t) {
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
      !v.contains("data_offsets") || v.size() != 3)
    throw ModelFileError(where + ": entry must have exactly dtype, shape and data_offsets");
  if (!v["dtype"].is_string()) throw ModelFileError(where + ": dtype is not a string");
  t->dtype = v["dtype"].get<std::string>();
  const int esize = dtype_size(t->dtype);
  if (esize == 0) throw ModelFileError(where + ": unknown dtype " + t->dtype);
  if (!v["shape"].is_array()) throw ModelFileError(where + ": shape is not an array");
  uint64_t count = 1;
  for (const auto& d : v["shape"]) {
    if (!d.is_number_unsigned()) throw ModelFileError(where + ": shape has a non-integer or negative entry");
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && count > std::numeric_limits<uint64_t>::max() / dim)
      throw ModelFileError(where + ": shape overflows");
    count *= dim;
    t->shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    throw ModelFileError(where + ": data_offsets must be two non-negative integers");
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data_size)
    throw ModelFileError(where + ": data_offsets [" + std::to_string(begin) + ", " +
                         std::to_string(end) + "] outside the data section of " +
                         std::to_string(data_size) + " bytes");
  if (count > std::numeric_limits<uint64_t>::max() / esize || count * esize != end - begin)
    throw ModelFileError(where + ": byte range does not match dtype and shape");
  return {begin, end, name};
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open file for reading");
  uint64_t data_size = 0;
  const std::string text = read_header_text(in, path, &data_size);
  const uint64_t data_start = 8 + text.size();
  const nlohmann::json header = parse_header(text, path);
  SafetensorsFile out;
  std::vector<TensorRange> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw ModelFileError(path + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw ModelFileError(path + ": __metadata__." + m.key() + " is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    RawTensor t;
    ranges.push_back(parse_tensor_entry(v, name, path + ": tensor " + name, data_size, &t));
    out.tensors.emplace(name, std::move(t));
  }
  check_data_layout(path, ranges, data_size);
  for (const TensorRange& r : ranges) {
    RawTensor& t = out.tensors[r.name];
    t.bytes.resize(r.end - r.begin);
    in.seekg(static_cast<std::streamoff>(data_start + r.begin));
    in.read(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    if (!in) throw IoError(path + ": read error in tensor " + r.name);
  }
  return out;
}

}  // namespace anuvad
