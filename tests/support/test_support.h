// Helpers shared by the Catch2 suites: a self-removing temporary directory, whole-file read and
// write with REQUIREd success, paths in the source tree, and (from tiny_config.h) the small
// model configs.
#pragma once

#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "anuvad/nn/batch.h"
#include "support/tiny_config.h"

namespace anuvad::test {

/// A fresh directory under the system temporary directory, removed with its contents at scope
/// end. FAILs the test when no directory can be created.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const std::filesystem::path p =
          std::filesystem::temp_directory_path() /
          ("anuvad_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
           std::to_string(rd() % 1000000));
      std::error_code ec;
      if (std::filesystem::create_directory(p, ec)) {
        path_ = p;
        return;
      }
    }
    FAIL("cannot create a temporary directory");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Full path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  /// Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

/// Replaces the file at `path` with `bytes`; REQUIREs that opening and writing succeed.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

/// The bytes of the file at `path`; REQUIREs that it opens.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `rel` (e.g. "data/train.tsv") under the source tree.
inline std::string repo_path(const std::string& rel) { return std::string(ANUVAD_SOURCE_DIR) + "/" + rel; }

/// One batch of all of `ex`, in order (make_batch over their addresses): [B] sentences.
inline Batch batch_of(const std::vector<Example>& ex) {
  std::vector<const Example*> p;
  for (const auto& e : ex) p.push_back(&e);
  return make_batch(p);
}

}  // namespace anuvad::test
