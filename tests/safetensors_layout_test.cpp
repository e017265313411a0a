// The safetensors data section must be covered exactly by the tensors' data_offsets (the format's
// rule): the reader refuses a hole before the first tensor, between two tensors or after the last
// one with a one-line ModelFileError naming the file and the offsets, still accepts zero-size
// tensors anywhere on the way, and our writer (every model file and checkpoint) obeys the rule.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/io/safetensors.h"

using namespace anuvad;
using Catch::Contains;

namespace {

/// A file path in a fresh temporary directory, removed with its contents at scope end.
class ScratchFile {
 public:
  ScratchFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "anuvad_layout_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/t.safetensors";
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }

  /// Replaces the file's contents with `bytes`.
  void write(const std::string& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
  }

  /// The file's contents.
  std::string read() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  std::string dir_, path_;
};

/// A safetensors file: the 8-byte little-endian size of `header`, `header`, then `data`.
std::string crafted(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + data;
}

/// Header entry of a U8 tensor of `end - begin` elements at data offsets [begin, end).
std::string u8_entry(const std::string& name, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) +
         "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

/// Checks that reading the file throws a one-line ModelFileError naming it and containing each
/// of `parts`.
void expect_refused(const ScratchFile& f, const std::vector<std::string>& parts) {
  try {
    read_safetensors(f.path());
    FAIL("read_safetensors accepted the file");
  } catch (const ModelFileError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind(f.path() + ": ", 0) == 0);
    CHECK(what.find('\n') == std::string::npos);
    for (const std::string& part : parts) CHECK_THAT(what, Contains(part));
  }
}

}  // namespace

TEST_CASE("safetensors layout: tensors covering the data section exactly are read", "[io][safetensors]") {
  ScratchFile f;
  SECTION("two tensors back to back") {
    f.write(crafted("{" + u8_entry("a", 0, 3) + "," + u8_entry("b", 3, 5) + "}", "xyzuv"));
    const SafetensorsFile g = read_safetensors(f.path());
    CHECK(g.tensors.at("a").bytes == "xyz");
    CHECK(g.tensors.at("b").bytes == "uv");
  }
  SECTION("zero-size tensors at the start, in the middle and at the end") {
    f.write(crafted("{" + u8_entry("first", 0, 0) + "," + u8_entry("a", 0, 3) + "," +
                        u8_entry("middle", 3, 3) + "," + u8_entry("b", 3, 5) + "," +
                        u8_entry("last", 5, 5) + "}",
                    "xyzuv"));
    const SafetensorsFile g = read_safetensors(f.path());
    REQUIRE(g.tensors.size() == 5);
    CHECK(g.tensors.at("middle").bytes.empty());
    CHECK(g.tensors.at("middle").shape == std::vector<int64_t>{0});
    CHECK(g.tensors.at("b").bytes == "uv");
  }
  SECTION("no tensors and an empty data section") {
    f.write(crafted(R"({"__metadata__":{"k":"v"}})", ""));
    const SafetensorsFile g = read_safetensors(f.path());
    CHECK(g.tensors.empty());
    CHECK(g.metadata.at("k") == "v");
  }
}

TEST_CASE("safetensors layout: bytes that belong to no tensor are refused", "[io][safetensors]") {
  ScratchFile f;
  SECTION("a hole between two tensors") {
    f.write(crafted("{" + u8_entry("a", 0, 3) + "," + u8_entry("b", 5, 7) + "}", "xyz..uv"));
    expect_refused(f, {"bytes [3, 5) of the data section belong to no tensor", "between tensors a and b"});
  }
  SECTION("a hole at the start: the first tensor is not at offset 0") {
    f.write(crafted("{" + u8_entry("a", 2, 5) + "}", "..xyz"));
    expect_refused(f, {"bytes [0, 2) of the data section", "before the first tensor, a"});
  }
  SECTION("bytes after the last tensor") {
    f.write(crafted("{" + u8_entry("a", 0, 3) + "," + u8_entry("b", 3, 5) + "}", "xyzuvjunk"));
    expect_refused(f, {"bytes [5, 9) of the data section", "after the last tensor, b"});
  }
  SECTION("a data section but no tensors") {
    f.write(crafted(R"({"__metadata__":{"k":"v"}})", "junk"));
    expect_refused(f, {"bytes [0, 4) of the data section", "the file has no tensors"});
  }
  SECTION("a zero-size tensor covers no hole") {
    f.write(crafted("{" + u8_entry("a", 0, 3) + "," + u8_entry("z", 5, 5) + "}", "xyz.."));
    expect_refused(f, {"bytes [3, 5) of the data section", "between tensors a and z"});
  }
  SECTION("overlapping tensors are still refused as such") {
    f.write(crafted("{" + u8_entry("a", 0, 3) + "," + u8_entry("b", 2, 5) + "}", "xyzuv"));
    expect_refused(f, {"tensors a and b overlap"});
  }
}

TEST_CASE("safetensors layout: the writer covers the data section exactly", "[io][safetensors]") {
  ScratchFile f;
  SafetensorsFile file;
  file.metadata["format"] = "anuvad";
  file.tensors["b.weight"] = RawTensor{"U8", {2, 3}, "abcdef"};
  file.tensors["a.empty"] = RawTensor{"F32", {0, 4}, ""};
  file.tensors["c.bias"] = RawTensor{"U8", {1}, "g"};
  file.tensors["m.empty"] = RawTensor{"U8", {0}, ""};
  file.tensors["z.last"] = RawTensor{"I16", {2}, "hijk"};
  write_safetensors(f.path(), file);

  const std::string bytes = f.read();
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  REQUIRE(n <= bytes.size() - 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it)
    if (it.key() != "__metadata__")
      ranges.emplace_back(it.value()["data_offsets"][0].get<uint64_t>(),
                          it.value()["data_offsets"][1].get<uint64_t>());
  REQUIRE(ranges.size() == file.tensors.size());
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    CHECK(begin == covered);
    covered = end;
  }
  CHECK(covered == bytes.size() - 8 - n);
  const SafetensorsFile g = read_safetensors(f.path());
  CHECK(g.tensors.size() == file.tensors.size());
  CHECK(g.tensors.at("z.last").bytes == "hijk");

  // The same file with bytes appended is refused.
  f.write(bytes + "junk");
  const std::string end = std::to_string(covered);
  expect_refused(f, {"bytes [" + end + ", " + std::to_string(covered + 4) + ") of the data section",
                     "after the last tensor, z.last"});
}
