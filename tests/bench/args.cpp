// anuvad_bench's command line (args.h).
#include "args.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "anuvad/core/error.h"
#include "workload.h"

using namespace anuvad;

namespace bench {

[[noreturn]] void usage(const std::string& msg) {
  std::cerr << "anuvad_bench: " << msg
            << "\nusage: anuvad_bench --config tiny|small|base --mode MODE [--threads N] "
               "[--repeats N] [--steps N] [--warmup N] [--bs1-sentences N] [--seed N] "
               "[--norm post|pre] [--length L] [--batch-sentences N] [--lengths a,b,..] "
               "[--clip-norm X] [--thread-shards N] [--check 0|1] [--huge-pages 0|1] [--ceiling FILE] [--min-time S] "
               "[--compute-type float32|bfloat16|int8|auto] [--bf16-kernel auto|onednn|openblas|avx2gemm|avx512bf16|avx512|avx2|scalar]\nmodes: train, "
               "decode_{naive,cached}_b{1,64}, greedy_api_b{1,64}, beam4_cached_b{1,64}, "
               "decode_length, scale_train, scale_decode, ceiling\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (i + 1 >= argc) usage("missing value for " + k);
    const std::string v = argv[++i];
    if (k == "--config") a.config = v;
    else if (k == "--mode") a.mode = v;
    else if (k == "--norm") a.norm = v;
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--repeats") a.repeats = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--warmup") a.warmup = std::stoi(v);
    else if (k == "--bs1-sentences") a.bs1_sentences = std::stoi(v);
    else if (k == "--seed") a.seed = std::stoull(v);
    else if (k == "--length") a.length = std::stoi(v);
    else if (k == "--batch-sentences") a.batch_sentences = std::stoi(v);
    else if (k == "--clip-norm") a.clip_norm = std::stod(v);
    else if (k == "--thread-shards") a.thread_shards = std::stoi(v);
    else if (k == "--check") a.check = std::stoi(v) != 0;
    else if (k == "--huge-pages") a.huge_pages = std::stoi(v) != 0;
    else if (k == "--ceiling") a.ceiling = v;
    else if (k == "--min-time") a.min_time = std::stod(v);
    else if (k == "--compute-type") {
      try {
        a.compute_type = parse_compute_type(v);
      } catch (const ConfigError& e) {
        usage(e.what());
      }
    }
    else if (k == "--bf16-kernel") {
      try {
        set_bf16_auto_kernel(parse_bf16_kernel(v));
      } catch (const ConfigError& e) {
        usage(e.what());
      }
    }
    else if (k == "--lengths") {
      a.lengths.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) a.lengths.push_back(std::stoi(item));
    } else usage("unknown option " + k);
  }
  if (!kConfigs.count(a.config)) usage("unknown config " + a.config);
  if (a.norm != "post" && a.norm != "pre") usage("--norm must be post or pre");
  if (a.repeats < 1) usage("--repeats must be at least 1");
  if (a.compute_type != ComputeType::kFloat32 &&
      (a.mode == "train" || a.mode == "scale_train" || a.mode == "scale_decode" || a.mode == "ceiling"))
    usage("--compute-type applies to the decoding modes only, not " + a.mode);
  return a;
}

}  // namespace bench
