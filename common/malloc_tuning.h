#ifndef PSTRAIN_COMMON_MALLOC_TUNING_H_
#define PSTRAIN_COMMON_MALLOC_TUNING_H_

namespace pstrain {

// Keeps blocks of up to 256 MiB in glibc's heap instead of mmapping and unmapping each
// one. Tensors, batches and gRPC message buffers of a few hundred KiB to a few MiB are
// allocated per step; above glibc's default mmap threshold every one of them costs a
// page fault per 4 KiB, which measured about 10x slower for gRPC messages of 256 KiB to
// 16 MiB (shared/notes/performance-facts.md). Also uses one malloc arena: glibc's
// per-thread arenas grow in heaps of at most 64 MiB, so a bigger block allocated on any
// thread but main (a gRPC thread receiving a 64 MiB tensor) is mmapped whatever the
// threshold, which measured about 10x slower for 64 MiB push-and-pulls (bench/README.md).
// Call once at the start of main(), before any thread starts.
void KeepLargeBlocksInHeap();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MALLOC_TUNING_H_
