// Process-wide allocator settings (see include/anuvad/core/runtime.h).
#include "anuvad/core/runtime.h"

#include <malloc.h>
#include <omp.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <Eigen/Core>

namespace anuvad {

void configure_allocator() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

std::size_t back_heap_with_huge_pages() {
  std::size_t advised = 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHugePage = std::uintptr_t(2) << 20;  // x86-64's PMD size
  constexpr int kMadvCollapse = 25;  // MADV_COLLAPSE (Linux 6.1): not in glibc 2.36's headers
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < 6 || line.compare(line.size() - 6, 6, "[heap]") != 0) continue;
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    const std::uintptr_t first = (std::uintptr_t(lo) + kHugePage - 1) & ~(kHugePage - 1);
    const std::uintptr_t last = std::uintptr_t(hi) & ~(kHugePage - 1);
    if (last <= first) continue;
    void* start = reinterpret_cast<void*>(first);
    if (madvise(start, last - first, MADV_HUGEPAGE) != 0) continue;  // no THP in this kernel
    // Best effort: EINVAL before Linux 6.1, EAGAIN when no huge page is free; the advice
    // alone still gives huge pages to later faults and to khugepaged.
    (void)madvise(start, last - first, kMadvCollapse);
    advised += last - first;
  }
#endif
  return advised;
}

void configure_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  Eigen::setNbThreads(1);
}

}  // namespace anuvad
