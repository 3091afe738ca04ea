package wire

/*
#include <malloc.h>
*/
import "C"

// mmapThreshold is the size from which the C allocator maps a block of
// its own, returned to the system when freed. glibc raises its threshold
// as large blocks are freed (up to 32 MiB), after which ZeroMQ's buffers
// for large frames (up to MaxFrame) are carved from malloc's arenas,
// whose pages stay resident once touched: a member sending frames of
// megabytes would leave each ZeroMQ thread's arena that large. A fixed
// threshold keeps them mapped and unmapped.
const mmapThreshold = 1 << 20

func init() { C.mallopt(C.M_MMAP_THRESHOLD, mmapThreshold) }
