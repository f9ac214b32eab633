#include "common/malloc_tuning.h"

#include <malloc.h>

namespace pstrain {

void KeepLargeBlocksInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  // Freed memory is kept for the next step rather than returned to the kernel at once.
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace pstrain
