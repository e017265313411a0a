// anuvad_bench's command line (bench.cpp's header comment lists the modes and flags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anuvad/core/bf16.h"

namespace bench {

/// The flags of one anuvad_bench run; -1 = the config's default (workload.h's BenchConfig).
struct Args {
  std::string config = "tiny", mode = "train", norm = "post";
  int threads = 2, repeats = 3, steps = -1, warmup = -1, bs1_sentences = -1, length = 64;
  int batch_sentences = 1;
  int thread_shards = 0;  // training: shards per batch (train/thread_shards.h); 0 = default_thread_shards
  bool huge_pages = true;  // train: back_heap_with_huge_pages after the first update, as anuvad train
  bool check = true;  // greedy modes: compare with naive batch-1 decoding after timing
  uint64_t seed = 1234;
  double clip_norm = 0, min_time = 0.02;
  std::vector<int> lengths{20, 40, 80, 100};
  std::string ceiling;  // JSON lines of a ceiling run, for the fractions of peak / best GEMM
  anuvad::ComputeType compute_type = anuvad::ComputeType::kFloat32;  // decoding modes
};

/// Prints "anuvad_bench: <msg>" and the usage to stderr and exits with status 2.
[[noreturn]] void usage(const std::string& msg);

/// The flags in argv; prints the usage and exits with status 2 on an unknown or malformed flag
/// (or with -h). --bf16-kernel takes effect here (set_bf16_auto_kernel).
Args parse(int argc, char** argv);

}  // namespace bench
