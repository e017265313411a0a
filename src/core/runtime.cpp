// Process-wide allocator settings (see include/anuvad/core/runtime.h).
#include "anuvad/core/runtime.h"

#include <malloc.h>
#include <omp.h>

#include <Eigen/Core>

namespace anuvad {

void configure_allocator() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void configure_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  Eigen::setNbThreads(1);
}

}  // namespace anuvad
