// Process-wide allocator settings (see include/anuvad/runtime.h).
#include "anuvad/runtime.h"

#include <malloc.h>

namespace anuvad {

void configure_allocator() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace anuvad
