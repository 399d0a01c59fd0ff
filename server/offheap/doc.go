// Package offheap gives the queue engine memory outside the Go heap: an Allocator maps the
// big, pointer-free buffers of a queue's stored messages (the engine's record chunks and ID
// index) from the operating system and takes them back, and while it has a scratch directory it
// makes the buffers that are touched in a few places at a time regions of files there, whose
// pages Sweep drops from the process's memory into the kernel's page cache.
//
// It is engine.Allocator's implementation (pebble's internal/manual is the model): the engine
// imports nothing of it and takes the Go heap when it is given none. Its duties are the ones the
// engine must not have:
//
//   - I/O and system calls: anonymous mappings, the scratch directory's files (unnamed, their
//     space reserved with fallocate), madvise, and reading residency for the metrics.
//   - Goroutines: one that makes scratch regions ahead of the queues asking for them, and one that
//     unmaps the regions given back, whose file system work would stall a queue.
//   - Process limits: the mappings it holds stay within a share of vm.max_map_count; a buffer
//     past its share, or whose region cannot be made (a full disk, the space kept for the
//     store), is made the next way down — anonymous memory, then the Go heap — counted and
//     logged once.
//
// fila-server's main creates one Allocator, opens its scratch directory in data_dir, sweeps it
// about once a second, hands it to the broker (broker.Options.Allocator, then engine.Config.Alloc)
// and closes it when the server stops. All its state is the Allocator's: the share of
// vm.max_map_count is counted per Allocator, so a process should hold one.
//
// Memory from an Allocator is not part of durability: a restart rebuilds every queue from its
// log and snapshot, and the scratch files vanish with the process.
package offheap
