// `anuvad --version` and the installed corpus directory (build_info.h).
#include "build_info.h"

#include <omp.h>

#include <filesystem>
#include <sstream>
#include <system_error>
#include <vector>

#include "anuvad/core/bf16.h"
#include "anuvad/core/int8.h"
#include "anuvad/core/distributed.h"
#include "anuvad/core/gemm.h"
#include "anuvad_git_revision.h"  // ANUVAD_GIT_REVISION, regenerated at every build

namespace anuvad::cli {

namespace {

/// The matrix-product backend: the kernels core/gemm.h routes to (OpenBLAS core name included).
std::string blas_backend() { return gemm_backend(); }

/// The instruction-set extensions the compiler was told it may use, space-separated.
std::string cpu_flags() {
  std::string s;
  auto add = [&s](const char* flag) { s += (s.empty() ? "" : " ") + std::string(flag); };
#ifdef __SSE2__
  add("sse2");
#endif
#ifdef __SSSE3__
  add("ssse3");
#endif
#ifdef __SSE4_1__
  add("sse4.1");
#endif
#ifdef __SSE4_2__
  add("sse4.2");
#endif
#ifdef __AVX__
  add("avx");
#endif
#ifdef __AVX2__
  add("avx2");
#endif
#ifdef __FMA__
  add("fma");
#endif
#ifdef __F16C__
  add("f16c");
#endif
#ifdef __AVX512F__
  add("avx512f");
#endif
#ifdef __AVX512DQ__
  add("avx512dq");
#endif
#ifdef __AVX512BW__
  add("avx512bw");
#endif
#ifdef __AVX512VL__
  add("avx512vl");
#endif
#ifdef __AVX512BF16__
  add("avx512bf16");
#endif
#ifdef __ARM_NEON
  add("neon");
#endif
  return s.empty() ? "none" : s;
}

/// The OpenMP specification version of the _OPENMP date macro (e.g. 201511 → "4.5").
std::string openmp_version(long date) {
  if (date >= 202011) return "5.1";
  if (date >= 201811) return "5.0";
  if (date >= 201511) return "4.5";
  if (date >= 201307) return "4.0";
  return "3.x";
}

}  // namespace

std::string version_text() {
  std::ostringstream out;
  out << "anuvad " << ANUVAD_VERSION << "\n"
      << "git revision: " << ANUVAD_GIT_REVISION << "\n"
      << "threads: OpenMP " << openmp_version(_OPENMP) << ", " << omp_get_max_threads()
      << " by default (--cpu-threads N)\n"
      << "BLAS: " << blas_backend() << "\n"
      << "decoding: --compute-type auto = "
      << (auto_compute_type(kBf16AutoMinWeightBytes) == ComputeType::kBfloat16
              ? "bfloat16 for models of at least " + std::to_string(kBf16AutoMinWeightBytes >> 20) +
                    " MiB of weight matrices, float32 below (bfloat16 kernel " +
                    bf16_kernel_name(Bf16Kernel::kAuto) + ")"
              : std::string("float32 (this build's bfloat16 kernel is scalar)"))
      << "; --compute-type int8 kernel " << int8_kernel_name(Int8Kernel::kAuto) << "\n"
      << "MPI: " << (mpi_compiled() ? "Open MPI (mpirun -np N anuvad train)" : "off (built without MPI)") << "\n"
      << "CPU flags: " << cpu_flags()
      << (ANUVAD_BUILT_NATIVE ? " (-march=native: the build machine's CPU)"
                              : " (portable build, no -march=native)");
  return out.str();
}

std::string installed_corpus_dir() {
  std::vector<std::filesystem::path> candidates;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / ANUVAD_CORPUS_FROM_BINDIR);
  candidates.emplace_back(ANUVAD_CORPUS_INSTALL_DIR);
  for (const std::filesystem::path& dir : candidates)
    if (std::filesystem::is_regular_file(dir / "train.tsv", ec))
      return dir.lexically_normal().string();
  return "";
}

}  // namespace anuvad::cli
