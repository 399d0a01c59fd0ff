// Package powerfail holds a power-failure test of fila-server: its tests build the real binary,
// run it on a faultfs mount (github.com/filamq/fila/tools/faultfs) under enqueue and consume
// load, and repeatedly "pull the plug" (SIGKILL, then faultfs.FS.Drop, which discards every
// byte the server had not fsynced). After each restart every message whose enqueue was
// answered Ok must still be stored unless an ack for it was sent, and no message whose ack was
// answered Ok may be delivered again.
//
// TestPowerFailure runs FILA_POWERFAIL_ROUNDS rounds (default 5) with fsync on and fails on
// any violation. TestPowerFailureWithoutFsync runs the same scenario with --fsync=false and
// fails unless the checker reports lost messages, which proves the checker can fail. Both need
// /dev/fuse and skip without it (CI checks for it before running the tests).
package powerfail
