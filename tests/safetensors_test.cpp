// The safetensors reader/writer in the float build: spec layout, atomic replace, every
// truncation and hostile header rejected with a message naming the problem.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/io/safetensors.h"
#include "support/io_fixtures.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

namespace {

// Raw safetensors construction for hostile-file tests.

/// 8-byte little-endian size + header text (padded with spaces to a multiple of 8) + data.
/// `declared_size` overrides the size field (to lie about the header length).
std::string raw_safetensors(std::string header, const std::string& data,
                            std::optional<uint64_t> declared_size = std::nullopt) {
  while (header.size() % 8 != 0) header.push_back(' ');
  const uint64_t n = declared_size ? *declared_size : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

uint64_t le_u64(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return n;
}

void check_equal(const SafetensorsFile& a, const SafetensorsFile& b) {
  CHECK(a.metadata == b.metadata);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    INFO("tensor " << name);
    const auto it = b.tensors.find(name);
    REQUIRE(it != b.tensors.end());
    CHECK(it->second.dtype == t.dtype);
    CHECK(it->second.shape == t.shape);
    CHECK(it->second.bytes == t.bytes);  // bit-exact, NaN payloads included
  }
}

}  // namespace

TEST_CASE("safetensors: write/read round trip", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const SafetensorsFile f = sample_file();
  write_safetensors(path, f);
  check_equal(f, read_safetensors(path));

  SECTION("no metadata, no tensors") {
    write_safetensors(path, SafetensorsFile{});
    const SafetensorsFile e = read_safetensors(path);
    CHECK(e.metadata.empty());
    CHECK(e.tensors.empty());
  }
  SECTION("many tensors, some with zero elements") {
    SafetensorsFile g;
    for (int i = 0; i < 40; ++i) {
      RawTensor t;
      t.dtype = i % 3 == 0 ? "U8" : "F32";
      const int64_t n = i % 4 == 1 ? 0 : i + 1;
      t.shape = i % 2 ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n};
      t.bytes = std::string(size_t(n) * size_t(dtype_size(t.dtype)), static_cast<char>(i));
      g.tensors[(i < 10 ? "t0" : "t") + std::to_string(i)] = t;
    }
    RawTensor scalar;  // shape [] = one element
    scalar.dtype = "F32";
    scalar.bytes = f32_bytes({42.0f});
    g.tensors["scalar"] = scalar;
    write_safetensors(path, g);
    check_equal(g, read_safetensors(path));
  }
}

TEST_CASE("safetensors: the header follows the spec", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const SafetensorsFile f = sample_file();
  write_safetensors(path, f);
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() >= 8);
  const uint64_t n = le_u64(bytes);
  CHECK(n % 8 == 0);  // the data section starts 8-byte aligned
  REQUIRE(n <= bytes.size() - 8);
  const std::string header_text = bytes.substr(8, n);
  nlohmann::json header;
  REQUIRE_NOTHROW(header = nlohmann::json::parse(header_text));  // padding is JSON whitespace
  REQUIRE(header.is_object());
  REQUIRE(header.contains("__metadata__"));
  CHECK(header["__metadata__"].get<std::map<std::string, std::string>>() == f.metadata);
  CHECK(header.size() == f.tensors.size() + 1);
  const std::string data = bytes.substr(8 + n);
  size_t total = 0;
  for (const auto& [name, t] : f.tensors) {
    INFO("tensor " << name);
    REQUIRE(header.contains(name));
    const auto& e = header[name];
    CHECK(e["dtype"] == t.dtype);
    CHECK(e["shape"].get<std::vector<int64_t>>() == t.shape);
    const auto off = e["data_offsets"].get<std::vector<uint64_t>>();
    REQUIRE(off.size() == 2);
    REQUIRE(off[0] <= off[1]);
    REQUIRE(off[1] <= data.size());
    CHECK(data.substr(off[0], off[1] - off[0]) == t.bytes);
    total += t.bytes.size();
  }
  CHECK(data.size() == total);  // no holes or trailing bytes
}

TEST_CASE("safetensors: the writer is atomic and leaves no temporary file", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, sample_file());
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});

  // Replace the file while a reader holds the old one open: the reader keeps the old bytes
  // (the new file was renamed into place, not written over the old one).
  const std::string old_bytes = read_file(path);
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  std::ifstream held(path, std::ios::binary);
  REQUIRE(held);
  SafetensorsFile g = sample_file();
  g.metadata["note"] = "replaced";
  g.tensors["extra"] = RawTensor{"U8", {3}, "abc"};
  write_safetensors(path, g);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  check_equal(g, read_safetensors(path));
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);
  std::ostringstream held_bytes;
  held_bytes << held.rdbuf();
  CHECK(held_bytes.str() == old_bytes);

  SECTION("an unwritable destination is an IoError and leaves nothing behind") {
    const std::string bad = dir.file("no_such_dir/model.safetensors");
    CHECK_THROWS_AS(write_safetensors(bad, g), IoError);
    CHECK_THROWS_WITH(write_safetensors(bad, g), Contains("no_such_dir"));
    CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  }
}

TEST_CASE("safetensors: every truncation of a valid file is a ModelFileError", "[io][safetensors]") {
  TempDir dir;
  const std::string full_path = dir.file("full.safetensors");
  SafetensorsFile f;
  f.metadata["k"] = "v";
  f.tensors["a"] = RawTensor{"F32", {2}, f32_bytes({1.0f, 2.0f})};
  f.tensors["b"] = RawTensor{"U8", {3}, "xyz"};
  write_safetensors(full_path, f);
  const std::string bytes = read_file(full_path);
  REQUIRE(bytes.size() < 1000);
  const std::string path = dir.file("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("prefix of " << len << " of " << bytes.size() << " bytes");
    write_file(path, bytes.substr(0, len));
    CHECK_THROWS_AS(read_safetensors(path), ModelFileError);
  }
  // Trailing bytes belong to no tensor: refused like a hole (tests/safetensors_layout_test.cpp).
  write_file(path, bytes + "junk");
  CHECK_THROWS_AS(read_safetensors(path), ModelFileError);
}

TEST_CASE("safetensors: hostile files are ModelFileErrors naming the problem", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("hostile.safetensors");
  const std::string data8 = f32_bytes({1.0f, 2.0f});
  auto expect = [&](const std::string& file_bytes, const std::string& reason) {
    write_file(path, file_bytes);
    CHECK_THROWS_AS(read_safetensors(path), ModelFileError);
    CHECK_THROWS_WITH(read_safetensors(path), Contains(path) && Contains(reason));
  };
  // A valid baseline, so each case below differs from an accepted file in one way.
  write_file(path, raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8));
  REQUIRE(read_safetensors(path).tensors.at("a").bytes == data8);

  SECTION("header size larger than the file") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8, 4096),
           "header size 4096");
  }
  SECTION("header size 2^63") {
    expect(raw_safetensors("{}", "", uint64_t(1) << 63), "header size");
  }
  SECTION("header size 2^64 - 1") {
    expect(raw_safetensors("{}", "", std::numeric_limits<uint64_t>::max()), "header size");
  }
  SECTION("header size 0") { expect(raw_safetensors("", "", 0), "header size 0"); }
  SECTION("a header of bare JSON values (parse memory ~30x its size)") {
    std::string zeros = "0";
    for (int i = 0; i < 4000; ++i) zeros += ",0";
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[)" + zeros + R"(],"data_offsets":[0,8]}})", data8),
           "more JSON values than a safetensors header holds");
  }
  SECTION("header not JSON") { expect(raw_safetensors("this is not JSON", ""), "not valid JSON"); }
  SECTION("header JSON with trailing garbage") { expect(raw_safetensors("{} x", ""), "not valid JSON"); }
  SECTION("header not UTF-8") { expect(raw_safetensors("{\"\xC3\x28\":1}", ""), "JSON"); }
  SECTION("header a JSON array") { expect(raw_safetensors("[1, 2, 3]", ""), "not a JSON object"); }
  SECTION("header a JSON string") { expect(raw_safetensors("\"abc\"", ""), "not a JSON object"); }
  SECTION("entry not an object") { expect(raw_safetensors(R"({"a":[1,2]})", ""), "tensor a"); }
  SECTION("entry with a missing field") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2]}})", data8), "tensor a");
  }
  SECTION("entry with an extra field") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
           "tensor a");
  }
  SECTION("unknown dtype") {
    expect(raw_safetensors(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", data8),
           "unknown dtype F7");
  }
  SECTION("dtype not a string") {
    expect(raw_safetensors(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data8), "dtype");
  }
  SECTION("shape with a negative entry") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
           "shape");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[-1,-2],"data_offsets":[0,8]}})", data8),
           "shape");
  }
  SECTION("shape with a fractional entry") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8),
           "shape");
  }
  SECTION("shape not an array") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data8), "shape");
  }
  SECTION("data_offsets past the end") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data8),
           "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})",
                           data8),
           "data_offsets");
  }
  SECTION("data_offsets with begin > end") {
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", data8),
           "data_offsets");
  }
  SECTION("data_offsets malformed") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data8), "data_offsets");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e30]}})", data8), "data_offsets");
  }
  SECTION("byte range that does not match shape x dtype") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", data8),
           "does not match");
    expect(raw_safetensors(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", data8),
           "does not match");
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2,0],"data_offsets":[0,8]}})", data8),
           "does not match");
  }
  SECTION("overlapping tensors") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data8),
           "overlap");
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                           data8),
           "overlap");
  }
  SECTION("duplicate tensor names") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data8),
           "duplicate tensor name a");
  }
  SECTION("duplicate keys inside a tensor entry or the metadata") {
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,4]}})", data8),
           "duplicate key shape");
    expect(raw_safetensors(R"({"__metadata__":{"format":"anuvad","format":"other"},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           data8),
           "duplicate key format");
    expect(raw_safetensors(R"({"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           data8),
           "duplicate key __metadata__");
  }
  SECTION("shape product overflow") {
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})",
                           ""),
           "overflow");
    // 2^62 elements fit in 64 bits, but not 2^62 * 4 bytes.
    expect(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})", ""),
           "does not match");
    // Wraps to exactly 0 modulo 2^64: 2^32 * 2^32.
    expect(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
           "overflow");
  }
  SECTION("__metadata__ with a non-string value") {
    expect(raw_safetensors(R"({"__metadata__":{"format":"anuvad","step":7}})", ""), "__metadata__.step");
    expect(raw_safetensors(R"({"__metadata__":{"x":null}})", ""), "__metadata__.x");
    expect(raw_safetensors(R"({"__metadata__":["format"]})", ""), "__metadata__");
  }
  SECTION("a plain text file") {
    expect("Trained model files land here.\nNothing else.\n", "not a safetensors file");
    expect("short", "shorter than 8 bytes");
  }
}

TEST_CASE("safetensors: a missing file is an IoError", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("missing.safetensors");
  CHECK_THROWS_AS(read_safetensors(path), IoError);
  CHECK_THROWS_WITH(read_safetensors(path), Contains(path));
}
