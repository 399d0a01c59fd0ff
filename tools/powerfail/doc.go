// Package powerfail holds a power-failure test of fila-server: its tests build the real binary,
// run it on a faultfs mount (github.com/filamq/fila/tools/faultfs) under enqueue and consume
// load, and repeatedly "pull the plug" (SIGKILL, then faultfs.FS.Drop, which discards every
// byte the server had not fsynced). Every third round the plug is pulled a second time inside
// the restart (0–300 ms in: Pebble's open, the WAL replay and flush). After each restart every
// message whose enqueue was answered Ok must still be stored unless an ack for it was sent, and
// no message whose ack was answered Ok may be delivered again.
//
// TestPowerFailure runs FILA_POWERFAIL_ROUNDS rounds (default 5) with fsync on and fails on
// any violation. TestPowerFailureWithoutFsync runs the same scenario with --fsync=false and
// fails unless the checker reports lost messages, which proves the checker can fail.
// TestKillOnDisk runs the rounds with SIGKILL alone on an ordinary file system, where the
// engine's scratch files are memory-mapped (faultfs has no mmap). TestDiskErrorsUnderLoad
// (FILA_DISKFAULT_ROUNDS, default 3) makes the disk fail (faultfs.FS.FailWrites, EIO) under load:
// every request must be answered, or the server exit because its store is stuck; writes must
// resume once the disk works, and a plug pull after it must lose nothing acknowledged.
// TestShutdownWithAHungDiskEnds sends SIGTERM while the disk answers no write
// (faultfs.FS.HoldWrites): the server must give its shutdown up after shutdown_timeout and exit 1,
// and its next start must have what it acknowledged. The faultfs
// tests need /dev/fuse and skip without it (CI checks for it before running the tests).
package powerfail
